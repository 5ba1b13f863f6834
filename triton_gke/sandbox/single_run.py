"""One sandbox at a time per checkout: a second `make sandbox` is refused in one line naming the running one.

Two runs would not collide on ports: each has its own loopback-only network namespace, where the GCS
emulator binds 9023 and Triton 8000-8002, reached from here through forwarded free ports (without a
namespace every port is a free one). They would collide on files: both rebuild build/model_repository_cpu,
and the second's start removes the first's outputs (report, Locust CSVs, Prometheus data) from the shared
results folder while the first still writes them. So the run holds an exclusive flock(2) on a lock file for
its whole life; the kernel drops it when the process ends, even by kill -9, so a dead run never blocks the
next (https://man7.org/linux/man-pages/man2/flock.2.html).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from triton_gke.contracts.paths import sandbox_build_dir


def default_lock_file() -> Path:
    """build/sandbox/.sandbox.lock of the project folder (the current one: contracts/paths.py project_dir)."""
    return sandbox_build_dir() / ".sandbox.lock"


def __getattr__(name: str) -> Path:
    # LOCK_FILE, read as a constant by callers: the project folder's lock, as of the read (PEP 562).
    if name == "LOCK_FILE":
        return default_lock_file()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SandboxBusy(RuntimeError):
    """Another sandbox of this checkout is running; the message names its pid."""


@contextlib.contextmanager
def only_run(lock_file: Path | None = None) -> Iterator[None]:
    """Hold the project's sandbox lock, or raise SandboxBusy at once (never wait: a run lasts minutes)."""
    lock_file = lock_file or default_lock_file()
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxBusy(_busy_message(os.pread(fd, 200, 0).decode(errors="replace"))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {time.strftime('%H:%M:%S')}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays, so every run locks the same one


def _busy_message(holder: str) -> str:
    pid, _, since = holder.strip().partition(" ")
    who = f"pid {pid}, started {since}" if pid.isdigit() and since else "its pid not yet recorded"
    return (
        f"another sandbox is running in this checkout ({who}); wait for it to finish or stop it"
        + (f" (kill {pid})" if pid.isdigit() else "")
        + ": two runs would share build/model_repository_cpu and their results folder"
    )
