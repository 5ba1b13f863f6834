"""The plan's --out folder: every Kubernetes object as YAML, written only as new files and never through a link; a
later plan removes only the files it listed as its own (offline/plan.py --out)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from triton_gke.bounded_files import one_line, output_folder_problem, read_capped_file
from triton_gke.contracts.paths import build_dir
from triton_gke.offline.plan_view import kubernetes_objects
from triton_gke.offline.runtime import Plan
from triton_gke.settings import ConfigError
from triton_gke.settings.stack import check_stack_name

# Lists (one relative path a line) the files the plan wrote into its out folder: the next plan removes
# those and nothing else, so `--out .` or a folder holding other files can never lose a stranger's file.
WRITTEN_LIST = ".offline-plan-files"
_WRITTEN_LIST_MAX_BYTES = 4 * 1024 * 1024  # a plan writes ~100 files
# Every file is created, never opened for overwriting, and never through a link: a symlink planted in the
# out folder (or the folder of a cluster replaced by one) would otherwise send the YAML to any file the user
# can write (O_NOFOLLOW: open(2) fails on a link as the last component, O_EXCL: fails on anything existing,
# links included; https://man7.org/linux/man-pages/man2/open.2.html).
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class _FolderError(Exception):
    """A refusal of the out folder, without the option it came from (check_out_dir and write_kubernetes_objects
    raise it again as a ConfigError starting with that option: `--out` or `--stack S`)."""


def default_out_dir(stack: str) -> Path:
    """build/plan/<stack>; a stack name that is not a plain Pulumi stack name (`../../v`) is a ConfigError."""
    return build_dir() / "plan" / check_stack_name(stack)


def check_out_dir(out_dir: Path, option: str = "--out") -> None:
    """Refuse an out folder that is a link, or holds files the plan did not write (no list of written files).

    No exception for a folder of folders: whatever it holds, the plan removes only what its own list names.
    """
    try:
        _check_out_dir(out_dir)
    except _FolderError as err:
        raise ConfigError(f"{option}: {err}") from None


def _check_out_dir(out_dir: Path) -> None:
    if os.path.islink(out_dir):  # False, never an error, for a path too long or holding a NUL byte
        _refuse_link(out_dir)
    # A file, a path under one, /proc or /sys, a read-only folder, a name too long: refused before the program is
    # evaluated (the one check of output folders).
    problem = output_folder_problem(out_dir)
    if problem is not None:
        raise _FolderError(f"{one_line(out_dir)}: {problem}")
    _refuse_link(out_dir / WRITTEN_LIST)
    if not out_dir.is_dir() or (out_dir / WRITTEN_LIST).is_file() or not any(out_dir.iterdir()):
        return
    raise _FolderError(
        f"{out_dir} is not empty and was not written by offline.plan (no {WRITTEN_LIST}); choose an empty or new folder"
    )


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise _FolderError(f"{path} is a symbolic link; the plan never writes or removes through a link (remove it)")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _check_path(out_dir: Path, relative: PurePosixPath) -> os.stat_result | None:
    """lstat each component of out_dir/relative: a link anywhere is refused; the last one's stat (None: absent)."""
    for depth in range(1, len(relative.parts) + 1):
        path = out_dir.joinpath(*relative.parts[:depth])
        status = _lstat(path)
        if status is None:
            return None
        _refuse_link(path)
        if depth < len(relative.parts) and not stat.S_ISDIR(status.st_mode):
            raise _FolderError(f"{path} is in the way of the plan's files and is not a folder")
    return status


def _previously_written(out_dir: Path) -> list[PurePosixPath]:
    """The regular files an earlier plan listed, relative to out_dir (entries leaving it are dropped); never found by
    a pattern: without the list nothing is the plan's."""
    listing = out_dir / WRITTEN_LIST
    if _lstat(listing) is None:
        return []
    # Through the one bounded reader: out_dir is the user's, and the list replaced by a FIFO must not hang the plan.
    data = read_capped_file(listing, _WRITTEN_LIST_MAX_BYTES, "the plan's list of the files it wrote", _FolderError)
    if b"\0" in data:  # no file name holds one
        raise _FolderError(f"{one_line(listing)}: binary data (a NUL byte); not the plan's list of the files it wrote")
    lines = data.decode("utf-8", errors="surrogateescape").splitlines()  # names as os.fsencode wrote them
    entries = [PurePosixPath(line) for line in lines if line.strip()]
    inside = [e for e in entries if e.parts and not e.is_absolute() and ".." not in e.parts]
    return sorted({e for e in inside if (s := _check_path(out_dir, e)) is not None and stat.S_ISREG(s.st_mode)})


