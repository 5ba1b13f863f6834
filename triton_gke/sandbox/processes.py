"""Local processes of the sandbox, tests and bench: free ports, and stopping what we started.

    port = free_port()
    process = subprocess.Popen(command, start_new_session=True)
    code = stop_process(process, grace_s=15, group=True)  # SIGTERM, wait, SIGKILL, wait

`group=True` is for processes started with `start_new_session=True` (their own process group, whose id is
their pid: https://docs.python.org/3/library/subprocess.html#subprocess.Popen, start_new_session runs setsid),
so what they started themselves (tritonserver's python stubs) is stopped with them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from triton_gke.contracts.loadtest import LOCUST_ENV_KEYS

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on `host` that was free a moment ago (the kernel's pick for port 0).

    Another process may take it before the caller binds it: GcsEmulator tries three, and servers in a
    network namespace (sandbox.netns) bind fixed ports where nothing else runs.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def send_signal(process: subprocess.Popen[Any], sig: int, *, group: bool = False) -> None:
    """Signal the process, or its whole process group; nothing when it (or the group) is gone."""
    if not group:
        # Popen.send_signal does nothing once the child was reaped, so a reused pid is never hit
        # (https://docs.python.org/3/library/subprocess.html#subprocess.Popen.send_signal).
        process.send_signal(sig)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)  # the group setsid made for it: its id is the leader's pid


def wait_or_kill(process: subprocess.Popen[Any], timeout_s: float, *, group: bool = False) -> int:
    """Wait up to timeout_s for the process to exit, then SIGKILL it (its group) and wait; return its exit code.

    With group=True the group gets a last SIGKILL even when the leader exited by itself: members that
    outlived it (a server's worker processes) would otherwise keep running unowned.
    """
    if not timeout_s >= 0:  # NaN too: no wait to speak of
        raise ValueError(f"timeout_s: {timeout_s!r} is not a number of seconds >= 0")
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        send_signal(process, signal.SIGKILL, group=group)
        process.wait()  # SIGKILL cannot be caught or ignored (signal(7)), so this returns
    except BaseException:  # Ctrl-C or SIGTERM during the wait: the caller's cleanup stops here, so kill it now
        send_signal(process, signal.SIGKILL, group=group)
        process.wait()
        raise
    if group:
        send_signal(process, signal.SIGKILL, group=True)
    return process.returncode


def stop_process(process: subprocess.Popen[Any], grace_s: float, *, group: bool = False) -> int:
    """SIGTERM the process (its group), give it grace_s to exit, then SIGKILL; return its exit code.

    An exit code below zero is the signal that ended it (-15 SIGTERM without a handler, -9 SIGKILL).
    SIGCONT follows SIGTERM: a stopped process only acts on SIGTERM once continued, and SIGCONT does
    nothing to one that runs (https://man7.org/linux/man-pages/man7/signal.7.html, "Continue the process
    if it is currently stopped"). A process that already exited is only reaped.
    """
    if not grace_s >= 0:  # NaN too
        raise ValueError(f"grace_s: {grace_s!r} is not a number of seconds >= 0")
    if process.poll() is None:
        send_signal(process, signal.SIGTERM, group=group)
        send_signal(process, signal.SIGCONT, group=group)
    return wait_or_kill(process, grace_s, group=group)


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll until predicate() is true or the timeout passes; return the last result."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


# ---------------------------------------------------------------- SIGINT, SIGTERM and SIGHUP


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP: a BaseException, so no `except Exception` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptSignals:
    """Turn SIGINT/SIGTERM/SIGHUP into Interrupted, once: the `with` blocks on the way out then stop what was started.

    Python's default SIGTERM ends the process at once, without running `finally` or `__exit__` (signal module:
    only SIGINT gets a Python handler by default, https://docs.python.org/3/library/signal.html#general-rules),
    so a `kill` or a CI timeout left tritonserver and Locust running. After the first signal, or once the caller
    sets `shielded` as its cleanup starts, later ones are only remembered: a second Ctrl-C cannot cut the
    cleanup short and leave processes behind. SIGHUP (the terminal or SSH session closed) ends a process at once
    too; under `nohup` it is ignored, and stays so (nohup sets SIGHUP to SIG_IGN: POSIX nohup)."""

    def __init__(self) -> None:
        self.shielded = False
        self.received: int | None = None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = self.received or signum
        if _HOLD.depth:  # a process is being started: raised once the caller holds its Popen (interrupts_held)
            _HOLD.fired = self
            return
        self.raise_once()

    def raise_once(self) -> None:
        if not self.shielded and self.received is not None:
            self.shielded = True
            raise Interrupted(self.received)

    @contextlib.contextmanager
    def installed(self) -> Iterator[InterruptSignals]:
        wanted = [signal.SIGINT, signal.SIGTERM]
        wanted += [] if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else [signal.SIGHUP]
        previous = {sig: signal.signal(sig, self.handle) for sig in wanted}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class _Hold:
    depth = 0  # interrupts_held blocks entered
    fired: InterruptSignals | None = None  # the handler a signal reached while held


_HOLD = _Hold()


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while a process starts: `process = Popen(...)` inside, and a signal that came
    during the start is raised on leaving, when `process` is assigned and the caller's `except` can stop it.
    Raised inside Popen (after the child's exec, before Popen returns), it would leave the child running unseen:
    Popen returns only once the child has exec'd (subprocess docs, "Exceptions raised in the child process,
    before the new program has started to execute, will be re-raised in the parent"), which on a busy machine
    is long enough for a signal to land. Main thread only, inside run_interruptible (signal handlers run in the main
    thread, https://docs.python.org/3/library/signal.html#signals-and-threads; elsewhere it holds nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _HOLD.depth:
        _HOLD.fired = None  # a signal raised at once between an earlier hold's last two steps left its handler here
    _HOLD.depth += 1
    try:
        yield
    finally:
        _HOLD.depth -= 1
        if not _HOLD.depth and _HOLD.fired is not None:
            fired, _HOLD.fired = _HOLD.fired, None
            fired.raise_once()


def run_interruptible(body: Callable[[], int], stopped: str) -> int:
    """body()'s exit code; on SIGINT/SIGTERM/SIGHUP, once its `with` blocks have stopped what it started: one line
    ("interrupted by SIGTERM: <stopped>") and 128 + the signal's number, the shell's convention."""
    try:
        with InterruptSignals().installed():
            return body()
    except Interrupted as err:
        print(f"interrupted by {err}: {stopped}", file=sys.stderr)
        return 128 + err.signum


# ---------------------------------------------------------------- /proc: which process a pid is


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: clock ticks after boot; with the pid, it names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and ')'
    return int(fields[19]) if fields[0] != "Z" else None  # fields[0] is field 3 (state); a zombie is gone


def command_line(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")[:-1] if raw else []


# ---------------------------------------------------------------- environment of a local process


# The proxy variables HTTP clients (requests, urllib) and gRPC read, in either case: a local process talks to
# 127.0.0.1 only, so none may send it through a proxy (gRPC: grpc_proxy, https_proxy, http_proxy, no_grpc_proxy,
# no_proxy, https://github.com/grpc/grpc/blob/master/doc/environment_variables.md; curl/requests: lower and upper
# case, https://everything.curl.dev/usingcurl/proxies/env.html).
PROXY_KEYS = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "no_proxy", "no_grpc_proxy")


def without_proxies(env: dict[str, str]) -> dict[str, str]:
    """`env` without any proxy variable, and no_proxy=* so that nothing the process inherits later adds one."""
    return {k: v for k, v in env.items() if k.lower() not in PROXY_KEYS} | {"no_proxy": "*"}


def locust_base_environment() -> dict[str, str]:
    """This process's environment for a local Locust, before its settings are added: no proxy variable, and no
    locust-config key (contracts/loadtest.py LOCUST_ENV_KEYS), which must never reach a load test from the caller's
    environment by accident. The sandbox, the bench and the loop check start Locust from it."""
    return without_proxies({k: v for k, v in os.environ.items() if k not in LOCUST_ENV_KEYS})
