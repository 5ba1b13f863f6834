"""bench.plans.results: what a results.json holds and the figures derived from it."""

from __future__ import annotations

import pytest

from triton_gke.bench.plans.results import PerfAnalyzerOpinion


def test_perf_analyzer_ratio_compares_the_throughput_it_served_not_the_rate_it_asked_for() -> None:
    """perf_analyzer asked 17.89 requests/s and served 16.51 in a recorded search; Locust found 16.88."""
    opinion = PerfAnalyzerOpinion("binary search", None, 16.51, None, 144.6, 16.88, 138.0, max_rate=17.89)
    assert opinion.ratio == pytest.approx(16.88 / 16.51)
    older = PerfAnalyzerOpinion("binary search", None, None, None, 144.6, 16.88, 138.0, max_rate=17.89)
    assert older.ratio == pytest.approx(16.88 / 17.89)  # a record without the served figure: the asked rate