def _planned_files(plan: Plan) -> list[tuple[PurePosixPath, dict[str, Any]]]:
    files = []
    for provider, manifest in kubernetes_objects(plan):
        meta = manifest.get("metadata", {})
        name = f"{manifest.get('kind', 'Object')}-{meta.get('namespace', 'cluster')}-{meta.get('name', 'unnamed')}.yaml"
        files.append((PurePosixPath(provider, name.lower()), manifest))
    return files


def _check_targets(out_dir: Path, targets: list[PurePosixPath], previous: list[PurePosixPath]) -> None:
    """Before anything changes: every file the plan writes is new or its own, on a path without links."""
    for relative in targets:
        status = _check_path(out_dir, relative)
        if status is not None and relative not in previous:
            raise _FolderError(f"{out_dir / relative} exists and was not written by offline.plan")


def write_kubernetes_objects(plan: Plan, out_dir: Path, option: str = "--out") -> list[Path]:
    """Replace the files an earlier plan wrote into out_dir with this plan's, and list them for the next one.

    Everything is checked first (links, strangers in the way), so a refusal leaves the folder as it was. A refusal
    is a ConfigError starting with `option`, the command-line option the folder came from.
    """
    try:
        return _write_kubernetes_objects(plan, out_dir)
    except _FolderError as err:
        raise ConfigError(f"{option}: {err}") from None


def _write_kubernetes_objects(plan: Plan, out_dir: Path) -> list[Path]:
    _check_out_dir(out_dir)
    previous = _previously_written(out_dir)
    files = _planned_files(plan)
    _check_targets(out_dir, [relative for relative, _ in files], previous)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        root = os.open(out_dir, _DIRECTORY)
    except OSError as err:
        raise _FolderError(f"cannot use {out_dir}: {err.strerror}") from None
    try:
        # Listed first with the old ones: a plan killed half-way leaves a list that still covers its files.
        _write_listing(root, sorted({*previous, *(relative for relative, _ in files)}))
        _remove_previous(out_dir, previous)
        for relative, manifest in files:
            _create(root, relative, yaml.safe_dump(manifest, sort_keys=False))
        _write_listing(root, [relative for relative, _ in files])
    except OSError as err:  # a link or file planted between the checks and the writes
        raise _FolderError(f"cannot write {out_dir / (err.filename or '')}: {err.strerror}") from None
    finally:
        os.close(root)
    return [out_dir / relative for relative, _ in files]


def _remove_previous(out_dir: Path, previous: list[PurePosixPath]) -> None:
    for relative in previous:
        path = out_dir / relative
        path.unlink()  # unlink(2) removes a link itself, never its target
        if path.parent != out_dir:
            with contextlib.suppress(OSError):  # its provider folder, when nothing else is left in it
                path.parent.rmdir()


def _create(root: int, relative: PurePosixPath, text: str) -> None:
    """Create root/relative (new file, no link followed: each folder is opened with O_NOFOLLOW)."""
    folder = os.dup(root)
    try:
        for part in relative.parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=folder)
            inner = _open(part, _DIRECTORY, folder, relative)
            os.close(folder)
            folder = inner
        fd = _open(relative.name, _CREATE, folder, relative, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    finally:
        os.close(folder)


def _open(name: str, flags: int, folder: int, relative: PurePosixPath, mode: int = 0o777) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=folder)
    except OSError as err:
        err.filename = relative.as_posix()
        raise


def _write_listing(root: int, relatives: list[PurePosixPath]) -> None:
    """Write the list beside the files under a temporary name, then rename it over the old one (rename(2)
    replaces the name itself, even a link, never what a link points to)."""
    temporary = f"{WRITTEN_LIST}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=root)
    fd = _open(temporary, _CREATE, root, PurePosixPath(temporary), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{relative.as_posix()}\n" for relative in relatives))
    os.replace(temporary, WRITTEN_LIST, src_dir_fd=root, dst_dir_fd=root)
