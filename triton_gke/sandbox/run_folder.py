"""One temporary folder per run: everything a sandbox or bench run (and its servers) writes as temporary files.

    with RunFolder() as folder:          # $TMPDIR/triton-gke-run-<pid>-<random>/ with a marker
        ...                              # tempfile.mkdtemp() and every child's $TMPDIR now land inside
    # removed: on a normal end, an exception, Ctrl-C or SIGTERM (InterruptSignals turns it into an exception)

    remove_orphans()                     # at the next start: folders of runs killed by SIGKILL

A run killed by SIGKILL (or the OOM killer, or a closed terminal) removes nothing, and Triton's model copies
(~250 MB a model) stayed in /tmp. Now all of a run's temporary folders live in this one folder, so the next
run removes a killed run's leftovers in one step, and only those: a folder is removed only when it carries our
marker file (written by the run that owns it: its pid and that process's start time, field 22 of
/proc/<pid>/stat) and that process is gone or the pid now names another process (other start time). A folder
of a live run, a folder without a valid marker, a file or a symbolic link is never touched, and nothing is
followed out of the temporary directory (shutil.rmtree does not follow symbolic links inside the folder).
Before the folder goes, the processes still running with $TMPDIR inside it are stopped (the run's children).

While the folder is open, tempfile.tempdir and $TMPDIR point at it: the sandbox's own temporary folders
(tritonserver's work folder, Prometheus' TSDB, the GCS emulator's, bench's) are created inside, and children
(Locust, Prometheus, the emulator) inherit $TMPDIR. tritonserver ignores $TMPDIR for its model copies: it puts
them in $TRITON_GCS_MOUNT_DIRECTORY, /tmp by default (triton-inference-server/core
src/filesystem/implementations/gcs.h, GCSFileSystem::LocalizePath; kDefaultMountDirectory = "/tmp" in
common.h; mkdtemp of "folderXXXXXX" in local.h), so sandbox.triton sets that variable to its work folder.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import UnreadableFileError, one_line, parse_json, read_text_file
from triton_gke.sandbox.processes import start_time

PREFIX = "triton-gke-run-"
MARKER = ".triton-gke-run.json"
MARKER_KIND = "triton-gke-run"
_MARKER_MAX_BYTES = 4096
TERM_GRACE_S = 3.0  # a leftover tritonserver would otherwise take its --exit-timeout-secs (20 s on GKE's command line)
_active: list[RunFolder] = []  # open run folders of this process, innermost last


def base_dir() -> Path:
    """Where run folders are made and looked for: the temporary directory as it was before any run folder opened."""
    return _active[0].base if _active else Path(tempfile.gettempdir())


class RunFolder:
    """This run's temporary folder; open() makes it the default temporary directory, close() removes it."""

    def __init__(self, base: Path | str | None = None) -> None:
        self.base = Path(base) if base is not None else base_dir()
        self.path: Path | None = None
        self._previous: tuple[str | None, str | None] | None = None

    def open(self) -> RunFolder:
        if self.path is not None:
            raise RuntimeError("the run folder is already open")
        pid = os.getpid()
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=self.base))
        owner = {"kind": MARKER_KIND, "pid": pid, "start": start_time(pid) or 0}
        partial = self.path / f"{MARKER}.tmp"
        partial.write_text(json.dumps(owner), encoding="utf-8")
        os.replace(partial, self.path / MARKER)  # a kill mid-write leaves no marker: the folder is then never removed
        self._previous = (tempfile.tempdir, os.environ.get("TMPDIR"))
        tempfile.tempdir = str(self.path)
        os.environ["TMPDIR"] = str(self.path)
        _active.append(self)
        atexit.register(self.close)
        return self

    def env(self) -> dict[str, str]:
        """For a child's environment (os.environ already has it while the folder is open)."""
        return {"TMPDIR": str(self.path)} if self.path is not None else {}

    def close(self) -> None:
        if self.path is None:
            return
        atexit.unregister(self.close)
        if self in _active:
            _active.remove(self)
        if self._previous is not None:
            tempdir, tmpdir = self._previous
            if tempfile.tempdir == str(self.path):
                tempfile.tempdir = tempdir
            if os.environ.get("TMPDIR") == str(self.path):
                if tmpdir is None:
                    os.environ.pop("TMPDIR", None)
                else:
                    os.environ["TMPDIR"] = tmpdir
        path, self.path = self.path, None
        shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> RunFolder:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_marker(path: Path) -> dict[str, Any]:
    """A run folder's marker through the one bounded reader, never through a link (the program writes it as a file);
    UnreadableFileError, one line naming it, for anything else."""
    marker = parse_json(read_text_file(path, _MARKER_MAX_BYTES, "a run folder's marker", follow_links=False), path)
    if not isinstance(marker, dict):
        raise UnreadableFileError(f"{one_line(path)}: not a run folder's marker (expected a JSON object)")
    return marker


