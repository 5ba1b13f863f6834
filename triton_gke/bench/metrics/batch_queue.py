"""What a dynamic batcher gains, predicted from the served model's service curve: the tuner's own model of Triton's
dynamic batcher, for the screen (bench tune --search screen) where batches form.

queue_model.py predicts from one time per request, which is all a closed loop at a concurrency of the instance
count shows: no batch forms there, so it cannot see batching (issue 46). This model takes the time of a batch of
every size, a curve, from one of:
  - the model's own configuration, when it states its curve: a GPU twin's `service_curve_ms` and `time_scale`
    parameters (model_repo/gpu_twin.py writes them), so a twin's batch timings are known without measuring them;
  - Triton's per-model statistics, GET /v2/models/NAME/stats, whose `batch_stats` give, per batch size, the count
    and total nanoseconds of `compute_infer` (Triton's statistics extension, server docs/protocol/
    extension_statistics.md, "Statistics Response JSON Object": batch_stats / compute_infer; the same durations the
    live twin test reads): a real server's measured batch timings, for the sizes it has executed.

Triton's batcher rules, from its documentation (server docs/user_guide/batcher.md, "Preferred Batch Sizes" and
"Delayed Batching"), read here and written here without the ground truth's code (the import contract tuners-blind):
when an instance is free it sends the largest preferred size it can form, else a full batch, else what is queued once
the oldest request has waited max_queue_delay (at once when the delay is 0). Executions in flight share one GPU's work
(each of m progresses at 1/m): the conservative assumption, no gain from concurrency, which the closed-loop
measurement at a concurrency of the instance count checks (calibration below).

Calibration: the measured time per request at batch 1 (the screen's closed loop, Little's law) beyond the curve's
(c requests in flight on c instances each take c x curve(1) under sharing) is taken as a fixed cost outside the GPU
(the wire, HTTP, the backend's passing of requests), added to every request's latency and holding no GPU time: the
batcher is predicted on the curve as it is, against the SLO less that cost. Issue 46's first twin check scaled the
whole curve by the measured ratio instead; a 36 ms cost per request on a 30 ms batch-1 execution
(results/bench/twin-gpu-2026-12-07) then made every batch of that variant look 2.2x slower, and the pick missed.

One seed, one run of REQUESTS arrivals per rate, the first WARMUP share left out; seeded, so the same inputs give the
same figures on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REQUESTS = 3000
WARMUP = 0.1
SEED = 46
GRID = 16  # rates tried below the peak before bisecting: a queue delay costs most at LOW rates (p95 not monotone)
BISECTIONS = 7


@dataclass(frozen=True)
class Batching:
    """The batcher's settings the model predicts for: Triton's config names, times in ms of the served model."""

    max_batch_size: int
    preferred: tuple[int, ...] = ()
    delay_ms: float = 0.0
    instances: int = 1


def batch_ms(curve: Mapping[int, float], batch: int) -> float:
    """The curve's time of a batch: its row, else linear between the nearest rows, else linear from the last two
    rows beyond the largest (a measured curve holds the sizes the server ran; an extrapolation is marked by the
    caller)."""
    if batch in curve:
        return float(curve[batch])
    sizes = sorted(curve)
    if len(sizes) == 1 or batch < sizes[0]:
        return float(curve[sizes[0]]) * (max(batch, 1) / sizes[0] if batch > sizes[0] else 1.0)
    lower = max((s for s in sizes if s < batch), default=sizes[0])
    upper = min((s for s in sizes if s > batch), default=None)
    if upper is None:
        lower, upper = sizes[-2], sizes[-1]
    slope = (curve[upper] - curve[lower]) / (upper - lower)
    return float(curve[lower]) + slope * (batch - lower)


def _send(queued: int, oldest_wait: float, b: Batching) -> int:
    """How many queued requests a free instance takes now (0: the batcher waits), by batcher.md's rules."""
    possible = min(queued, b.max_batch_size)
    preferred = [p for p in b.preferred if p <= possible]
    if preferred:
        return max(preferred)
    if possible == b.max_batch_size or b.delay_ms <= 0 or oldest_wait >= b.delay_ms:
        return possible
    return 0


