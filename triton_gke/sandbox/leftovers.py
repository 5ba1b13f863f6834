"""What a sandbox run started, on disk, so the next run can stop what a killed one left behind.

A run that dies by SIGKILL (or a crash, or a closed terminal) cannot stop tritonserver, its python-backend
stubs, Prometheus, the GCS emulator and Locust, nor remove its /dev/shm regions and temporary folders. So
each run keeps a state file under build/sandbox/.runs/: its own pid and start time, and every process
below it (pid, start time, command lines), rewritten as they appear. The next run reads the files of runs
whose owner is gone and stops those processes only after checking, in /proc/<pid>/stat and
/proc/<pid>/cmdline, that the pid still is that process (same start time, a command line it was seen
with): a pid reused by anything else is left alone. It removes only /dev/shm files with the run's own
prefix and only the temporary folders the run recorded. A run still alive (a second sandbox) is never touched.

Every temporary folder of the run lives in its run folder (sandbox.run_folder: opened with the state, removed
with it); the next run removes the run folders of dead owners after stopping their processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import UnreadableFileError, one_line, parse_json, read_text_file
from triton_gke.contracts.paths import sandbox_build_dir
from triton_gke.sandbox import run_folder
from triton_gke.sandbox.processes import command_line, start_time

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = re.compile(r"^triton_sandbox_\d+_\d+_$")  # sandbox.triton.TritonServer.shm_prefix
# Temporary folders a run may record: Triton's work folder and model copies, Prometheus', the emulator's.
FOLDER_NAME = re.compile(r"^(triton-sandbox-|prometheus-sandbox-|gcs-emulator-)[A-Za-z0-9_]+$|^folder[A-Za-z0-9]{6}$")
WATCH_INTERVAL_S = 0.5
TERM_GRACE_S = 5.0


def default_state_dir() -> Path:
    """build/sandbox/.runs of the project folder (the current one: contracts/paths.py project_dir)."""
    return sandbox_build_dir() / ".runs"


def __getattr__(name: str) -> Path:
    # STATE_DIR, read as a constant by callers: the project folder's, as of the read (PEP 562).
    if name == "STATE_DIR":
        return default_state_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------- this run's record


@dataclass
class Recorded:
    pid: int
    start: int
    commands: list[list[str]] = field(default_factory=list)


class RunState:
    """The state file of the running sandbox; a thread keeps it up to date with the processes below it."""

    def __init__(self, state_dir: Path | None = None, folder_base: Path | None = None) -> None:
        self.path = Path(state_dir or default_state_dir()) / f"{uuid.uuid4().hex}.json"
        self.run_folder = run_folder.RunFolder(folder_base)  # every temporary folder of the run, in one place
        self.owner = Recorded(os.getpid(), start_time(os.getpid()) or 0)
        self.processes: dict[tuple[int, int], Recorded] = {}
        self.shm_prefixes: list[str] = []
        self.folders: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> RunState:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run_folder.open()
        self._write()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="sandbox-state")
        self._thread.start()
        return self

    def add_shm_prefix(self, prefix: str) -> None:
        with self._lock:
            self.shm_prefixes.append(prefix)
        self._write()

    def add_folder(self, folder: Path | str) -> None:
        with self._lock:
            self.folders.append(str(folder))
        self._write()

    def snapshot(self) -> None:
        """Record every process below this one (and a new command line after an exec) at once."""
        import psutil  # the 'local' extra: imported when used, so --help needs no extra

        changed = False
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.owner.pid).children(recursive=True):
                start, command = start_time(child.pid), command_line(child.pid)
                if start is None or command is None:
                    continue
                with self._lock:
                    seen = self.processes.setdefault((child.pid, start), Recorded(child.pid, start))
                    if command not in seen.commands:
                        seen.commands.append(command)
                        changed = True
        if changed:
            self._write()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            self.snapshot()

    def close(self) -> None:
        """The run stopped everything itself: no state to leave."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.run_folder.close()
        finally:
            self.path.unlink(missing_ok=True)

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "owner": {"pid": self.owner.pid, "start": self.owner.start},
                "processes": [vars(p) for p in self.processes.values()],
                "shm_prefixes": list(self.shm_prefixes),
                "folders": list(self.folders),
                "run_folder": str(self.run_folder.path or ""),
            }

    def _write(self) -> None:
        if self._stop.is_set():
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.as_json()), encoding="utf-8")
        os.replace(tmp, self.path)  # a SIGKILL mid-write leaves the previous complete file


# ---------------------------------------------------------------- the next run


