"""What a queue alone predicts for an open loop from a closed loop's time per request: the p95 of a server with c
instances under Poisson arrivals (M/D/c), and the highest rate whose p95 meets an SLO.

Why it ranks serving configurations for an open-loop SLO where a closed-loop throughput does not: a closed loop never
lets more than N requests wait, so its throughput says nothing about the queue that independent arrivals build.
`bench loop-check` measured one configuration both ways (results/bench/loop-check-dev-2026-12-03-locust): M/D/1 with
the closed loop's 59 ms per request predicted how the measured p95 grew with the rate (107, 137, 222, 782 ms at 3, 6,
10, 15 requests/s against 126-160, 170-190, 210-267, 680-727 measured). It does not know the slower tail of requests
that find the server idle (p95 near twice the service time at low rates there), which every configuration of one
server shares; nor what a dynamic batcher gains under load, which on 2 CPU cores is nothing (a batch of 4 cost about
4 images one after another) and on a GPU is most of the point: for a GPU, rank with open-loop searches.

The simulation is seeded: the same inputs give the same figures on every machine.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

MODEL_REQUESTS = 100_000  # simulated arrivals per rate
MODEL_SEED = 35
# From an empty queue, 100,000 arrivals reach M/D/1's steady mean wait within 2 % up to a load of 0.9 and 5 % at
# 0.95 (against Pollaczek-Khinchine), 19 % short at 0.99: at or past 0.95 the model says "unstable", not a figure.
UNSTEADY_LOAD = 0.95
CAPACITY_REQUESTS = 20_000  # per rate tried while bisecting for a capacity: 12 rates, well under a second
CAPACITY_PRECISION = 0.01  # the bisection stops within 1 % of the rate


def _gaps(rate: float, requests: int) -> np.ndarray:
    return np.random.default_rng(MODEL_SEED).exponential(1000.0 / rate, requests)


def _check(service_ms: float, servers: int, rate: float, requests: int) -> None:
    """A queue to simulate: a positive finite time per request, a whole number of instances, arrivals."""
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
        raise ValueError(f"servers: expected a whole number >= 1, got {servers!r}")
    if not (math.isfinite(service_ms) and service_ms > 0 and math.isfinite(rate) and rate > 0):
        raise ValueError(f"service_ms and rate: expected finite numbers > 0, got {service_ms!r} and {rate!r}")
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        raise ValueError(f"requests: expected a whole number >= 1, got {requests!r}")


def single_queue(service_ms: float, rate: float, requests: int = MODEL_REQUESTS) -> tuple[float, float] | None:
    """(p95 response ms, mean queue ms) of ONE server with a fixed service time under Poisson arrivals at `rate`
    (M/D/1), by Lindley's recursion (wait[n+1] = max(0, wait[n] + service - gap[n+1])), seeded; None when the load
    (rate x service) is UNSTEADY_LOAD or more (no steady state, or none this simulation reaches)."""
    _check(service_ms, 1, rate, requests)
    if rate * service_ms >= UNSTEADY_LOAD * 1000.0:
        return None
    # Lindley's recursion is a random walk reflected at 0: wait[n] = X[n] - min(X[0..n]) for X the running sum of
    # (service - gap), X[0] = 0 (the first request finds the server idle).
    walk = np.concatenate(([0.0], np.cumsum(service_ms - _gaps(rate, requests)[:-1])))
    waits = walk - np.minimum.accumulate(walk)
    return float(np.percentile(waits + service_ms, 95)), float(waits.mean())


def queue_times(
    service_ms: float, servers: int, rate: float, requests: int = MODEL_REQUESTS
) -> tuple[float, float] | None:
    """(p95 response ms, mean queue ms) of `servers` identical instances, one queue, a fixed service time each, under
    Poisson arrivals at `rate` (M/D/c: each request goes to the instance free first, as Triton's scheduler hands a
    request to the next free model instance); None at UNSTEADY_LOAD of all instances or more."""
    _check(service_ms, servers, rate, requests)
    if rate * service_ms >= UNSTEADY_LOAD * 1000.0 * servers:
        return None
    if servers == 1:
        return single_queue(service_ms, rate, requests)
    # More instances than requests: none ever waits, so the heap needs no more than one per request (10**9 instances
    # allocated a 10**9-entry list: 7 minutes of the test suite's time in one hypothesis example).
    servers = min(servers, requests)
    arrivals = np.cumsum(_gaps(rate, requests)).tolist()
    free = [0.0] * servers  # when each instance is next free, a heap
    waits = np.empty(requests)
    for n, arrival in enumerate(arrivals):
        start = max(arrival, heapq.heappop(free))
        heapq.heappush(free, start + service_ms)
        waits[n] = start - arrival
    return float(np.percentile(waits + service_ms, 95)), float(waits.mean())


def queue_p95(service_ms: float, servers: int, rate: float, requests: int = MODEL_REQUESTS) -> float | None:
    """queue_times' p95 response time alone (ms); None where it has no figure."""
    found = queue_times(service_ms, servers, rate, requests)
    return None if found is None else found[0]


def capacity(service_ms: float, servers: int, slo_ms: float) -> float:
    """The highest Poisson rate (requests/s) whose M/D/c p95 meets `slo_ms`, within CAPACITY_PRECISION; 0 when not
    even a lone request does (service_ms > slo_ms). Bisection: p95 grows with the rate."""
    if not (math.isfinite(slo_ms) and slo_ms > 0):
        raise ValueError(f"slo_ms: expected a finite number > 0, got {slo_ms!r}")
    _check(service_ms, servers, 1.0, 1)
    if service_ms > slo_ms:
        return 0.0
    high = UNSTEADY_LOAD * 1000.0 * servers / service_ms  # past `high` the model has no figure
    if not math.isfinite(high):  # a time per request so short that no rate is representable: say so, never loop
        raise ValueError(f"service_ms {service_ms!r} with {servers} servers: no finite rate keeps them busy")
    low = 0.0
    while high - low > CAPACITY_PRECISION * max(low, 1e-9) and high - low > 1e-6:
        middle = (low + high) / 2
        p95 = queue_p95(service_ms, servers, middle, CAPACITY_REQUESTS)
        low, high = (middle, high) if p95 is not None and p95 <= slo_ms else (low, middle)
    return low
