"""bench.metrics.conditions against a real CPU hog (tests/support/cpu_hog.py): a busy loop beside the baselines marks
the run noisy; the hog itself keeps its cores busy and leaves nothing running behind it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.support.checkout import PROJECT_DIR
from tests.support.cpu_hog import hogging
from triton_gke.bench.metrics import conditions
from triton_gke.bench.metrics.probes import cpu_count
from triton_gke.sandbox.processes import wait_for

HANG_S = 60  # only ends a hung test: every wait below returns as soon as what it waits for happened


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def test_a_cpu_hog_beside_the_run_marks_it_noisy() -> None:
    """A real busy loop on every core while the baselines and a one-second run go (~4 s): the other processes' share
    measured during the baseline holds at least the hogs' own CPU (psutil's count of it), so does the run's, and the
    run is marked. One hog per core: beside the baseline's threads and other work (two test runs here) one hog alone got
    9 % of two cores. On a machine already busy the run is marked anyway; the psutil check is what shows the hogs'
    own CPU was counted."""
    with hogging(cpu_count()) as hogs:
        processes = [psutil.Process(hog.pid) for hog in hogs]
        watch = conditions.Watch(baseline_s=1.0, interval_s=0.2)
        started, used = time.monotonic(), sum(map(_cpu_s, processes))
        before = watch.start()
        hog_pct = 100 * (sum(map(_cpu_s, processes)) - used) / ((time.monotonic() - started) * cpu_count())
        time.sleep(1.0)  # the run itself: a second in which only the hogs work
        found = watch.finish()
    assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in processes)  # stopped at the end
    assert hog_pct > 5  # the hogs ran (on a busy machine they share the cores with whatever else runs)
    assert before.others_pct is not None and before.others_pct >= 0.8 * hog_pct, (before, hog_pct)
    assert found.baseline_before and found.baseline_after and found.own_cores is not None
    assert found.others_run_pct is not None and found.others_run_pct > conditions.OTHERS_MAX_PCT, found
    assert any(r.startswith("other processes used ") for r in found.noisy), found


def _hog_command(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.support.cpu_hog", *args], cwd=PROJECT_DIR)


def _workers(hog: subprocess.Popen[bytes], count: int) -> list[psutil.Process]:
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = psutil.Process(hog.pid).children()
        return len(found) == count and all(_cpu_s(p) > 0.05 for p in found)  # each one busy

    assert wait_for(started, timeout_s=HANG_S, interval_s=0.1), found
    return found


def _gone(processes: list[psutil.Process]) -> bool:
    return all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in processes)


def test_the_hog_command_runs_its_workers_and_stops_them_with_itself() -> None:
    """`python -m tests.support.cpu_hog`: N busy workers; SIGTERM stops them, so does the end of --seconds, and a
    SIGKILL of the hog (no chance to clean up) too, since each worker watches its parent."""
    exits = {"SIGTERM": 128 + signal.SIGTERM, "SIGKILL": -signal.SIGKILL, "--seconds": 0}
    for stop, code in exits.items():
        hog = _hog_command("--workers", "2", *(["--seconds", "1"] if stop == "--seconds" else []))
        workers: list[psutil.Process] = []
        try:
            workers = _workers(hog, 2)
            if stop != "--seconds":
                hog.send_signal(getattr(signal, stop))
            assert hog.wait(timeout=HANG_S) == code, stop
            assert wait_for(lambda w=workers: _gone(w), timeout_s=HANG_S, interval_s=0.1), (stop, workers)
        finally:  # a failed check leaves no busy process behind
            for process in [*workers, psutil.Process(hog.pid)] if hog.poll() is None else workers:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            hog.wait()


def test_the_hog_runs_a_command_and_stops_with_it_even_on_ctrl_c(tmp_path: Path) -> None:
    """`cpu_hog -- COMMAND` (docs/testing.md): busy while the command runs, the command's status, and a Ctrl-C (SIGINT
    to the foreground process group) stops both: the form `hog & make test; kill $!` left the hog running."""
    marker = tmp_path / "ran"
    hog = _hog_command("--workers", "1", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w'); raise SystemExit(3)")
    assert hog.wait(timeout=HANG_S) == 3 and marker.exists()
    hog = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cpu_hog", "--workers", "1", "--", "sleep", "600"],
        cwd=PROJECT_DIR,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        workers = [p for p in _workers_and_command(hog) if p.name() != "sleep"]
        command = [p for p in psutil.Process(hog.pid).children() if p.name() == "sleep"]
        os.killpg(hog.pid, signal.SIGINT)
        assert hog.wait(timeout=HANG_S) == 128 + signal.SIGINT
        assert wait_for(lambda: _gone(workers + command), timeout_s=HANG_S, interval_s=0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()


def _workers_and_command(hog: subprocess.Popen[bytes]) -> list[psutil.Process]:
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = psutil.Process(hog.pid).children()
        return len(found) == 2 and any(p.name() == "sleep" for p in found)

    assert wait_for(started, timeout_s=HANG_S, interval_s=0.1), found
    return found


def test_a_sigterm_to_the_hog_reaches_the_command_which_stops_as_it_chooses(tmp_path: Path) -> None:
    """`timeout` or a CI cancel sends SIGTERM to the hog alone: the command gets it too and finishes its own way (here
    a trap that writes a file and exits 7), and the hog returns that status. It used to SIGKILL the command."""
    marker = tmp_path / "trapped"
    script = f"trap 'touch {marker}; exit 7' TERM; sleep 600 & wait"
    hog = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cpu_hog", "--workers", "1", "--", "sh", "-c", script], cwd=PROJECT_DIR
    )
    try:
        # The trap is set once the shell has started its sleep: signal only then.
        sleeping = lambda: any(p.name() == "sleep" for p in psutil.Process(hog.pid).children(recursive=True))  # noqa: E731
        assert wait_for(sleeping, HANG_S, 0.1)
        hog.send_signal(signal.SIGTERM)
        assert hog.wait(timeout=HANG_S) == 7 and marker.exists()
    finally:
        hog.kill()
        hog.wait()
