"""bench.plans.load_plan: the plan travels through the environment, and steps hold --min-requests."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.bench.test_slo_search import SLO
from triton_gke.bench.plans.load_plan import LoadPlan, PlanError
from triton_gke.bench.plans.slo_search import (
    RateLadder,
)


# ---------------------------------------------------------------- plan, probes, perf_analyzer
def test_load_plan_travels_through_the_environment() -> None:
    plan = LoadPlan(RateLadder(2, 1.5, 0.05, 500, 0.4), 32, 6.0, 2.0, 4.0, SLO, "poisson", (1, 2, 4), "/tmp/s.jsonl")
    assert LoadPlan.from_env(plan.env()) == plan
    assert LoadPlan.from_env(dataclasses.replace(plan, saturation_users=()).env()).saturation_users == ()
    # a step holds min_requests: 1.25 x 20 / 2 requests/s = 12.5 s, at most 4 x step_s; never under step_s
    assert (plan.step_length_s(2.0), plan.step_length_s(1.0), plan.step_length_s(100.0)) == (12.5, 24.0, 6.0)
    assert plan.max_duration_s() > plan.max_search_steps() * (2 + 24)
    with pytest.raises(PlanError, match="--saturation-users"):
        dataclasses.replace(plan, saturation_users=(4, 2))
    with pytest.raises(PlanError, match="--arrival"):
        dataclasses.replace(plan, arrival="uniform")
    with pytest.raises(PlanError, match="BENCH_SLO_MS is not set"):
        LoadPlan.from_env({})
    with pytest.raises(ValueError, match="--start-rps 0 / --max-rps 10"):
        RateLadder(0, 1.5, 0.05, 10, 0.1)


@settings(max_examples=60, deadline=None)
@given(start=st.floats(0.01, 100), step_s=st.floats(0.5, 60), min_requests=st.integers(1, 1000))
def test_a_plan_whose_first_step_cannot_hold_min_requests_is_refused(
    start: float, step_s: float, min_requests: int
) -> None:
    """A step at --start-rps that cannot collect --min-requests is inconclusive, counts as failing, and the search
    only comes down to rates with fewer requests still: seen as 20 steps and no answer with --min-requests 150."""
    criteria = dataclasses.replace(SLO, min_requests=min_requests)
    try:
        plan = LoadPlan(RateLadder(start, 1.5, 0.05, max(start, 500), start / 2), 8, step_s, 1.0, 1.0, criteria)
    except PlanError as err:
        assert str(err).startswith(f"--min-requests {min_requests}: a step at --start-rps") and "\n" not in str(err)
        assert start * 4 * step_s < min_requests
    else:
        assert plan.ladder.start * plan.max_step_s >= min_requests
