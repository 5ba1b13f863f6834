"""The tuner's search strategy: successive halving over serving configurations, pure (no server, no clock).

Hyperband's inner loop, successive halving (Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter
Optimization", JMLR 18 (2018), https://jmlr.org/papers/v18/16-558.html): every candidate gets the smallest effort
(FIRST_EFFORT short rate searches: two, since one search could not rank configurations whose searches range 2x), the
best 1/ETA of them get ETA times more, and so on until one is left. A candidate's score
is the median of ALL its measurements so far (the first rung's are reused, never thrown away). The reference
candidate (the stack's default configuration) is kept in every rung whatever its rank, so the default and the winner
end measured with the same effort, side by side.

Effort is counted in units (one unit: one short rate search, a Locust ramp); the budget bounds the units spent,
whatever the wall clock says. `measure(candidate, effort)` returns one capacity per unit (achieved requests/s at
the SLO; 0 for a ramp where no rate met it). `stop()` lets the caller end early (a wall-clock deadline): the search
then returns what it has. Measurements made before the search (the tuner times one search of the default to size the
budget) are passed in and count as that candidate's first units.

The best-ranked finalist is what the search measured best; it is *recommended* over the reference only when the
difference is more than noise: every search of it beat every search of the reference, with enough searches that this
happens by chance at most ALPHA of the time when both have one capacity (the exact one-sided Mann-Whitney test at
U = 0: probability 1 / C(m + n, m) for m and n searches; H. B. Mann and D. R. Whitney, "On a test of whether one of two
random variables is stochastically larger than the other", Ann. Math. Statist. 18 (1947),
https://doi.org/10.1214/aoms/1177730491). Three searches each give 1/20. The same configuration searched twice
here found 6.2 and 3.3 requests/s (results/bench/tune-dev-2026-12-02/): a ranking on medians alone is not evidence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)
ETA = 3  # survivors per rung: the best third (Hyperband's default eta)
# Searches per candidate in the first rung. One is not enough here: one configuration's searches ranged 2x
# (5.3-11.0 requests/s, results/bench/tune-dev-2026-12-02c), so a first rung of one search each dropped no batching
# on one low draw while it measured at least the winner in every later comparison
# (results/bench/tuners-dev-2026-12-02d). Two each rank by the median (the mean) of two; the test with a noisy
# stand-in (tests/unit/bench/test_tune_search.py) shows the wrong picks this removes at the same budget.
FIRST_EFFORT = 2
MAX_SPLITS = 200_000  # exact_p_greater's enumeration: C(20, 10) = 184,756, compare-tuners' 10 rounds each
ALPHA = 0.05  # the chance of recommending a configuration that is not better than the reference (module docstring)


@dataclass(frozen=True)
class Rung:
    """One round: how many candidates it measures and the effort (units) each gets."""

    candidates: int
    effort: int

    @property
    def cost(self) -> int:
        return self.candidates * self.effort


def survivors(alive: int, eta: int = ETA) -> int:
    """How many of `alive` ranked candidates go on: the best 1/eta, at least one."""
    return max(1, math.ceil(alive / eta))


def first_effort(count: int, budget: int, first: int = FIRST_EFFORT) -> int:
    """The first rung's searches per candidate: `first`, fewer when the budget cannot pay it for every candidate (at
    least one; 0 when the budget cannot pay one each)."""
    if count < 1 or budget < count:
        return 0
    return max(1, min(first, budget // count))


def schedule(count: int, budget: int, eta: int = ETA, first: int = FIRST_EFFORT) -> list[Rung]:
    """The rungs for `count` candidates (the reference among them) within `budget` units: the first rung gives each
    `first` units (first_effort: fewer when the budget cannot pay that); each next one keeps survivors() plus the
    reference, each with eta times the effort of the last (less when the budget left cannot pay for that, none when
    it cannot pay one unit each). Ends with the winner and the reference; the units left after a full schedule go to
    a last rung of those two, as far as they pay."""
    effort = first_effort(count, budget, first)
    if not effort:
        return []
    rungs, spent, alive = [Rung(count, effort)], count * effort, count
    while alive > 2:
        alive = min(alive, survivors(alive, eta) + 1)  # + the reference, when it is not among the best
        effort = min(effort * eta, (budget - spent) // alive)
        if effort < 1:
            return rungs
        rungs.append(Rung(alive, effort))
        spent += alive * effort
    extra = (budget - spent) // 2 if count > 1 else budget - spent
    if extra >= 1:
        rungs.append(Rung(min(count, 2), extra))
    return rungs


def complete(rungs: Sequence[Rung], eta: int = ETA, first: int = FIRST_EFFORT) -> bool:
    """Whether a schedule halves down to the winner and the reference, giving the winner at least eta units and
    every candidate `first` in the first rung."""
    return (
        bool(rungs) and rungs[0].effort >= first and rungs[-1].candidates <= 2 and sum(r.effort for r in rungs) >= eta
    )


def max_candidates(budget: int, eta: int = ETA, limit: int = 64, first: int = FIRST_EFFORT) -> int:
    """The most candidates whose schedule within `budget` is complete(): past it, the first rungs eat the budget and
    the finalists are decided on one or two ramps each. A budget too small for any complete schedule still compares
    the default with one other candidate (2 units: one search each), and 1 unit measures the default alone."""
    fitting = [count for count in range(2, limit + 1) if complete(schedule(count, budget, eta, first), eta, first)]
    return max(fitting, default=min(2, max(budget, 1)))


@dataclass
class Outcome(Generic[C]):
    """What the search measured: every measurement per candidate, the units spent, the rungs run, the winner."""

    scores: dict[C, list[float]]
    spent: int
    rungs: list[Rung]
    best: C | None
    reference: C
    stopped_early: bool = False
    ranked: list[C] = field(default_factory=list)

    def median(self, candidate: C) -> float | None:
        found = self.scores.get(candidate)
        return statistics.median(found) if found else None

    @property
    def significant(self) -> bool:
        """Whether the best measured beats the reference by more than noise (significantly_better)."""
        if self.best is None or self.best == self.reference:
            return False
        return significantly_better(self.scores[self.best], self.scores[self.reference])

    @property
    def recommended(self) -> C:
        """The configuration to apply: the best measured when it significantly beats the reference, else the
        reference (a difference within the noise is no reason to change a stack)."""
        return self.best if self.significant and self.best is not None else self.reference


def chance_of_separation(better: int, worse: int) -> float:
    """The chance that `better` searches all beat `worse` searches of one and the same configuration:
    1 / C(better + worse, better) (every ordering of the m + n searches equally likely)."""
    return 1 / math.comb(better + worse, better)


def u_statistic(first: Sequence[float], second: Sequence[float]) -> float:
    """Mann-Whitney's U of `first` over `second`: the pairs where first's value is larger, ties counting a half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in first for b in second)


