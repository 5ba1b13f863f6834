"""The load of one Locust run, and its hand-over to the Locust process through the environment.

The runner builds a LoadPlan; the Locust shape (bench/runners/locust_steps.py) reads it back with
from_env(). A run is
1. a warm-up step at the ladder's first rate (discarded: the first requests after a restart are slow);
2. the rate search: open-loop arrivals (Poisson by default) at rates chosen by
   bench.plans.slo_search.next_rate, `users` users bounding the requests in flight. Each step settles
   `settle_s` (not measured), then is measured for `step_s`, longer at low rates so that it holds
   the search's `min_requests` requests (1.25 x min_requests / rate, at most STRETCH x step_s);
3. saturation: closed-loop users at each count of `saturation_users` (each sends its next request
   when the last one returns), to measure the most the server can deliver (served/raw), until the
   throughput stops rising.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from triton_gke.bench.plans.slo_search import MAX_TRIES, RateLadder, SloCriteria

_PREFIX = "BENCH_"
STRETCH = 4.0  # a step lasts at most this many times step_s while waiting for min_requests
ARRIVALS = ("poisson", "constant")  # arrival processes the search may use (loadtest/arrivals.py)
SATURATION_GAIN = 0.03  # a saturation level that adds less throughput than this ends the phase


class PlanError(ValueError):
    """A bad load plan; the message names the setting."""


@dataclass(frozen=True)
class LoadPlan:
    ladder: RateLadder
    users: int  # concurrency bound during the rate search
    step_s: float
    settle_s: float
    warmup_s: float
    criteria: SloCriteria
    arrival: str = "poisson"
    saturation_users: tuple[int, ...] = (1, 2, 4, 8)  # closed-loop levels; empty: no saturation phase
    steps_file: str = ""  # where the shape writes one JSON line per finished step

    def __post_init__(self) -> None:
        if self.users < 1:
            raise PlanError(f"--max-users: expected >= 1, got {self.users}")
        if list(self.saturation_users) != sorted(set(self.saturation_users)) or any(
            u < 1 for u in self.saturation_users
        ):
            raise PlanError(f"--saturation-users: counts >= 1 must rise strictly, got {list(self.saturation_users)}")
        if not (self.step_s > 0 and self.settle_s >= 0 and self.warmup_s > 0):
            raise PlanError("step and warm-up seconds must be > 0, settle seconds >= 0")
        reachable = self.ladder.start * self.max_step_s
        if reachable < self.criteria.min_requests:  # then no step can pass: the search only ever comes down
            raise PlanError(
                f"--min-requests {self.criteria.min_requests}: a step at --start-rps {self.ladder.start:g} lasts at"
                f" most {self.max_step_s:g} s ({STRETCH:g} x --step-seconds), about {reachable:.0f} requests;"
                " raise --start-rps or --step-seconds, or lower --min-requests"
            )
        if self.arrival not in ARRIVALS:
            raise PlanError(f"--arrival: expected one of {', '.join(ARRIVALS)}, got {self.arrival!r}")

    @property
    def max_step_s(self) -> float:
        return STRETCH * self.step_s

    def step_length_s(self, rate: float | None) -> float:
        """Measured seconds of a step: step_s, longer at a low rate to collect min_requests."""
        if not rate:
            return self.step_s
        wanted = 1.25 * self.criteria.min_requests / rate
        return min(self.max_step_s, max(self.step_s, wanted))

    def max_search_steps(self) -> int:
        """Upper bound of measured search steps: climb or descent, bisection, each rate tried at most MAX_TRIES."""
        ladder = self.ladder
        climb = math.ceil(math.log(ladder.max_rate / ladder.floor) / math.log(ladder.growth)) + 1
        bisect = math.ceil(math.log2(math.log(ladder.growth) / math.log(1 + ladder.precision))) + 1
        return (climb + bisect) * MAX_TRIES

    def max_duration_s(self) -> float:
        """Upper bound of the shape's run time (the shape acts on 1 s ticks: up to 1 s per phase)."""
        search = self.max_search_steps() * (self.settle_s + self.max_step_s + 2)
        saturation = len(self.saturation_users) * (self.settle_s + self.step_s + 2)
        return self.warmup_s + 2 + search + saturation

    def env(self) -> dict[str, str]:
        c, ladder = self.criteria, self.ladder
        values = {
            "START_RPS": repr(ladder.start),
            "GROWTH": repr(ladder.growth),
            "PRECISION": repr(ladder.precision),
            "MAX_RPS": repr(ladder.max_rate),
            "FLOOR_RPS": repr(ladder.floor),
            "USERS": str(self.users),
            "ARRIVAL": self.arrival,
            "SATURATION_USERS": ",".join(map(str, self.saturation_users)),
            "STEP_S": repr(self.step_s),
            "SETTLE_S": repr(self.settle_s),
            "WARMUP_S": repr(self.warmup_s),
            "SLO_MS": repr(c.slo_ms),
            "MAX_FAILURE_RATIO": repr(c.max_failure_ratio),
            "STOP_AFTER": str(c.stop_after),
            "MIN_REQUESTS": str(c.min_requests),
            "STEPS_FILE": self.steps_file,
        }
        return {_PREFIX + k: v for k, v in values.items()}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LoadPlan:
        def get(key: str) -> str:
            value = env.get(_PREFIX + key)
            if value is None:
                raise PlanError(f"{_PREFIX}{key} is not set (the shape is started by `triton-gke bench`)")
            return value

        try:
            criteria = SloCriteria(
                float(get("SLO_MS")), float(get("MAX_FAILURE_RATIO")), int(get("STOP_AFTER")), int(get("MIN_REQUESTS"))
            )
            ladder = RateLadder(
                float(get("START_RPS")),
                float(get("GROWTH")),
                float(get("PRECISION")),
                float(get("MAX_RPS")),
                float(get("FLOOR_RPS")),
            )
            saturation = get("SATURATION_USERS")
            return cls(
                ladder=ladder,
                users=int(get("USERS")),
                step_s=float(get("STEP_S")),
                settle_s=float(get("SETTLE_S")),
                warmup_s=float(get("WARMUP_S")),
                criteria=criteria,
                arrival=get("ARRIVAL"),
                saturation_users=tuple(int(u) for u in saturation.split(",")) if saturation else (),
                steps_file=get("STEPS_FILE"),
            )
        except PlanError:
            raise
        except ValueError as err:
            raise PlanError(f"bad load plan in the environment: {err}") from None
