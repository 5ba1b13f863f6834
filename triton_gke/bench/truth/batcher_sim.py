"""A discrete-event simulation of Triton's dynamic batcher on one simulated GPU: the tuners' ground truth.

Poisson arrivals of single-image requests; one queue; `instances` model instances; each batch holds the GPU for the
curve's time under processor sharing (model_repo/gpu_service.py, the same rule the GPU twin sleeps by). The batcher
rules follow Triton's documentation (server docs/user_guide/batcher.md, "Preferred Batch Sizes" and "Delayed
Batching"; core src/dynamic_batch_scheduler.cc implements them):
  - a batch is formed when a model instance is available, from the queued requests in arrival order;
  - if a preferred size can be formed, the largest possible preferred size is sent at once;
  - else if max_batch_size requests are queued, max_batch_size is sent at once;
  - else, with max_queue_delay_microseconds = 0, the largest possible batch (all queued) is sent at once;
  - else the batcher waits until the OLDEST queued request has waited max_queue_delay, then sends the batch as is
    (a new arrival that completes a preferred or maximum batch sends it earlier).
Left out: request/response transfer, the python backend's per-execution overhead, priority levels, queue policies.

Error bound: capacities and p95s are averaged over independent seeds (replications); the bound is a 95 % Student-t
interval over them (`Estimate`), since latencies of one run are correlated and their order statistics are not.

Mutants (`Mutants`), for the tests that must catch a wrong batcher model: ignore the queue delay, run instances fully
in parallel (no sharing), ignore the preferred sizes.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from triton_gke.model_repo.gpu_service import Curve, rate, service_s

_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


@dataclass(frozen=True)
class BatcherConfig:
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    instances: int = 1


@dataclass(frozen=True)
class Mutants:
    ignore_queue_delay: bool = False
    parallel_instances: bool = False
    ignore_preferred: bool = False


@dataclass(frozen=True)
class Estimate:
    mean: float
    half_width: float  # 95 % interval over seeds (inf with one seed)
    per_seed: tuple[float, ...]


def estimate(values: Sequence[float]) -> Estimate:
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return Estimate(mean, math.inf, tuple(values))
    t = _T95.get(n - 1, 1.96)
    return Estimate(mean, t * statistics.stdev(values) / math.sqrt(n), tuple(values))


def _batch_size(queued: int, free: bool, oldest_wait: float, delay: float, config: BatcherConfig, m: Mutants) -> int:
    """How many queued requests the batcher sends now (0: it waits). The rules of the module docstring."""
    if not free or not queued:
        return 0
    possible = min(queued, config.max_batch_size)
    preferred = [] if m.ignore_preferred else [p for p in config.preferred_batch_sizes if p <= possible]
    if preferred:
        return max(preferred)
    if possible == config.max_batch_size or delay <= 0 or oldest_wait >= delay:
        return possible
    return 0


def simulate(
    arrivals: Sequence[float],
    curve: Curve,
    config: BatcherConfig,
    k: float = 1.0,
    speedup: Sequence[float] = (),
    mutants: Mutants = Mutants(),
) -> tuple[list[float], list[int]]:
    """Latency (s) of each request, in arrival order, and the size of every batch sent, for sorted arrival times (s)."""
    delay = 0.0 if mutants.ignore_queue_delay else config.max_queue_delay_us * k / 1e6
    latency = [math.nan] * len(arrivals)
    batches: list[int] = []
    queue: deque[int] = deque()
    jobs: list[list] = []  # [remaining whole-GPU seconds, request indices]
    now, nxt = 0.0, 0

    def progress() -> float:  # per-second progress of each job now
        return 1.0 if mutants.parallel_instances else rate(len(jobs), speedup)

    while nxt < len(arrivals) or queue or jobs:
        t_arrive = arrivals[nxt] if nxt < len(arrivals) else math.inf
        r = progress()
        t_done = now + min(job[0] for job in jobs) / r if jobs else math.inf
        free = len(jobs) < config.instances
        t_expire = arrivals[queue[0]] + delay if queue and free and delay > 0 else math.inf
        t = min(t_arrive, t_done, t_expire)
        for job in jobs:
            job[0] -= (t - now) * r
        now = t
        if t == t_done:
            finished = min(jobs, key=lambda job: job[0])
            jobs.remove(finished)
            for i in finished[1]:
                latency[i] = now - arrivals[i]
        elif t == t_arrive:
            queue.append(nxt)
            nxt += 1
        while True:
            oldest = now - arrivals[queue[0]] if queue else 0.0
            size = _batch_size(len(queue), len(jobs) < config.instances, oldest, delay - 1e-12, config, mutants)
            if not size:
                break
            members = [queue.popleft() for _ in range(size)]
            batches.append(size)
            jobs.append([service_s(curve, size, k), members])
    return latency, batches


def poisson_arrivals(rate_per_s: float, count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(count):
        t += rng.expovariate(rate_per_s)
        out.append(t)
    return out


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Scenario:
    curve: Curve
    config: BatcherConfig
    k: float = 1.0
    speedup: tuple[float, ...] = ()
    mutants: Mutants = Mutants()
    requests: int = 4000
    warmup: float = 0.1  # share of the first requests left out of the statistics

    def latencies_at(self, rate_per_s: float, seed: int) -> list[float]:
        """The measured requests' latencies (after the warm-up share), in arrival order."""
        arrivals = poisson_arrivals(rate_per_s, self.requests, seed)
        latency, _ = simulate(arrivals, self.curve, self.config, self.k, self.speedup, self.mutants)
        return latency[int(self.warmup * len(latency)) :]

    def p95_at(self, rate_per_s: float, seed: int) -> float:
        return p95(self.latencies_at(rate_per_s, seed))

    def meets(self, rate_per_s: float, seed: int, slo_s: float) -> bool:
        """p95 <= slo_s over the measured requests AND over their last quarter: an overloaded queue grows without
        bound, so its last quarter fails first, while a finite run's overall p95 can still pass near the peak."""
        latency = self.latencies_at(rate_per_s, seed)
        return p95(latency) <= slo_s and p95(latency[3 * len(latency) // 4 :]) <= slo_s

    def peak_rate(self) -> float:
        """Requests/s the GPU can serve at most: the best batch's images per second of whole-GPU time (times the
        instances when they do not share it)."""
        best = max(b / service_s(self.curve, b, self.k) for b in range(1, self.config.max_batch_size + 1))
        return best * (self.config.instances if self.mutants.parallel_instances else 1)


def capacity(scenario: Scenario, slo_s: float, seed: int, grid: int = 24, steps: int = 10) -> float:
    """The highest rate that meets slo_s (Scenario.meets) for one seed's arrivals, common to all rates (common random
    numbers): the highest passing point of a grid below the peak rate, then bisection toward the next grid point (or
    the peak). The peak itself fails by definition: a queue offered exactly its service rate is unstable. p95 need not
    be monotone in the rate (a queue delay costs most at low rates), hence the grid rather than bisection alone.
    Near the peak a finite run can pass where an endless one would not: such an answer is an upper bound, within
    peak / grid / 2**steps of the peak."""
    peak = scenario.peak_rate()
    points = [peak * (i + 1) / grid for i in range(grid)]
    passing = [i for i, r in enumerate(points[:-1]) if scenario.meets(r, seed, slo_s)]
    if not passing:
        return 0.0
    lo, hi = points[max(passing)], points[max(passing) + 1]
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if scenario.meets(mid, seed, slo_s) else (lo, mid)
    return lo


def capacity_estimate(scenario: Scenario, slo_s: float, seeds: Sequence[int] = (1, 2, 3, 4, 5)) -> Estimate:
    return estimate([capacity(scenario, slo_s, seed) for seed in seeds])


def throughput_at(scenario: Scenario, rate_per_s: float, seed: int) -> float:
    """Completed requests per second over the measured part of one run."""
    arrivals = poisson_arrivals(rate_per_s, scenario.requests, seed)
    latency, _ = simulate(arrivals, scenario.curve, scenario.config, scenario.k, scenario.speedup, scenario.mutants)
    start = int(scenario.warmup * len(arrivals))
    done = [a + lat for a, lat in zip(arrivals[start:], latency[start:], strict=True)]
    return (len(done) - 1) / (max(done) - min(done)) if len(done) > 1 else 0.0
