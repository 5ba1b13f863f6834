"""Locust load shape of `python -m bench`: a warm-up step, then user counts rising step by step.

Loaded beside the project's own locustfile, which supplies the users and reads its usual
locust-config keys (model, saddr, rps, protocol, payload...) from the environment:

    locust -f loadtest/locustfile.py,bench/locust_steps.py --headless

The plan comes from BENCH_* variables (bench.load_plan). Each step's measurement window
collects every request that completes in it: latencies of successful requests (exact, not
Locust's rounded buckets) and failures; at a low load a window stays open until it holds enough
requests for a p95 (bench.load_plan). When a window closes, the step is appended to
BENCH_STEPS_FILE as one JSON line, and the ramp ends as soon as the SLO search says no higher
load is needed (K failing steps in a row), so a run never goes far past saturation.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import gevent
import numpy as np
from locust import LoadTestShape, events
from locust.env import Environment

from bench.load_plan import LoadPlan
from bench.slo_search import Step, should_stop


class Window:
    """Requests completed while one step's measurement window is open."""

    def __init__(self) -> None:
        self.opened, self.wall_start = time.monotonic(), time.time()
        self.latencies_ms: list[float] = []
        self.failures = 0
        self.errors: Counter[str] = Counter()

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.failures

    def add(self, response_time_ms: float, exception: BaseException | None) -> None:
        if exception is None:
            self.latencies_ms.append(response_time_ms)
        else:
            self.failures += 1
            self.errors[str(exception)[:160]] += 1

    def close(self, users: int, plan: LoadPlan, warmup: bool) -> tuple[Step, dict[str, Any]]:
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
            offered_rps=plan.offered_rps(users),
            warmup=warmup,
        )
        extra = {
            "wall_start": self.wall_start,
            "wall_end": time.time(),
            "duration_s": duration,
            "mean_ms": float(ok.mean()) if ok.size else None,
            "max_ms": float(ok.max()) if ok.size else None,
            "errors": dict(self.errors.most_common(3)),
        }
        return step, extra


_current: Window | None = None  # the open measurement window, if any
_phases = random.Random(0)  # seeded: the same start phases in every run


@events.init.add_listener
def _stagger_first_requests(environment: Environment, **_kwargs: Any) -> None:
    """Start each paced user at a random phase within its pacing period.

    Locust starts a spawn batch of users at one instant, and users paced at N requests/s then stay
    in lockstep: the server would see bursts of all users at once instead of a steady stream.
    """
    pace = LoadPlan.from_env(os.environ).rps_per_user
    if not pace:
        return  # closed-loop users fall out of step by themselves
    for user_class in environment.user_classes:
        user_class.on_start = _delayed(user_class.on_start, 1 / pace)


def _delayed(on_start: Callable[[Any], None], period: float) -> Callable[[Any], None]:
    def on_start_then_wait(user: Any) -> None:
        on_start(user)
        gevent.sleep(_phases.uniform(0, period))

    return on_start_then_wait


@events.request.add_listener
def _record(response_time: float, exception: BaseException | None, **_kwargs: Any) -> None:
    if _current is not None:
        _current.add(response_time, exception)


class BenchSteps(LoadTestShape):
    """Warm-up at the first user count, then each count: settle (unmeasured), then measure."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = LoadPlan.from_env(os.environ)
        users = self.plan.users
        self.levels = [(users[0], True), *((u, False) for u in users)]  # (users, is warm-up)
        self.index = 0
        self.level_started: float | None = None
        self.steps: list[Step] = []

    def tick(self) -> tuple[int, float] | None:
        global _current
        now = time.monotonic()
        self.level_started = self.level_started or now
        users, warmup = self.levels[self.index]
        settle, length = (0.0, self.plan.warmup_s) if warmup else (self.plan.settle_s, self.plan.step_s)
        if _current is None and now >= self.level_started + settle:
            _current = Window()
        elif _current is not None and self._long_enough(_current, now, length, warmup):
            self._write(*_current.close(users, self.plan, warmup))
            _current = None
            if should_stop(self.steps, self.plan.criteria) or self.index + 1 == len(self.levels):
                return None
            self.index, self.level_started = self.index + 1, now
        return self._target()

    def _long_enough(self, window: Window, now: float, length: float, warmup: bool) -> bool:
        """At least `length`; a measured step goes on until it holds min_requests (at most max_step_s)."""
        elapsed = now - window.opened
        if elapsed < length:
            return False
        enough = window.requests >= self.plan.criteria.min_requests
        return warmup or enough or elapsed >= self.plan.max_step_s

    def _target(self) -> tuple[int, float]:
        """Users of the current level, all new ones spawned within a second (their first requests
        are then staggered by _stagger_first_requests)."""
        users = self.levels[self.index][0]
        previous = self.levels[self.index - 1][0] if self.index else 0
        return users, float(max(1, users - previous))

    def _write(self, step: Step, extra: dict[str, Any]) -> None:
        self.steps.append(step)
        with open(self.plan.steps_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({**asdict(step), **extra}) + "\n")
