"""Locust load shape of `triton-gke bench`: a warm-up, the rate search, then closed-loop saturation.

Loaded beside the project's own locustfile, which supplies the users, the open-loop arrivals
(`environment.arrivals`) and reads its usual locust-config keys (model, saddr, protocol,
payload...) from the environment:

    locust -f loadtest/locustfile.py,bench/runners/locust_steps.py --headless

The plan comes from BENCH_* variables (bench.plans.load_plan). The shape sets the whole test's arrival
rate step by step as bench.plans.slo_search.next_rate decides from the steps so far (geometric climb,
failures confirmed once, then bisection to within the ladder's precision), with the plan's users
bounding the requests in flight. Each step's measurement window collects every request that
completes in it: latencies of successful requests (exact, not Locust's rounded buckets, and
counted from each request's ARRIVAL), failures, and how long arrivals waited for a free user.
When a window closes, the step is appended to BENCH_STEPS_FILE as one JSON line.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import asdict
from typing import Any

import numpy as np
from locust import LoadTestShape, events

from triton_gke.bench.plans.load_plan import SATURATION_GAIN, LoadPlan
from triton_gke.bench.plans.slo_search import Step, next_rate

WARMUP, SEARCH, SATURATION = "warm-up", "search", "saturation"
SPAWN_RATE = 10_000.0  # users started or stopped per second: every level change at once


class Window:
    """Requests completed while one step's measurement window is open."""

    def __init__(self) -> None:
        self.opened, self.wall_start = time.monotonic(), time.time()
        self.latencies_ms: list[float] = []
        self.lags_ms: list[float] = []
        self.failures = 0
        self.errors: Counter[str] = Counter()

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.failures

    def add(self, response_time_ms: float, exception: BaseException | None, lag_ms: float | None) -> None:
        if lag_ms is not None:
            self.lags_ms.append(lag_ms)
        if exception is None:
            self.latencies_ms.append(response_time_ms)
        else:
            self.failures += 1
            self.errors[str(exception)[:160]] += 1

    def close(self, users: int, rate: float | None, phase: str) -> tuple[Step, dict[str, Any]]:
        duration = time.monotonic() - self.opened
        ok = np.asarray(self.latencies_ms)
        p50, p95 = (float(np.percentile(ok, q)) for q in (50, 95)) if ok.size else (None, None)
        step = Step(
            users=users,
            rps=ok.size / duration,
            p50_ms=p50,
            p95_ms=p95,
            requests=ok.size + self.failures,
            failures=self.failures,
            offered_rps=rate,
            warmup=phase == WARMUP,
        )
        extra = {
            "phase": phase,
            "wall_start": self.wall_start,
            "wall_end": time.time(),
            "duration_s": duration,
            "mean_ms": float(ok.mean()) if ok.size else None,
            "max_ms": float(ok.max()) if ok.size else None,
            "wait_p95_ms": float(np.percentile(self.lags_ms, 95)) if self.lags_ms else None,
            "errors": dict(self.errors.most_common(3)),
        }
        return step, extra


_current: Window | None = None  # the open measurement window, if any


@events.request.add_listener
def _record(response_time: float, exception: BaseException | None, context: dict | None = None, **_: Any) -> None:
    if _current is not None:
        _current.add(response_time, exception, (context or {}).get("lag_ms"))


class BenchSteps(LoadTestShape):
    """Warm-up, rate search, saturation; each level: settle (unmeasured), then measure."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = LoadPlan.from_env(os.environ)
        self.phase, self.rate = WARMUP, self.plan.ladder.start
        self.saturation_index = 0
        self.level_started: float | None = None
        self.applied = False  # the level's rate or closed loop is set in the locustfile
        self.steps: list[Step] = []  # warm-up and search steps, as the search reads them
        self.saturation_rps: list[float] = []
        self.drain_s = 0.0  # the slowest request of the last window: its backlog needs this long to clear

    def tick(self) -> tuple[int, float] | None:
        global _current
        now = time.monotonic()
        if self.level_started is None:
            self.level_started = now
        if not self.applied:
            self._apply()
        settle, length = self._timing()
        if _current is None and now >= self.level_started + settle:
            _current = Window()
        elif _current is not None and self._long_enough(_current, now, length):
            step, extra = _current.close(self._users(), self.rate, self.phase)
            self._write(step, extra)
            self.drain_s = min(self.plan.max_step_s, (extra["max_ms"] or 0.0) / 1000)
            _current = None
            if not self._advance():
                return None
            self.level_started, self.applied = now, False
            self._apply()
        # Locust also STOPS users at the spawn rate: all at once, or a level would start with the last one's users.
        return self._users(), SPAWN_RATE

    def _users(self) -> int:
        if self.phase == SATURATION:
            return self.plan.saturation_users[self.saturation_index]
        return self.plan.users

    def _timing(self) -> tuple[float, float]:
        """(unmeasured, measured) seconds of the level. The unmeasured part lasts settle_s plus the
        slowest request of the previous level: requests queued in the server under a failing rate
        would otherwise count against the next, lower one."""
        if self.phase == WARMUP:
            return 0.0, self.plan.warmup_s
        settle = self.plan.settle_s + self.drain_s
        if self.phase == SATURATION:
            return settle, self.plan.step_s
        return settle, self.plan.step_length_s(self.rate)

    def _apply(self) -> None:
        arrivals = self.runner.environment.arrivals  # type: ignore[union-attr]  # set by the locustfile
        if self.phase == SATURATION:
            arrivals.set_closed_loop()
        else:
            arrivals.set_total(self.rate)
        self.applied = True

    def _long_enough(self, window: Window, now: float, length: float) -> bool:
        """At least `length`; a search step goes on until it holds min_requests (at most max_step_s)."""
        elapsed = now - window.opened
        if elapsed < length:
            return False
        enough = window.requests >= self.plan.criteria.min_requests
        return self.phase != SEARCH or enough or elapsed >= self.plan.max_step_s

    def _advance(self) -> bool:
        """Move to the next level; False when the run is over."""
        if self.phase in (WARMUP, SEARCH):
            rate = next_rate(self.steps, self.plan.criteria, self.plan.ladder)
            if rate is not None:
                self.phase, self.rate = SEARCH, rate
                return True
            self.phase, self.rate = SATURATION, None
            return bool(self.plan.saturation_users)
        best = max(self.saturation_rps[:-1], default=0.0)
        gained = self.saturation_rps[-1] > best * (1 + SATURATION_GAIN)
        self.saturation_index += 1
        return gained and self.saturation_index < len(self.plan.saturation_users)

    def _write(self, step: Step, extra: dict[str, Any]) -> None:
        if self.phase == SATURATION:
            self.saturation_rps.append(step.rps)
        else:
            self.steps.append(step)
        with open(self.plan.steps_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({**asdict(step), **extra}) + "\n")
