"""The SLO search on a load curve: the highest throughput whose step still meets the objective.

A curve is the list of steps of one load ramp, in the order they ran (load rising). Each step
holds what was offered (users, and users x rps per user when users are paced), what was achieved
(successful responses per second), the latency percentiles of the successful requests, and the
request and failure counts. Pure functions only: the runner and the Locust shape call them live,
the tests call them on recorded curves.

The rule, step by step:

1. Warm-up steps are discarded. The first measurement after a (re)start is slow (model load, first
   allocations; the reference tutorial says to discard it), so the runner runs one short warm-up
   step and marks it.
2. A step FAILS when its failure ratio is above `max_failure_ratio`, when no request succeeded, or
   when the p95 of its successful requests is above `slo_ms`. Failures are never hidden by a good
   p95: a server that fails fast has low latencies, so a failure ratio above the tolerance fails
   the step whatever its p95. Below the tolerance, failures still cost: achieved RPS counts
   successful responses only.
3. A step that does not fail PASSES if it has at least `min_requests` requests; with fewer it is
   INCONCLUSIVE (a handful of requests can show a miss, but cannot show that 95% of requests meet
   the SLO): it neither passes nor counts as failing.
4. Noise tolerance: a failing step followed by a passing step is noise, and the search goes on.
   `stop_after` (K, default 2) failing steps IN A ROW end the search (warm-up and inconclusive
   steps in between neither count nor break the row); steps after that point are ignored even if
   they pass (past saturation, an occasional pass is luck, not capacity).
5. The result is the passing step with the highest achieved RPS among the steps before the stop
   (on a tie, the one with the lower offered load). No passing step: no result.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

PASS, FAIL, SKIP = "pass", "fail", "skip"  # kinds of verdict; a passing step's reason is "pass" too
WARMUP = "warm-up (discarded)"
NOT_REACHED = "ignored (after the stop)"


class Verdict(NamedTuple):
    kind: str  # PASS | FAIL | SKIP (warm-up or inconclusive: neither passes nor counts as failing)
    reason: str


@dataclass(frozen=True)
class Step:
    """One measured load level of a curve."""

    users: int
    rps: float  # achieved: successful responses per second
    p50_ms: float | None  # of successful requests; None when there were none
    p95_ms: float | None
    requests: int  # sent and completed in the window, failed ones included
    failures: int
    offered_rps: float | None = None  # users x rps per user; None for closed-loop users
    warmup: bool = False

    @property
    def failure_ratio(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    @property
    def load(self) -> float:
        """What was asked of the server: offered RPS when paced, else the user count."""
        return self.offered_rps if self.offered_rps is not None else float(self.users)


# How a rate search decides a rate (RateState): one rule both ways since issue 46, recorded in a run's settings as
# `rule`; runs recorded before it have none: a rate failed after stop_after failing steps IN A ROW and passed at its
# first passing step (LEGACY_RULE), a bias toward higher rates kept only to read those recordings as they were made.
RATE_RULE = "same-both-ways"
LEGACY_RULE = "fail-twice-in-a-row"


@dataclass(frozen=True)
class SloCriteria:
    slo_ms: float = 100.0  # p95 objective (the stack's sloLatencyMs)
    max_failure_ratio: float = 0.01  # the stack's sloMaxFailurePercent / 100
    stop_after: int = 2  # K consecutive failing steps end the search
    min_requests: int = 20  # fewer and a p95 is little more than the maximum
    rule: str = RATE_RULE  # how the rate search decides a rate

    def __post_init__(self) -> None:
        if not (self.slo_ms > 0 and math.isfinite(self.slo_ms)):
            raise ValueError(f"slo_ms must be a positive number, got {self.slo_ms!r}")
        if not 0 <= self.max_failure_ratio < 1:
            raise ValueError(f"max_failure_ratio must be from 0 to below 1, got {self.max_failure_ratio!r}")
        if self.stop_after < 1 or self.min_requests < 1:
            raise ValueError("stop_after and min_requests must be >= 1")
        if self.rule not in (RATE_RULE, LEGACY_RULE):
            raise ValueError(f"rule must be {RATE_RULE!r} or {LEGACY_RULE!r}, got {self.rule!r}")


@dataclass(frozen=True)
class SloResult:
    """The outcome of one curve: the chosen step (None when no step met the SLO) and why."""

    best: Step | None
    best_index: int | None  # index in the curve as given
    verdicts: tuple[str, ...]  # per step: "pass", why it failed or was skipped, or NOT_REACHED
    stopped_at: int | None  # index of the step that completed K failures in a row

    @property
    def found(self) -> bool:
        return self.best is not None

    @property
    def max_rps(self) -> float | None:
        return self.best.rps if self.best else None


def verdict(step: Step, criteria: SloCriteria) -> Verdict:
    """Whether a step passes, fails or does not count, with the reason in words."""
    if step.warmup:
        return Verdict(SKIP, WARMUP)
    if step.failure_ratio > criteria.max_failure_ratio:
        return Verdict(FAIL, f"failures {step.failure_ratio:.1%} > {criteria.max_failure_ratio:.1%}")
    if step.p95_ms is None:
        return Verdict(FAIL, "no successful request")
    if step.p95_ms > criteria.slo_ms:
        return Verdict(FAIL, f"p95 {step.p95_ms:.0f} ms > {criteria.slo_ms:g} ms")
    if step.requests < criteria.min_requests:
        return Verdict(SKIP, f"inconclusive: {step.requests} requests < {criteria.min_requests}")
    return Verdict(PASS, PASS)


def stop_index(steps: Sequence[Step], criteria: SloCriteria) -> int | None:
    """Index of the step that makes K failing steps in a row (skipped steps neither count nor break the row)."""
    failing = 0
    for index, step in enumerate(steps):
        kind = verdict(step, criteria).kind
        if kind == SKIP:
            continue
        failing = failing + 1 if kind == FAIL else 0
        if failing >= criteria.stop_after:
            return index
    return None


def should_stop(steps: Sequence[Step], criteria: SloCriteria) -> bool:
    """For a live ramp: True once the steps so far end the search (no higher load is needed)."""
    return stop_index(steps, criteria) is not None


def search(steps: Sequence[Step], criteria: SloCriteria) -> SloResult:
    stopped = stop_index(steps, criteria)
    considered = len(steps) if stopped is None else stopped + 1
    found = [verdict(s, criteria) for s in steps[:considered]]
    reasons = [v.reason for v in found] + [NOT_REACHED] * (len(steps) - considered)
    passing = [i for i, v in enumerate(found) if v.kind == PASS]
    if not passing:
        return SloResult(None, None, tuple(reasons), stopped)
    best = max(passing, key=lambda i: (steps[i].rps, -steps[i].load))
    return SloResult(steps[best], best, tuple(reasons), stopped)


@dataclass(frozen=True)
class Spread:
    """How much repeats of one measurement disagree."""

    median: float
    low: float
    high: float
    count: int

    @property
    def relative(self) -> float:
        """(high - low) / median: 0 when all repeats agree."""
        return (self.high - self.low) / self.median if self.median else 0.0


def spread(values: Sequence[float | None]) -> Spread | None:
    """Median and range of the repeats that produced a value; None when none did."""
    found = [v for v in values if v is not None]
    if not found:
        return None
    return Spread(statistics.median(found), min(found), max(found), len(found))


# ---------------------------------------------------------------- the rate search (open-loop load)


@dataclass(frozen=True)
class RateLadder:
    """How the rate search climbs: geometric steps from `start` (x `growth`) until a rate fails,
    then bisection (geometric mean) between the highest passing and the lowest failing rate until
    they are within `precision` (0.05: 5 %). `max_rate` caps the climb; below `floor` a search
    that fails from the start gives up."""

    start: float = 2.0
    growth: float = 1.5
    precision: float = 0.05
    max_rate: float = 1000.0
    floor: float = 0.25

    def __post_init__(self) -> None:
        if not (0 < self.floor <= self.start <= self.max_rate and math.isfinite(self.max_rate)):
            raise ValueError(f"--start-rps {self.start:g} / --max-rps {self.max_rate:g}: expected 0 < start <= max")
        if not (1.05 <= self.growth <= 10 and 0.005 <= self.precision <= 0.5):
            raise ValueError(f"--growth {self.growth:g} / --precision {self.precision:g}: expected 1.05-10 / 0.005-0.5")


@dataclass(frozen=True)
class RateState:
    """What the steps so far say about each rate, by one rule both ways (issue 46: a rule that re-measured a failing
    rate but took a passing one at its first step biased the capacity upward): a rate PASSES when `stop_after` steps
    at it passed, and FAILS when `stop_after` steps at it failed, whichever comes first (with the default 2: the
    majority of at most 3 conclusive steps). `pending` is a rate measured but not yet decided."""

    passed: tuple[float, ...]
    failed: tuple[float, ...]
    pending: float | None

    @property
    def high(self) -> float | None:
        """The lowest failing rate: the capacity is below it."""
        return min(self.failed, default=None)

    @property
    def low(self) -> float | None:
        """The highest passing rate below every failing rate: the capacity found so far."""
        high = self.high
        return max((r for r in self.passed if high is None or r < high), default=None)


MAX_TRIES = 4  # measurements of one rate (2 x stop_after - 1 conclusive ones decide it): past this it fails


def rate_state(steps: Sequence[Step], criteria: SloCriteria) -> RateState:
    passed: list[float] = []
    failed: list[float] = []
    pending, passes, fails, tries = None, 0, 0, 0
    for step in steps:
        if step.warmup or step.offered_rps is None:
            continue
        if step.offered_rps != pending:
            pending, passes, fails, tries = step.offered_rps, 0, 0, 0
        kind = verdict(step, criteria).kind
        tries += 1
        passes += kind == PASS
        fails += kind == FAIL
        # The two rules differ only in what a pass needs: under the legacy one the first decides (so a failure never
        # followed another's pass at the same rate, and counting failures alike is counting them in a row).
        if passes >= (criteria.stop_after if criteria.rule == RATE_RULE else 1):
            passed.append(pending)
        elif fails >= criteria.stop_after or tries >= MAX_TRIES:
            failed.append(pending)
        else:
            continue
        pending = None
    return RateState(tuple(passed), tuple(failed), pending)


def next_rate(steps: Sequence[Step], criteria: SloCriteria, ladder: RateLadder) -> float | None:
    """The rate to measure next, or None when the search is over."""
    state = rate_state(steps, criteria)
    if state.pending is not None:
        return state.pending  # the same rate until stop_after steps agree, passing or failing alike
    low, high = state.low, state.high
    if high is None:  # still climbing
        if low is None:
            return ladder.start
        return None if low >= ladder.max_rate else min(ladder.max_rate, low * ladder.growth)
    if low is None:  # failing from the start: come down
        lower = high / ladder.growth
        return None if lower < ladder.floor else lower
    if high / low - 1 <= ladder.precision:
        return None
    return math.sqrt(low * high)


def rate_search(steps: Sequence[Step], criteria: SloCriteria) -> SloResult:
    """The outcome of a rate search: the passing step at the highest passing rate below every failing rate."""
    state = rate_state(steps, criteria)
    reasons = tuple(verdict(s, criteria).reason for s in steps)
    if state.low is None:
        return SloResult(None, None, reasons, None)
    at_low = [i for i, s in enumerate(steps) if not s.warmup and s.offered_rps == state.low]
    best = max((i for i in at_low if verdict(steps[i], criteria).kind == PASS), key=lambda i: steps[i].rps)
    return SloResult(steps[best], best, reasons, None)