def owner_of(folder: Path) -> tuple[int, int] | None:
    """(pid, start time) from the marker of a real folder (not a link) named like ours; None if anything is off."""
    try:
        if not folder.name.startswith(PREFIX) or not stat.S_ISDIR(folder.lstat().st_mode):
            return None
        owner = read_marker(folder / MARKER)
        pid, start = owner["pid"], owner["start"]
    except (OSError, ValueError, KeyError):  # UnreadableFileError is a ValueError
        return None
    if owner.get("kind") != MARKER_KIND or type(pid) is not int or type(start) is not int or pid <= 0:
        return None
    return pid, start


def is_orphan(folder: Path) -> bool:
    """Ours (valid marker), and its owner is gone: no such pid, a zombie, or a pid reused by a later process."""
    owner = owner_of(folder)
    return owner is not None and start_time(owner[0]) != owner[1]


def remove_orphans(base: Path | str | None = None) -> list[Path]:
    """Remove the run folders in `base` (default: base_dir()) whose owner is gone; return them.

    Processes the dead run started that still run in its folder ($TMPDIR inside it since their exec: tritonserver
    and its stubs, Locust, Prometheus, the emulator; the run's state file may have missed one started just before
    the kill) are stopped first, so none goes on writing there.
    """
    root = Path(base) if base is not None else base_dir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in sorted(root.iterdir()):
            if entry.name.startswith(PREFIX) and is_orphan(entry):
                _stop(processes_in(entry))
                shutil.rmtree(entry, ignore_errors=True)  # never follows a link (rmtree refuses a link at the top)
                removed.append(entry)
    return removed


def processes_in(folder: Path) -> list[tuple[int, int]]:
    """(pid, start time) of the processes whose environment, as exec'd, has $TMPDIR in `folder`."""
    inside = os.fsencode(folder)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        tmpdir = next((var[7:] for var in environ.split(b"\0") if var.startswith(b"TMPDIR=")), None)
        if tmpdir is not None and (tmpdir == inside or tmpdir.startswith(inside + b"/")):
            start = start_time(int(proc.name))
            if start is not None:
                found.append((int(proc.name), start))
    return found


def _stop(processes: list[tuple[int, int]]) -> None:
    """SIGTERM, then SIGKILL what still runs after TERM_GRACE_S; each signal only to the same process (start time)."""
    for sig, wait_s in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 2.0)):
        running = [(pid, start) for pid, start in processes if start_time(pid) == start]
        for pid, _ in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while running and time.monotonic() < deadline:
            time.sleep(0.1)
            running = [(pid, start) for pid, start in running if start_time(pid) == start]
        if not running:
            return


@contextlib.contextmanager
def this_run(base: Path | str | None = None) -> Iterator[RunFolder]:
    """Remove killed runs' folders, then hold this run's folder until the block ends."""
    remove_orphans(base)
    with RunFolder(base) as folder:
        yield folder
