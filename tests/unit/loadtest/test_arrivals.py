"""The load test's arrival processes and load shapes (loadtest/arrivals.py): property-based, pure."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.loadtest.arrivals import (
    ArrivalError,
    ArrivalProcess,
    Segment,
    arrival_times,
    duration_s,
    parse_steps,
    rate_at,
    read_trace,
    rescaled_due,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
rates = st.floats(min_value=0.05, max_value=5000, allow_nan=False)
seeds = st.integers(min_value=0, max_value=2**32 - 1)
N = 4000
# Kolmogorov-Smirnov bound at a 1e-6 false-alarm rate: sqrt(-ln(5e-7) / 2) / sqrt(n). Constant gaps
# (the lockstep pacing the issue found) sit at ~0.37 from the exponential, far above it.
KS_BOUND = math.sqrt(-math.log(5e-7) / 2) / math.sqrt(N)


def ks_distance_to_exponential(gaps: list[float], rate: float) -> float:
    ordered = sorted(gaps)
    n = len(ordered)
    return max(
        max(abs((i + 1) / n - cdf), abs(i / n - cdf)) for i, cdf in enumerate(1 - math.exp(-rate * g) for g in ordered)
    )


@SETTINGS
@given(rate=rates, seed=seeds)
def test_poisson_gaps_are_exponential_with_mean_one_over_rate(rate: float, seed: int) -> None:
    process = ArrivalProcess("poisson", random.Random(seed))
    gaps = [process.gap(rate) for _ in range(N)]
    mean = sum(gaps) / N
    assert mean == pytest.approx(1 / rate, rel=0.1)  # 6 standard errors
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / N) / mean
    assert 0.85 < cv < 1.15  # exponential: CV 1 (constant pacing: 0)
    assert ks_distance_to_exponential(gaps, rate) < KS_BOUND


@SETTINGS
@given(rate=rates, seed=seeds)
def test_constant_gaps_are_exact_and_far_from_poisson(rate: float, seed: int) -> None:
    process = ArrivalProcess("constant", random.Random(seed))
    gaps = [process.gap(rate) for _ in range(200)]
    assert set(gaps) == {1 / rate}
    assert ks_distance_to_exponential(gaps, rate) > 0.3


@SETTINGS
@given(
    trace=st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=50).filter(
        lambda t: sum(t) > 1e-3
    ),
    rate=rates,
    seed=seeds,
)
def test_trace_keeps_its_shape_at_the_requested_mean_rate(trace: list[float], rate: float, seed: int) -> None:
    process = ArrivalProcess("trace", random.Random(seed), trace)
    gaps = [process.gap(rate) for _ in range(len(trace))]  # one full loop, from a random offset
    assert sum(gaps) == pytest.approx(len(trace) / rate, rel=1e-9)
    scale = len(trace) / rate / sum(trace)
    assert sorted(gaps) == pytest.approx(sorted(g * scale for g in trace), rel=1e-9, abs=1e-12)


@SETTINGS
@given(rate=st.floats(min_value=5, max_value=2000, allow_nan=False), duration=st.floats(20, 60), seed=seeds)
def test_arrival_count_follows_the_rate(rate: float, duration: float, seed: int) -> None:
    times = arrival_times(ArrivalProcess("poisson", random.Random(seed)), rate, duration)
    expected = rate * duration
    assert abs(len(times) - expected) < 6 * math.sqrt(expected)  # Poisson count: sd sqrt(mean)
    assert times == sorted(times) and all(0 <= t < duration for t in times)


def test_bad_processes_and_rates_are_refused() -> None:
    with pytest.raises(ArrivalError, match="expected one of poisson, constant, trace"):
        ArrivalProcess("uniform", random.Random(0))
    with pytest.raises(ArrivalError, match="needs a trace"):
        ArrivalProcess("trace", random.Random(0))
    for rate in (0, -1, math.inf, math.nan):
        with pytest.raises(ArrivalError, match="rate must be above 0"):
            ArrivalProcess("poisson", random.Random(0)).gap(rate)


# ---------------------------------------------------------------- traces


@SETTINGS
@given(micros=st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=100).filter(any))
def test_trace_files_are_read_in_microseconds(tmp_path: Path, micros: list[int]) -> None:
    path = tmp_path / "trace.txt"
    path.write_text("# recorded gaps\n" + "\n\n".join(map(str, micros)) + "\n")
    assert read_trace(path) == tuple(m / 1e6 for m in micros)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("100\n-5\n", ":2: expected microseconds >= 0, got '-5'"),
        ("100\nabc\n", ":2: expected microseconds >= 0, got 'abc'"),
        ("100\nnan\n", ":2: expected microseconds >= 0, got 'nan'"),
        ("# nothing\n\n", ": no gaps"),
        ("0\n0\n", ": no gaps"),
    ],
)
def test_bad_trace_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "trace.txt"
    path.write_text(text)
    with pytest.raises(ArrivalError) as caught:
        read_trace(path)
    assert str(caught.value).startswith(f"{path}{message}")
    with pytest.raises(ArrivalError, match="cannot read"):
        read_trace(tmp_path / "missing.txt")


# ---------------------------------------------------------------- steps and ramps

segments = st.lists(
    st.builds(
        Segment,
        st.integers(0, 5000).map(float),
        st.integers(0, 5000).map(float),
        st.integers(1, 600).map(float),
    ),
    min_size=1,
    max_size=8,
)


def as_text(found: list[Segment]) -> str:
    return ",".join(
        f"{s.start:g}:{s.seconds:g}" if s.start == s.end else f"{s.start:g}-{s.end:g}:{s.seconds:g}" for s in found
    )


@SETTINGS
@given(found=segments, where=st.floats(0, 1, exclude_max=True))
def test_steps_and_ramps_round_trip_and_interpolate(found: list[Segment], where: float) -> None:
    assert parse_steps(as_text(found)) == tuple(found)
    total = duration_s(found)
    assert rate_at(found, total) is None and rate_at(found, total + 1) is None
    assert rate_at(found, 0) == found[0].start
    elapsed = where * total
    for segment in found:  # the segment `elapsed` falls in, and the linear rate there
        if elapsed < segment.seconds:
            expected = segment.start + (segment.end - segment.start) * elapsed / segment.seconds
            assert rate_at(found, where * total) == pytest.approx(expected)
            assert min(segment.start, segment.end) - 1e-9 <= rate_at(found, where * total)
            assert rate_at(found, where * total) <= max(segment.start, segment.end) + 1e-9
            break
        elapsed -= segment.seconds


@pytest.mark.parametrize("text", ["", "10", "10:", ":60", "10:0", "10:-5", "a:60", "10-:60", "1.2.3:60", "2e9:10"])
def test_bad_steps_are_refused(text: str) -> None:
    with pytest.raises(ArrivalError, match=r"expected RATE:SECONDS|rates from 0"):
        parse_steps(text)


positive = st.floats(min_value=0.01, max_value=10_000, allow_nan=False)


@SETTINGS
@given(due=st.floats(-100, 100), now=st.floats(-100, 100), rate=positive)
def test_the_same_rate_again_leaves_the_pending_arrival_where_it_was(due: float, now: float, rate: float) -> None:
    assert rescaled_due(due, now, rate, rate) == due


@SETTINGS
@given(wait=st.floats(0, 100), now=st.floats(-100, 100), old=positive, new=positive)
def test_a_new_rate_scales_the_time_still_to_wait(wait: float, now: float, old: float, new: float) -> None:
    due = rescaled_due(now + wait, now, old, new)
    assert due >= now
    if old != new:
        assert due - now == pytest.approx(wait * old / new, rel=1e-9, abs=1e-9)


@SETTINGS
@given(rate=st.floats(0.2, 50).filter(lambda r: 0.25 <= r % 1 <= 0.75), ticks=st.integers(8, 30))
def test_constant_arrivals_re_set_every_second_keep_their_rate(rate: float, ticks: int) -> None:
    """The locustfile's loop in virtual time: the shape sets the same rate at every whole second."""
    process, due, sent = ArrivalProcess("constant", random.Random(0)), 1 / rate, 0
    for tick in range(1, ticks + 1):
        while due <= tick:
            sent, due = sent + 1, due + process.gap(rate)
        due = rescaled_due(due, float(tick), rate, rate)
    # Restarting the gap at each tick sent floor(rate) a second: here >= 2 short of rate x ticks.
    assert abs(sent - rate * ticks) <= 1


@SETTINGS
@given(bad=st.sampled_from([0.0, -1.0, math.nan, math.inf]), good=positive, first=st.booleans())
def test_rescaling_to_or_from_a_rate_that_is_not_positive_is_refused(bad: float, good: float, first: bool) -> None:
    with pytest.raises(ArrivalError, match="rates must be above 0"):
        rescaled_due(5.0, 1.0, *((bad, good) if first else (good, bad)))
