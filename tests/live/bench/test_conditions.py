"""bench.conditions against a real CPU hog: a busy loop beside the baselines marks the run noisy."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
from triton_gke.bench import conditions
from triton_gke.bench.probes import cpu_count


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def test_a_cpu_hog_beside_the_run_marks_it_noisy() -> None:
    """A real busy loop on every core while the baselines and a one-second run go (~4 s): the other processes' share
    measured during the baseline holds at least the hogs' own CPU (psutil's count of it), so does the run's, and the
    run is marked. One hog per core: beside the baseline's threads and other work (two test runs here) one hog alone got
    9 % of two cores. On a machine already busy the run is marked anyway; the psutil check is what shows the hogs'
    own CPU was counted."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cpu_count())]
    try:
        processes = [psutil.Process(hog.pid) for hog in hogs]
        watch = conditions.Watch(baseline_s=1.0, interval_s=0.2)
        started, used = time.monotonic(), sum(map(_cpu_s, processes))
        before = watch.start()
        hog_pct = 100 * (sum(map(_cpu_s, processes)) - used) / ((time.monotonic() - started) * cpu_count())
        time.sleep(1.0)  # the run itself: a second in which only the hogs work
        found = watch.finish()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert hog_pct > 5  # the hogs ran (on a busy machine they share the cores with whatever else runs)
    assert before.others_pct is not None and before.others_pct >= 0.8 * hog_pct, (before, hog_pct)
    assert found.baseline_before and found.baseline_after and found.own_cores is not None
    assert found.others_run_pct is not None and found.others_run_pct > conditions.OTHERS_MAX_PCT, found
    assert any(r.startswith("other processes used ") for r in found.noisy), found