@dataclass
class Cleaned:
    processes: list[int] = field(default_factory=list)
    shm_files: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    spared: list[int] = field(default_factory=list)  # recorded pids that are now other processes

    def __bool__(self) -> bool:
        return bool(self.processes or self.shm_files or self.folders)

    def summary(self) -> str:
        return (
            f"an earlier sandbox run was killed: stopped its {len(self.processes)} leftover processes, removed "
            f"{len(self.shm_files)} /dev/shm files and {len(self.folders)} temporary folders"
            + (f"; left alone {len(self.spared)} pids now used by other processes" if self.spared else "")
        )


def is_same_process(recorded: Recorded) -> bool:
    """The pid still runs the process recorded: same start time, and a command line it was seen with."""
    return start_time(recorded.pid) == recorded.start and command_line(recorded.pid) in recorded.commands


STATE_MAX_BYTES = 1024 * 1024  # a run's pids, command lines and folders: a few KiB


def read_state(path: Path) -> dict[str, Any]:
    """A run's state file through the one bounded reader (triton_gke/bounded_files.py); UnreadableFileError, one line
    naming it, for anything else: the state folder is the user's, and a FIFO or /dev/zero there must not stall the
    cleanup."""
    state = parse_json(read_text_file(path, STATE_MAX_BYTES, "a sandbox run's state file"), path)
    if not isinstance(state, dict):
        raise UnreadableFileError(f"{one_line(path)}: not a sandbox run's state file (expected a JSON object)")
    return state


def clean_leftovers(state_dir: Path | None = None, folder_base: Path | None = None) -> Cleaned:
    """Stop and remove what runs whose owner is gone left behind; skip runs still alive.

    Processes first, then folders: a leftover tritonserver would go on writing model copies into its run folder.
    """
    cleaned = Cleaned()
    for path in sorted(Path(state_dir or default_state_dir()).glob("*.json")):
        try:
            state = read_state(path)
            owner = Recorded(**state["owner"])
        except (ValueError, KeyError, TypeError):  # UnreadableFileError is a ValueError
            path.unlink(missing_ok=True)  # unreadable: nothing in it can be verified, so nothing is acted on
            continue
        if start_time(owner.pid) == owner.start:
            continue  # that run is still going (another sandbox): not ours to stop
        _clean_run(state, cleaned)
        path.unlink(missing_ok=True)
    cleaned.folders += [str(f) for f in run_folder.remove_orphans(folder_base)]  # bench's, and SIGKILLed runs'
    return cleaned


def _clean_run(state: dict[str, Any], cleaned: Cleaned) -> None:
    recorded = [Recorded(**p) for p in state.get("processes", [])]
    alive = []
    for process in recorded:
        if is_same_process(process):
            alive.append(process)
        elif start_time(process.pid) is not None:
            cleaned.spared.append(process.pid)
    _stop(alive)
    cleaned.processes += [p.pid for p in alive]
    for prefix in state.get("shm_prefixes", []):
        if SHM_PREFIX.match(prefix):
            for shm in SHM_DIR.glob(f"{prefix}*"):
                with contextlib.suppress(OSError):
                    shm.unlink()
                    cleaned.shm_files.append(str(shm))
    for folder in [*map(Path, state.get("folders", [])), *_model_copies(recorded)]:
        if _removable(folder) and str(folder) not in cleaned.folders:
            shutil.rmtree(folder, ignore_errors=True)
            cleaned.folders.append(str(folder))


def _stop(processes: list[Recorded]) -> None:
    """SIGTERM, then SIGKILL what still runs after a grace period; each signal only after checking the pid."""
    for sig, wait_s in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 2.0)):
        running = [p for p in processes if is_same_process(p)]
        for process in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, sig)
        deadline = time.monotonic() + wait_s
        while running and time.monotonic() < deadline:
            running = [p for p in running if start_time(p.pid) == p.start]
            time.sleep(0.1)
        if not running:
            return


def _model_copies(processes: list[Recorded]) -> list[Path]:
    """/tmp/folderXXXXXX copies Triton made of a gs:// repository, named by its stubs' command lines
    (STUB /tmp/folderXXXXXX/<version>/model.py ...), for a run killed while its models were loading."""
    return [
        Path(command[1]).parent.parent
        for process in processes
        for command in process.commands
        if len(command) > 1 and command[0].endswith("triton_python_backend_stub")
    ]


def _removable(folder: Path) -> bool:
    """Only a folder of the kinds a run creates, directly in the temporary directory, and not a link."""
    tmp = Path(tempfile.gettempdir()).resolve()
    return (
        folder.parent.resolve() == tmp
        and bool(FOLDER_NAME.match(folder.name))
        and folder.is_dir()
        and not folder.is_symlink()
    )
