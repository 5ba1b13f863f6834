"""The load ramp of one Locust run, and its hand-over to the Locust process through the environment.

The runner builds a LoadPlan; the Locust shape (bench/locust_steps.py) reads it back with
from_env(). A run is one warm-up step at the first user count, then one step per user count:
`settle_s` to let the new users ramp in (not measured), then at least `step_s` measured, longer
(up to STRETCH x step_s) until the step has the SLO search's `min_requests` requests: at a low
offered load a short step holds too few requests for a p95.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bench.slo_search import SloCriteria

_PREFIX = "BENCH_"
STRETCH = 4.0  # a step lasts at most this many times step_s while waiting for min_requests


class PlanError(ValueError):
    """A bad load plan; the message names the setting."""


@dataclass(frozen=True)
class LoadPlan:
    users: tuple[int, ...]  # user counts of the measured steps, rising
    rps_per_user: float  # each user's pace (the locust-config `rps` key); 0 = closed loop, flat out
    step_s: float
    settle_s: float
    warmup_s: float
    criteria: SloCriteria
    steps_file: str = ""  # where the shape writes one JSON line per finished step

    def __post_init__(self) -> None:
        if not self.users or any(u < 1 for u in self.users):
            raise PlanError(f"users: expected one or more counts >= 1, got {list(self.users)}")
        if list(self.users) != sorted(set(self.users)):
            raise PlanError(f"users: counts must rise strictly, got {list(self.users)}")
        if self.rps_per_user < 0:
            raise PlanError(f"rps per user: expected >= 0, got {self.rps_per_user}")
        if self.step_s <= 0 or self.settle_s < 0 or self.warmup_s <= 0:
            raise PlanError("step and warm-up seconds must be > 0, settle seconds >= 0")

    def offered_rps(self, users: int) -> float | None:
        return users * self.rps_per_user if self.rps_per_user else None

    @property
    def max_step_s(self) -> float:
        return STRETCH * self.step_s

    def max_duration_s(self) -> float:
        """Upper bound of the shape's run time when no step ends the search early."""
        ticks = 2 * (len(self.users) + 1)  # the shape acts on 1 s ticks: each phase may run up to 1 s long
        return self.warmup_s + len(self.users) * (self.settle_s + self.max_step_s) + ticks

    def env(self) -> dict[str, str]:
        c = self.criteria
        values = {
            "USERS": ",".join(map(str, self.users)),
            "RPS_PER_USER": repr(self.rps_per_user),
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
                raise PlanError(f"{_PREFIX}{key} is not set (the shape is started by `python -m bench`)")
            return value

        try:
            criteria = SloCriteria(
                float(get("SLO_MS")), float(get("MAX_FAILURE_RATIO")), int(get("STOP_AFTER")), int(get("MIN_REQUESTS"))
            )
            return cls(
                users=tuple(int(u) for u in get("USERS").split(",")),
                rps_per_user=float(get("RPS_PER_USER")),
                step_s=float(get("STEP_S")),
                settle_s=float(get("SETTLE_S")),
                warmup_s=float(get("WARMUP_S")),
                criteria=criteria,
                steps_file=get("STEPS_FILE"),
            )
        except PlanError:
            raise
        except ValueError as err:
            raise PlanError(f"bad load plan in the environment: {err}") from None
