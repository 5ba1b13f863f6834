"""bench.metrics.conditions: the /proc readers and the noisy verdict (a real CPU hog:
tests/live/bench/test_conditions.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.bench.metrics import conditions
from triton_gke.bench.metrics.conditions import CpuTicks, ProcError, RunConditions, parse_loadavg, parse_proc_stat

ticks = st.integers(0, 2**63)


@given(values=st.lists(ticks, min_size=8, max_size=10), rest=st.text("0123456789 \n", max_size=40))
def test_proc_stat_reads_busy_total_and_steal_of_the_cpu_line(values: list[int], rest: str) -> None:
    """proc(5): user nice system idle iowait irq softirq steal [guest guest_nice], guest inside user and nice."""
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    found = parse_proc_stat("cpu  " + " ".join(map(str, values)) + "\ncpu0 " + rest)
    busy = user + nice + system + irq + softirq
    assert found == CpuTicks(busy, busy + idle + iowait + steal, steal)


@given(text=st.text(max_size=60))
def test_anything_but_a_cpu_line_is_one_line_naming_proc_stat(text: str) -> None:
    try:
        parse_proc_stat(text)
    except ProcError as err:
        assert str(err).startswith("/proc/stat: ") and "\n" not in str(err)
    else:  # only a real `cpu` line of digits reads
        first = text.split("\n", 1)[0].split()
        assert first[0] == "cpu" and all(f.isdigit() for f in first[1:])


@given(load=st.floats(0, 1e4), rest=st.text(" 0123456789./", max_size=30))
def test_loadavg_reads_the_first_figure(load: float, rest: str) -> None:
    assert parse_loadavg(f"{load!r} {rest}") == load


@pytest.mark.parametrize("text", ["", "x 1 2", "-1 0 0", "inf 0 0", "nan 1 1"])
def test_a_bad_loadavg_is_one_line(text: str) -> None:
    with pytest.raises(ProcError, match=r"^/proc/loadavg: "):
        parse_loadavg(text)


def test_the_real_proc_files_read_on_this_machine() -> None:
    now = conditions.cpu_ticks()
    assert now is not None and now.total >= now.busy + now.steal and conditions.load_1min() is not None


@given(before=st.floats(1, 1e4), ratio=st.floats(0.2, 5))
def test_a_drift_beyond_the_tolerance_marks_the_run(before: float, ratio: float) -> None:
    found = RunConditions(cores=2, baseline_before=before, baseline_after=before * ratio)
    reasons = conditions.verdict(found)
    drifted = abs(ratio - 1) > conditions.DRIFT_TOLERANCE + 1e-9
    assert bool(reasons) == drifted or abs(abs(ratio - 1) - conditions.DRIFT_TOLERANCE) < 1e-9
    if reasons:
        assert reasons[0].startswith("raw onnxruntime baseline drifted ")


@given(others=st.floats(0, 100), load=st.floats(0, 64), own=st.floats(0, 64), steal=st.floats(0, 100))
def test_each_busy_sign_marks_the_run_with_its_figure(others: float, load: float, own: float, steal: float) -> None:
    found = RunConditions(cores=2, others_pct=others, load_average=load, own_cores=own, steal_pct=steal)
    reasons = " | ".join(conditions.verdict(found))
    assert ("other processes used" in reasons) == (others > conditions.OTHERS_MAX_PCT)
    assert ("load average" in reasons) == (load - own > conditions.OTHERS_LOAD_MAX * 2)
    assert ("CPU steal" in reasons) == (steal > conditions.STEAL_MAX_PCT)