def exact_p_greater(first: Sequence[float], second: Sequence[float]) -> float:
    """The one-sided exact Mann-Whitney p: the share of all C(m + n, m) ways to split the pooled values into groups
    of m and n whose U is at least the observed one (Mann and Whitney 1947, module docstring; ties kept as observed).
    Exact up to the compare-tuners' 10 rounds each: C(20, 10) = 184,756 splits."""
    import itertools

    pooled, m = [*first, *second], len(first)
    if not first or not second:
        raise ValueError("both groups need at least one value")
    if math.comb(len(pooled), m) > MAX_SPLITS:
        raise ValueError(f"{m} and {len(second)} values: more than {MAX_SPLITS:,} splits to enumerate")
    observed = u_statistic(first, second)
    count = total = 0
    for chosen in itertools.combinations(range(len(pooled)), m):
        picked = set(chosen)
        rest = [v for i, v in enumerate(pooled) if i not in picked]
        total += 1
        count += u_statistic([pooled[i] for i in chosen], rest) >= observed - 1e-9
    return count / total


def significantly_better(candidate: Sequence[float], reference: Sequence[float], alpha: float = ALPHA) -> bool:
    """Every search of the candidate beat every search of the reference, and that is unlikely by chance."""
    if not candidate or not reference:
        return False
    return min(candidate) > max(reference) and chance_of_separation(len(candidate), len(reference)) <= alpha


def rank(scores: dict[C, list[float]], alive: Sequence[C]) -> list[C]:
    """The candidates by median score, best first; ties keep the earlier (simpler, closer to the default) one."""
    order = {c: i for i, c in enumerate(alive)}
    return sorted(alive, key=lambda c: (-(statistics.median(scores[c]) if scores[c] else 0.0), order[c]))


def successive_halving(
    candidates: Sequence[C],
    measure: Callable[[C, int], list[float]],
    budget: int,
    reference: C,
    *,
    eta: int = ETA,
    stop: Callable[[], bool] = lambda: False,
    measured: dict[C, list[float]] | None = None,
    first: int = FIRST_EFFORT,
) -> Outcome[C]:
    """Search `candidates` (the reference first, or anywhere: it is measured first) within `budget` units.

    measured: capacities measured before the search, one per unit (spent out of `budget`); they count as the first
    rung's units of their candidate."""
    if reference not in candidates:
        raise ValueError("the reference (default) configuration must be among the candidates")
    if len(set(candidates)) != len(candidates):
        raise ValueError("candidates must be distinct")
    earlier = {c: [max(0.0, v) for v in found] for c, found in (measured or {}).items() if found}
    if any(c not in candidates for c in earlier):
        raise ValueError("earlier measurements must be of candidates")
    alive = [reference, *(c for c in candidates if c != reference)]
    rungs = schedule(len(alive), budget, eta, first)
    if not rungs:
        raise ValueError(f"a budget of {budget} units cannot measure {len(alive)} candidates once each")
    scores: dict[C, list[float]] = {c: list(earlier.get(c, [])) for c in alive}
    spent, run, stopped = sum(len(v) for v in earlier.values()), [], False
    for number, rung in enumerate(rungs):
        if number:
            alive = _keep(rank(scores, alive), rung.candidates, reference)
        # In the first rung, the candidates measured before the search (the default's timed search) come last: a
        # budget's end then cuts the default's second search, never another candidate's first.
        for candidate in sorted(alive, key=lambda c: c in earlier) if number == 0 else alive:
            owed = rung.effort - (len(earlier.get(candidate, [])) if number == 0 else 0)
            if owed < 1:
                continue
            if stop():
                stopped = True
                break
            found = measure(candidate, owed)
            scores[candidate] += [max(0.0, v) for v in found[:owed]] or [0.0]
            spent += owed
        run.append(rung)
        if stopped:
            break
    # The winner among the last rung's candidates: one eliminated early has fewer measurements, and one lucky one
    # must not beat the finalists' medians.
    finalists = [c for c in alive if scores[c]]
    best = rank(scores, finalists)[0] if finalists else None
    return Outcome(scores, spent, run, best, reference, stopped, rank(scores, [c for c in scores if scores[c]]))


def _keep(ranked: list[C], count: int, reference: C) -> list[C]:
    """The best `count` of `ranked`, the reference always among them (it takes the last place when it is not)."""
    kept = ranked[:count]
    if reference not in kept:
        kept = [*ranked[: count - 1], reference]
    return kept
