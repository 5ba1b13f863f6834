"""The build manifest: which settings a model repository was built from and the SHA-256 of every file in it.

The builder writes it last (`.model_repo.json` at the repository root); the upload (infra/model_upload.py's
digest, `triton-gke sync`) checks the files against it first, so a model file edited after the
build, by hand or by a tool, is refused instead of uploaded. Light on purpose (no onnx import): the sync and
the Pulumi program load it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import parse_json, read_text_file
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.reserved import IGNORED_DIRS, MANIFEST  # MANIFEST marks the folders the builder owns
from triton_gke.one_line import model_repo_command

# A manifest holds ~150 bytes a file; a built repository has tens of files, a user's model source a few thousand.
MANIFEST_MAX_BYTES = 16 * 1024 * 1024
FILES = "files"  # manifest key: POSIX path below the root -> SHA-256 (hex) of the file
# Manifest key: POSIX path -> cache key (its recipe), for the model files whose bytes depend on the machine that built
# them (model_repo/build.py _mark); the upload's digest names these by recipe, not bytes.
BY_RECIPE = "machine_dependent"
# Manifest key: the compute capabilities whose TensorRT plans the repository's configs name (ModelRepoSettings
# plan_compute_capabilities); absent when its TensorRT variants run in ONNX Runtime.
PLAN_CAPABILITIES = "plan_compute_capabilities"


def rebuild(stack: str | None = None) -> str:
    """The end of a message about a stale or broken build: `rebuild with make model-repo` where make runs, else
    `rebuild with triton-gke model-repo` (an installed package has no Makefile); with the stack when known."""
    return f"rebuild with {model_repo_command(stack)}"


_BLOCK = 1 << 20


class ManifestMismatch(ModelRepoError):
    """A file differs from, or is missing in, the build manifest; str() is one line naming it."""


def _show(path: Path | str) -> str:
    """A path for a one-line message: names with control characters or undecodable bytes in ascii() quoting."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ascii(text)
    return ascii(text) if any(not c.isprintable() and c != " " for c in text) else text


def sha256_file(path: Path) -> str:
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def repository_files(root: Path) -> Iterator[Path]:
    """Every regular file below root but the manifest and Python bytecode folders, sorted."""
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in sorted(names):
            path = Path(folder) / name
            if path != root / MANIFEST:
                yield path


def file_digests(root: Path, known: dict[str, str] | None = None) -> dict[str, str]:
    """relative POSIX path -> SHA-256 of every file below root; `known` digests are taken as given."""
    known = known or {}
    digests = {}
    for path in repository_files(root):
        relative = path.relative_to(root).as_posix()
        digests[relative] = known.get(relative) or sha256_file(path)
    return digests


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest, or ModelRepoError naming the file when it is missing or unreadable."""
    path = Path(root) / MANIFEST

    def error(line: str) -> ModelRepoError:
        return ModelRepoError(f"{line}; {rebuild()}")

    # Through the one bounded reader: the manifest sits in a folder a user can write to (a FIFO there must not hang).
    manifest = parse_json(read_text_file(path, MANIFEST_MAX_BYTES, "a build manifest", error), path, error)
    if not isinstance(manifest, dict):
        raise ModelRepoError(f"{_show(path)}: not a build manifest; {rebuild()}")
    return manifest


def verify_repository(root: Path) -> None:
    """Refuse (ManifestMismatch, one line) any file that differs from, is missing in, or is not in the manifest.

    Each file is hashed once per (inode, size, mtime, ctime): ctime changes on every write and cannot be set
    back by a user, so an unchanged stat means unchanged bytes, and a preview never re-reads 1 GB.
    """
    root = Path(root)
    manifest = read_manifest(root)
    recorded = manifest.get(FILES)
    if not isinstance(recorded, dict) or not recorded:
        raise ManifestMismatch(
            f"{_show(root / MANIFEST)}: built without file digests (an older model_repo); {rebuild()}"
        )
    present = {path.relative_to(root).as_posix(): path for path in repository_files(root)}
    for relative, digest in sorted(recorded.items()):
        path = present.pop(relative, None)
        if path is None:
            raise ManifestMismatch(f"{_show(root / relative)}: missing since the build; {rebuild()}")
        if _digest(path) != digest:
            why = "changed since the build (SHA-256 differs from the manifest)"
            raise ManifestMismatch(f"{_show(path)}: {why}; {rebuild()}")
    if present:
        raise ManifestMismatch(f"{_show(min(present.values()))}: not written by the build; {rebuild()}")


def verify_if_present(root: Path, error: type[Exception] = ManifestMismatch) -> None:
    """verify_repository() for a folder that has a manifest (a repository built elsewhere has none)."""
    if (Path(root) / MANIFEST).is_file():
        try:
            verify_repository(root)
        except ModelRepoError as err:
            raise error(str(err)) from None


# SHA-256 per file identity (device, inode) and stat: hard links of one file (the build links the ONNX file the
# original and TensorRT variants share, model_repo/build.py) are one file, hashed once (358 MB read as 128 MB).
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}


def _digest(path: Path) -> str:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device in its place would block the hash (red team: a hang)
            raise ManifestMismatch(f"{_show(path)}: not a regular file; {rebuild()}")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if key not in _DIGESTS:
            _DIGESTS[key] = sha256_file(path)
        return _DIGESTS[key]
    except OSError as err:  # a broken link, a file made unreadable
        raise ManifestMismatch(f"{_show(path)}: cannot read ({err.strerror}); {rebuild()}") from None
