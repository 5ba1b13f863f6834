"""The rollout's gate (triton_gke/cli/rollout_gate.py): N consecutive windows decide, a window without requests is a
miss, and Prometheus' instant-query answers are read as its API documents them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.cli.rollout_gate import Window, judge, meets, run_gate, scalar_of, slo_queries
from triton_gke.observability.settings import SloSettings

SLO = SloSettings(latency_ms=100, max_failure_ratio=0.01)
windows = st.builds(
    Window,
    st.one_of(st.none(), st.floats(0, 300, allow_nan=False)),
    st.one_of(st.none(), st.floats(0, 0.05, allow_nan=False)),
)


@given(st.lists(windows, max_size=12), st.integers(1, 4))
def test_the_verdict_is_the_first_run_of_n_alike_windows(read: list[Window], n: int) -> None:
    verdict = judge(read, SLO, n)
    runs = [meets(w, SLO) for w in read]
    first = next((i for i in range(n - 1, len(runs)) if len(set(runs[i - n + 1 : i + 1])) == 1), None)
    if first is not None and first < 3 * n:
        assert verdict is runs[first]
    elif len(read) >= 3 * n:
        assert verdict is False  # undecided after 3N windows: fail closed
    else:
        assert verdict is None


def test_a_slow_p95_alone_breaches_and_the_figures_are_kept() -> None:
    figures = iter([Window(150.0, 0.0)] * 3)
    result = run_gate("a1", type("R", (), {"read": lambda self, region: next(figures)})(), SLO, 3, lambda: None)
    assert not result.passed and result.p95_ms == (150.0,) * 3 and result.error_ratio == (0.0,) * 3


def test_just_inside_the_slo_passes() -> None:
    assert judge([Window(100.0, 0.01)] * 2, SLO, 2) is True


def test_prometheus_answers_are_read_as_documented() -> None:
    vector = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "12.5"]}]}}
    assert scalar_of(vector) == 12.5
    assert scalar_of({"status": "success", "data": {"resultType": "vector", "result": []}}) is None
    nan = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "NaN"]}]}}
    assert scalar_of(nan) is None
    with pytest.raises(ValueError, match="bad_data"):
        scalar_of({"status": "error", "errorType": "bad_data", "error": "bad_data: parse error"})


def test_the_queries_read_the_recorded_series_the_alerts_read() -> None:
    queries = slo_queries(SLO)
    assert 'quantile="0.95"' in queries["p95_ms"] and "triton:requests_per_second:rate1m" in queries["p95_ms"]
    assert "triton:failures_per_second:rate1m" in queries["error_ratio"]
