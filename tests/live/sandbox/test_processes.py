"""sandbox.processes with real child processes: stop_process's SIGTERM, grace, SIGKILL and exit codes; free_port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.sandbox.processes import run_interruptible, stop_process, wait_for

# Each child says "ready" once its SIGTERM disposition is set, so no signal arrives before it.
EXITS_ON_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit({code}))\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


IGNORES_TERM = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(120)\n"
)


DEFAULT_TERM = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"


# A leader that exits on SIGTERM and leaves a member in its process group that ignores it (tritonserver's stubs).
LEADER_WITH_MEMBER = (
    "import signal, subprocess, sys, time\n"
    f"member = subprocess.Popen([sys.executable, '-c', {IGNORES_TERM!r}], stdout=subprocess.PIPE, text=True)\n"
    "member.stdout.readline()\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
    "print(member.pid, flush=True)\n"
    "time.sleep(120)\n"
)


SLOW_MACHINE_S = 20.0  # a python start and a signal round trip on 2 busy cores stay far below this


def start(script: str, *, group: bool = False) -> tuple[subprocess.Popen[str], str]:
    """The child and its first line, once it printed it."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=group)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Children a test starts; whatever a failing test left running is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie waiting for its new parent to reap it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@settings(max_examples=25, deadline=None)
@given(code=st.integers(min_value=0, max_value=255))
def test_a_child_that_exits_on_sigterm_returns_its_own_code_at_once(code: int) -> None:
    child, line = start(EXITS_ON_TERM.format(code=code))
    try:
        assert line == "ready"
        began = time.monotonic()
        assert stop_process(child, grace_s=60) == code
        assert time.monotonic() - began < SLOW_MACHINE_S  # it exited on SIGTERM; the grace time was not spent
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_time(children: list[subprocess.Popen[str]]) -> None:
    child, line = start(IGNORES_TERM)
    children.append(child)
    assert line == "ready"
    began = time.monotonic()
    assert stop_process(child, grace_s=1.5) == -signal.SIGKILL
    assert 1.5 <= time.monotonic() - began < 1.5 + SLOW_MACHINE_S


def test_a_suspended_child_is_continued_so_that_sigterm_ends_it(children: list[subprocess.Popen[str]]) -> None:
    child, line = start(DEFAULT_TERM)
    children.append(child)
    assert line == "ready"
    child.send_signal(signal.SIGSTOP)  # a hung server (test_faults suspends tritonserver like this)
    assert wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_STOPPED, 10)
    assert stop_process(child, grace_s=60) == -signal.SIGTERM  # not SIGKILL after 60 s


def test_a_child_that_already_exited_is_only_reaped(children: list[subprocess.Popen[str]]) -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], stdout=subprocess.PIPE, text=True)
    children.append(child)
    assert wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, SLOW_MACHINE_S)
    assert stop_process(child, grace_s=60) == 3


def test_group_stops_the_members_a_leader_leaves_behind(children: list[subprocess.Popen[str]]) -> None:
    leader, line = start(LEADER_WITH_MEMBER, group=True)
    children.append(leader)
    member = int(line)
    assert stop_process(leader, grace_s=60, group=True) == 7
    assert wait_for(lambda: gone(member), 10), "the member that ignores SIGTERM still runs"


def test_without_group_only_the_process_itself_is_stopped(children: list[subprocess.Popen[str]]) -> None:
    leader, line = start(LEADER_WITH_MEMBER, group=True)
    children.append(leader)
    member = int(line)
    try:
        assert stop_process(leader, grace_s=60) == 7
        time.sleep(0.5)
        assert not gone(member)  # what group=True is for
    finally:
        psutil.Process(member).kill()


@settings(max_examples=25, deadline=None)
@given(grace_s=st.floats(max_value=-1e-9) | st.just(float("nan")))
def test_a_negative_or_nan_grace_time_is_refused_before_any_signal(grace_s: float) -> None:
    child, line = start(DEFAULT_TERM)
    try:
        assert line == "ready"
        with pytest.raises(ValueError, match="^grace_s: "):
            stop_process(child, grace_s=grace_s)
        assert child.poll() is None  # still running: nothing was sent
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_the_grace_time_still_kills_the_child(
    signum: int, children: list[subprocess.Popen[str]]
) -> None:
    """Ctrl-C or `kill` while a cleanup waits for a child that ignores SIGTERM: the wait is cut short, so the
    child is SIGKILLed at once instead of being left running (found by a red team: exit 143, child alive)."""
    child, line = start(IGNORES_TERM, group=True)
    children.append(child)
    assert line == "ready"
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signum))
    timer.start()
    try:
        code = run_interruptible(lambda: stop_process(child, grace_s=60, group=True), "stopped it")
    finally:
        timer.cancel()
    assert code == 128 + signum
    assert child.poll() == -signal.SIGKILL
