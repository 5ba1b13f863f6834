"""The local side of model_repo.sync: the whole source is checked and hashed before anything is sent.

A source folder is a Triton model repository. Each top-level folder that holds a config.pbtxt is a
model and must also hold at least one version folder with a file in it; Triton reads only numeric
version folders whose names do not start with "0" ("Model Versions" in
https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_repository.md).
Top-level files and folders without a config.pbtxt are not models: they are left out and listed in
Source.left_out. A source without any model is refused, so it can never empty the bucket.

Names must be valid UTF-8 without control characters: GCS object names are UTF-8 and may not hold
CR or LF, and control characters break XML listings (https://cloud.google.com/storage/docs/naming-objects).
A model folder may be a symbolic link (a model linked into the repository is synced like a copy), but a
link inside a model must stay inside the source root or that model's own folder: a link to ~/.config/gcloud
would otherwise put credentials into the bucket. A dangling link, a link loop, a FIFO or an unreadable file is
refused, naming the path. Model files are checked where that is cheap: a `.onnx` file must parse as ONNX
(onnx.checker on the file, without loading external data) and a Python backend's `model.py` must compile.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
import tokenize
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import google_crc32c
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import read_capped_file, read_text_file
from triton_gke.model_repo.reserved import IGNORED_DIRS, IGNORED_FILES, model_file_problem, model_name_problem

CONFIG_NAME = "config.pbtxt"
# A Triton config.pbtxt is a few KiB; every reader of one reads it whole, through the one bounded reader, up to this.
# Here, not in model_repo/configs.py: the sync runs on the base install, without the `models` extra configs imports.
CONFIG_MAX_BYTES = 4 * 1024 * 1024
# A single-file ONNX model is one protobuf message, which cannot exceed 2 GiB ("Large models >2GB" use external data,
# https://github.com/onnx/onnx/blob/main/docs/ExternalData.md): a larger file is refused by its size, before a parser
# holds it in memory.
MAX_ONNX_BYTES = 2 * 1024**3
_HASH_BLOCK = 1024 * 1024
# A Python backend's model.py is tens of KiB; it is read whole to compile it, so it is capped.
MODEL_PY_MAX_BYTES = 16 * 1024 * 1024


class SyncError(ValueError):
    """A sync that cannot proceed; the message is one line naming the bucket or file."""


@dataclass(frozen=True)
class LocalFile:
    relative: str  # POSIX path below the repository root
    path: Path
    size: int
    md5: str  # base64, as GCS reports md5Hash
    crc32c: str  # base64 big-endian, as GCS reports crc32c
    data: bytes | None = None  # content made by the sync (a pinned config); None: read `path`


@dataclass(frozen=True)
class SourceModel:
    name: str
    config_path: Path
    config: mc.ModelConfig
    served: tuple[int, ...]  # the version folders the local config's policy makes Triton load
    files: dict[str, Path]  # every file but config.pbtxt, keyed by its POSIX path below the model folder


@dataclass
class Source:
    root: Path
    models: dict[str, SourceModel] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # "name (why)" for top-level entries that are not models

    def paths(self) -> list[Path]:
        """Every file the models consist of, configs included, in a stable order."""
        return [p for m in self.models.values() for p in [m.config_path, *m.files.values()]]


def show(path: Path | str) -> str:
    """A path for a one-line message: undecodable bytes and every character that is not printable but ' ' (control
    characters, NEL, U+2028 and U+2029, which str.splitlines() also splits at, other spaces) escaped."""
    text = str(path)
    if any(not c.isprintable() and c != " " for c in text) or not _is_utf8(text):
        return ascii(text)
    return text


def _is_utf8(name: str) -> bool:
    # os.scandir hands out undecodable bytes as lone surrogates (PEP 383); they do not encode.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bad_characters(name: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in name)


def check_name(name: str, path: Path) -> None:
    if not _is_utf8(name):
        raise SyncError(f"{show(path)}: file name is not valid UTF-8 (GCS object names are UTF-8)")
    if _bad_characters(name):
        raise SyncError(f"{show(path)}: file name holds a control character (line break, tab, ...)")


def file_hashes(path: Path) -> tuple[str, str, int]:
    """(md5, crc32c, size) of a file, hashes in base64 like GCS metadata; read in 1 MiB blocks."""
    md5 = hashlib.md5(usedforsecurity=False)
    crc = google_crc32c.Checksum()
    size = 0
    try:
        with path.open("rb") as stream:
            while block := stream.read(_HASH_BLOCK):
                md5.update(block)
                crc.update(block)
                size += len(block)
    except OSError as err:
        raise SyncError(f"cannot read {show(path)}: {err.strerror or err}") from err
    return _b64(md5.digest()), _b64(crc.digest()), size


def bytes_file(relative: str, path: Path, data: bytes) -> LocalFile:
    """A LocalFile whose content is made here rather than read from `path`."""
    crc = google_crc32c.Checksum()
    crc.update(data)
    md5 = _b64(hashlib.md5(data, usedforsecurity=False).digest())
    return LocalFile(relative, path, len(data), md5, _b64(crc.digest()), data)


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError as err:
        raise SyncError(f"cannot read {show(folder)}: {err.strerror or err}") from err


def _stat(entry: os.DirEntry[str]) -> os.stat_result:
    try:
        return os.stat(entry.path)  # follows links: a linked model is synced like a copy
    except OSError as err:
        why = "broken link" if entry.is_symlink() else (err.strerror or str(err))
        raise SyncError(f"cannot read {show(entry.path)}: {why}") from err


def _check_link(entry: os.DirEntry[str], allowed: tuple[Path, ...]) -> None:
    """Refuse a link whose target lies outside every allowed folder (the source root, the model's own folder)."""
    if not allowed or not entry.is_symlink():
        return
    target = Path(os.path.realpath(entry.path))
    if not any(target.is_relative_to(folder) for folder in allowed):
        raise SyncError(
            f"{show(entry.path)}: a link that leads outside the source ({show(target)}); "
            "copy the file into the model instead"
        )


def walk_files(
    folder: Path, ancestors: frozenset[tuple[int, int]] = frozenset(), allowed: tuple[Path, ...] = ()
) -> Iterator[Path]:
    """Every regular file below folder, sorted, links followed within `allowed` folders; anything unusable refused."""
    if not ancestors:
        here = os.stat(folder)
        ancestors = frozenset({(here.st_dev, here.st_ino)})
    for entry in _scandir(folder):
        path = Path(entry.path)
        check_name(entry.name, path)
        info = _stat(entry)
        _check_link(entry, allowed)
        if stat.S_ISDIR(info.st_mode):
            if entry.name in IGNORED_DIRS:
                continue
            key = (info.st_dev, info.st_ino)
            if key in ancestors:
                raise SyncError(f"cannot read {show(path)}: a link loop (it leads back to a folder above it)")
            yield from walk_files(path, ancestors | {key}, allowed)
        elif stat.S_ISREG(info.st_mode):
            if entry.name not in IGNORED_FILES:
                yield path
        else:
            raise SyncError(f"cannot read {show(path)}: not a regular file")


def version_number(folder: str) -> int | None:
    """The version a folder name stands for, or None where Triton ignores the folder."""
    if folder.isascii() and folder.isdigit() and not folder.startswith("0"):
        return int(folder)
    return None


def _parse_config(path: Path) -> mc.ModelConfig:
    text = read_text_file(path, CONFIG_MAX_BYTES, "a Triton model configuration", SyncError)
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as err:
        message = " ".join(str(err).split())
        raise SyncError(f"{show(path)}: not a valid Triton model configuration: {message}") from err
    return config


def served_versions(config: mc.ModelConfig, versions: set[int], config_path: Path) -> tuple[int, ...]:
    """The versions Triton would load under the config's own policy.

    Default and `latest`: the n numerically greatest; `all`: every one; `specific`: those listed
    ("Version Policy" in
    https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md).
    """
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    ordered = sorted(versions)
    if choice == "all":
        return tuple(ordered)
    if choice == "specific":
        listed = sorted(set(policy.specific.versions))
        missing = [v for v in listed if v not in versions]
        if not listed or missing:
            raise SyncError(
                f"{show(config_path)}: version_policy lists versions {missing or '[]'}, "
                "but only folders holding a file are versions"
            )
        return tuple(listed)
    count = policy.latest.num_versions if choice == "latest" else 1
    if count < 1:
        raise SyncError(f"{show(config_path)}: version_policy latest needs num_versions of at least 1")
    return tuple(ordered[-count:])


def _model(name: str, folder: Path, files: list[Path], check_files: bool) -> SourceModel:
    relative = {path.relative_to(folder).as_posix(): path for path in files}
    config_path = folder / CONFIG_NAME
    versions = {v for rel in relative if "/" in rel and (v := version_number(rel.split("/", 1)[0])) is not None}
    if not versions:
        raise SyncError(f"{show(folder)}: has a {CONFIG_NAME} but no version folder (1/, 2/, ...) holding a file")
    for rel in sorted(relative):
        problem = model_file_problem(rel)  # names the toolkit reserves (model_repo/reserved.py)
        if problem is not None:
            raise SyncError(f"{show(folder / rel)}: {problem}")
    config = _parse_config(config_path)
    served = served_versions(config, versions, config_path)
    for rel, path in sorted(relative.items()):
        head, slash, rest = rel.partition("/")
        if check_files and slash and version_number(head) in served:
            check_model_file(path)
    return SourceModel(name, config_path, config, served, {r: p for r, p in relative.items() if r != CONFIG_NAME})


def check_model_file(path: Path) -> None:
    """Refuse a served `.onnx` file that is not ONNX, or a `model.py` that does not compile (one line)."""
    if path.name.endswith(".onnx"):
        _check_onnx(path)
    elif path.name == "model.py":
        _check_python(path)


def _check_onnx(path: Path) -> None:
    # Checked once per (inode, size, mtime, ctime), as model_repo.manifest hashes: ctime changes on every write and
    # cannot be set back, so an unchanged stat means unchanged bytes. Every plan scans the built repository (its
    # digest), and the check is most of a plan's time (0.8 of 2.6 s for prod).
    try:
        st = path.stat()
    except OSError as err:
        raise SyncError(f"{show(path)}: not a valid ONNX model ({_first_line(err)})") from None
    if st.st_size > MAX_ONNX_BYTES:
        raise SyncError(f"{show(path)}: not a valid ONNX model ({st.st_size} bytes, over the 2 GiB one file can hold)")
    problem = _onnx_problem(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if problem:
        raise SyncError(f"{show(path)}: not a valid ONNX model ({problem})")


@cache
def _onnx_problem(path: Path, device: int, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str | None:
    """Why the ONNX file at path (as of that stat) is not a valid model, or None."""
    # Imported here: onnx is heavy, and only a source holding an ONNX file needs it. check_model given a path
    # parses and checks the file in C++, without a Python copy of the weights (0.11 s for a 100 MB model here);
    # https://github.com/onnx/onnx/blob/main/docs/PythonAPIOverview.md#checking-a-large-onnx-model-2gb
    import onnx.checker
    from google.protobuf.message import DecodeError

    try:
        onnx.checker.check_model(str(path))
    except (onnx.checker.ValidationError, DecodeError, OSError, ValueError, RuntimeError) as err:
        return _first_line(err)
    return None


def _check_python(path: Path) -> None:
    # Bytes, so that compile() honours a coding declaration (PEP 263); bounded like every file the program reads.
    source = read_capped_file(path, MODEL_PY_MAX_BYTES, "a Python model", SyncError)
    try:
        # Decoded first, strictly, in the encoding its coding declaration or BOM names (UTF-8 without one): compile()
        # of the bytes lets an incomplete UTF-8 sequence at the very end of a comment through (CPython 3.11:
        # compile(b"#\xc3", ...) passes), which the Python backend's interpreter may refuse to read.
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        text = source.decode(encoding)
    except (SyntaxError, UnicodeError, LookupError) as err:
        raise SyncError(f"{show(path)}: the Python backend's model.py is not valid text ({_first_line(err)})") from None
    try:
        compile(text, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:  # ValueError: a NUL byte; the others: depth
        where = f" line {err.lineno}" if isinstance(err, SyntaxError) and err.lineno else ""
        why = _first_line(err)
        raise SyncError(f"{show(path)}: the Python backend's model.py does not compile{where} ({why})") from None


def _first_line(err: BaseException) -> str:
    text = " ".join(str(getattr(err, "msg", None) or err).split())
    return ascii(text)[1:-1] if not text.isprintable() else text[:200]


def hash_local(local_dir: Path, paths: list[Path]) -> dict[str, LocalFile]:
    """Hash files (every byte, before anything is sent), keyed by their POSIX path below local_dir. Hard links of
    one file (device, inode and stat alike: the build links the ONNX file several variants share) are read once."""
    result = {}
    hashed: dict[tuple[int, int, int, int], tuple[str, str, int]] = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError as err:
            raise SyncError(f"cannot read {show(path)}: {err.strerror or err}") from err
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if identity not in hashed:
            hashed[identity] = file_hashes(path)
        md5, crc, size = hashed[identity]
        relative = path.relative_to(local_dir).as_posix()
        result[relative] = LocalFile(relative, path, size, md5, crc)
    return result


def scan_source(local_dir: Path, check_files: bool = True) -> Source:
    """Check every name and file of the source and hash the models' files; send nothing.

    check_files=False leaves out the served files' own check (check_model_file), for a caller that has just
    matched every byte to a build that checked them (infra/model_upload.py: the digest a plan computes).
    """
    local_dir = Path(local_dir)
    if not local_dir.is_dir():
        raise SyncError(f"local model repository not found: {show(local_dir)}")
    source = Source(local_dir)
    for entry in _scandir(local_dir):
        path = Path(entry.path)
        check_name(entry.name, path)
        info = _stat(entry)
        if not stat.S_ISDIR(info.st_mode):
            if not stat.S_ISREG(info.st_mode):
                raise SyncError(f"cannot read {show(path)}: not a regular file")
            if entry.name not in IGNORED_FILES:
                source.left_out.append(f"{entry.name} (a file, not a model folder)")
            continue
        if entry.name in IGNORED_DIRS and not os.path.lexists(path / CONFIG_NAME):
            continue  # bytecode, not a model; one holding a config.pbtxt is refused below, never skipped unsaid
        # realpath, not resolve(): the same spelling _check_link compares against.
        allowed = (Path(os.path.realpath(local_dir)), Path(os.path.realpath(path)))
        files = list(walk_files(path, allowed=allowed))
        if (path / CONFIG_NAME) not in files:
            why = "empty" if not files else f"no {CONFIG_NAME}"
            source.left_out.append(f"{entry.name}/ ({why}: not a model)")
            continue
        problem = model_name_problem(entry.name)  # names the toolkit reserves (model_repo/reserved.py)
        if problem is not None:
            raise SyncError(f"{show(path)}: {problem}")
        source.models[entry.name] = _model(entry.name, path, files, check_files)
    if not source.models:
        # Syncing a source without models would remove every model under the prefix.
        raise SyncError(
            f"local model repository holds no model: {show(local_dir)} "
            f"(a model is a folder with {CONFIG_NAME} and a version folder such as 1/ holding a file)"
        )
    return source