def latencies(curve: Mapping[int, float], b: Batching, rate_per_s: float, requests: int = REQUESTS) -> list[float]:
    """Each request's latency (ms) under Poisson arrivals at rate_per_s, the warm-up share left out."""
    rng = random.Random(SEED)
    arrivals, t = [], 0.0
    for _ in range(requests):
        t += rng.expovariate(rate_per_s / 1000.0)
        arrivals.append(t)
    done = [math.nan] * requests
    queue: list[int] = []
    head = 0  # queue[head:] is waiting
    running: list[tuple[float, list[int]]] = []  # (work left in ms of the whole GPU, members)
    now, nxt = 0.0, 0
    while nxt < requests or head < len(queue) or running:
        share = 1.0 / len(running) if running else 0.0
        t_done = now + min(w for w, _ in running) / share if running else math.inf
        t_arrive = arrivals[nxt] if nxt < requests else math.inf
        waiting = head < len(queue) and len(running) < b.instances and b.delay_ms > 0
        t_expire = arrivals[queue[head]] + b.delay_ms if waiting else math.inf
        step = min(t_done, t_arrive, t_expire)
        running = [(w - (step - now) * share, m) for w, m in running]
        now = step
        if step == t_done:
            finished = min(range(len(running)), key=lambda i: running[i][0])
            for i in running.pop(finished)[1]:
                done[i] = now - arrivals[i]
        elif step == t_arrive:
            queue.append(nxt)
            nxt += 1
        while len(running) < b.instances and head < len(queue):
            size = _send(len(queue) - head, now - arrivals[queue[head]] + 1e-9, b)
            if not size:
                break
            running.append((batch_ms(curve, size), queue[head : head + size]))
            head += size
    return done[int(WARMUP * requests) :]


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def meets(curve: Mapping[int, float], b: Batching, rate_per_s: float, slo_ms: float) -> bool:
    """p95 within the SLO over the run and over its last quarter (a growing queue fails there first)."""
    found = latencies(curve, b, rate_per_s)
    return p95(found) <= slo_ms and p95(found[3 * len(found) // 4 :]) <= slo_ms


def peak_rate(curve: Mapping[int, float], b: Batching) -> float:
    """Requests/s the shared GPU serves at most: the best batch's images per ms of the whole GPU."""
    return max(size / batch_ms(curve, size) for size in range(1, b.max_batch_size + 1)) * 1000.0


def capacity(curve: Mapping[int, float], b: Batching, slo_ms: float) -> float:
    """The highest Poisson rate whose predicted p95 meets slo_ms: the highest passing point of a grid below the peak,
    then bisection toward the next point; 0 when none passes."""
    peak = peak_rate(curve, b)
    points = [peak * (i + 1) / GRID for i in range(GRID - 1)]
    passing = [r for r in points if meets(curve, b, r, slo_ms)]
    if not passing:
        return 0.0
    low = max(passing)
    high = min([r for r in points if r > low] or [peak])
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (middle, high) if meets(curve, b, middle, slo_ms) else (low, middle)
    return low


def overhead_ms(curve: Mapping[int, float], service_ms: float, instances: int) -> float:
    """The measured time per request beyond the curve's at batch 1 with `instances` in flight (module docstring);
    never below 0 (a server faster than its curve costs nothing extra)."""
    return max(0.0, service_ms - instances * batch_ms(curve, 1))


def curve_from_config(config: Mapping[str, Any]) -> dict[int, float] | None:
    """A GPU twin's curve in ms of the served model (service_curve_ms x time_scale), from its configuration as
    Triton's GET /v2/models/NAME/config answers it; None when the configuration states no curve."""
    parameters = config.get("parameters") or {}
    text = (parameters.get("service_curve_ms") or {}).get("string_value")
    if not text:
        return None
    scale = float((parameters.get("time_scale") or {}).get("string_value") or 1.0)
    rows = (part.split(":") for part in text.split(",") if part.strip())
    return {int(size): float(ms) * scale for size, ms in rows}


def curve_from_stats(stats: Mapping[str, Any]) -> dict[int, float] | None:
    """Triton's measured time per batch size (compute_infer ns / count of each batch_stats entry, ms), from the first
    model of a GET /v2/models/NAME/stats answer; None unless at least two batch sizes were executed (one size says
    nothing about what a larger batch costs)."""
    models = stats.get("model_stats") or []
    rows = (models[0].get("batch_stats") or []) if models else []
    curve = {}
    for row in rows:
        compute = row.get("compute_infer") or {}
        count = int(compute.get("count") or 0)
        if count > 0:
            curve[int(row["batch_size"])] = int(compute.get("ns") or 0) / count / 1e6
    return curve if len(curve) >= 2 else None
