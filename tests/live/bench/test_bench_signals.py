"""`triton-gke bench` stopped by SIGTERM (a `kill`, a CI job's timeout) or SIGINT (Ctrl-C) stops every process it
started: Python's default SIGTERM ends a process without running `finally` or `__exit__`, so before the handler
a killed bench left tritonserver and Locust running (seen: both still serving after the bench was gone)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.signals import hup_as_in_a_terminal
from triton_gke.sandbox.processes import stop_process, wait_for

PROJECT = PROJECT_DIR


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running: a process that exited is seen (a zombie) until its parent, or init, reaps it."""
    found = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def _names(processes: list[psutil.Process]) -> set[str]:
    names = set()
    for process in processes:
        with contextlib.suppress(psutil.Error):
            names.add(" ".join(process.cmdline()))
    return names


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP (terminal closed)"]
)
def test_a_signalled_bench_stops_triton_and_locust_and_says_so_in_one_line(signum: int, tmp_path: Path) -> None:
    args = ["--variants", "original", "--repeats", "1", "--start-rps", "2", "--max-rps", "4", "--max-users", "4",
            "--saturation-users", "1", "--step-seconds", "30", "--settle-seconds", "1", "--warmup-seconds", "1",
            "--min-requests", "4", "--slo-ms", "10000", "--raw-seconds", "1", "--no-perf-analyzer",
            "--build-dir", str(tmp_path / "build"), "--out", str(tmp_path / "out")]  # fmt: skip
    bench = subprocess.Popen(
        [sys.executable, "-m", "triton_gke.bench", *args], cwd=PROJECT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, preexec_fn=hup_as_in_a_terminal,
    )  # fmt: skip
    seen: list[psutil.Process] = []

    def serving() -> bool:
        found = _descendants(bench.pid)
        seen[:] = found
        names = " ".join(_names(found))
        return "tritonserver" in names and "locust" in names

    try:
        assert wait_for(serving, timeout_s=240, interval_s=0.5), f"no tritonserver and Locust under the bench: {seen}"
        time.sleep(2)  # Locust is sending
        started = list(seen)
        bench.send_signal(signum)
        code = bench.wait(timeout=90)
    finally:
        if bench.poll() is None:
            stop_process(bench, grace_s=5)
    err = bench.stderr.read() if bench.stderr else ""
    assert code == 128 + signum, err
    assert err.strip().splitlines()[-1] == (
        f"interrupted by {signal.Signals(signum).name}: stopped every process the bench started"
    ), err
    assert "Traceback" not in err
    # The bench waited for its children; their own children (Triton's stubs) end a moment later: a wait, not a sleep,
    # whose deadline only ends a hang.
    wait_for(lambda: not _running(started), timeout_s=60, interval_s=0.2)
    left = _running(started)
    for process in left:  # a failing run must not leave them serving for the rest of the suite
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert not left, _names(left)
