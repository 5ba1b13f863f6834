"""The GPU twin's timing rule, pure: how long a batch holds the simulated GPU, and how executions share it.

Standard library only: this file is also copied beside the GPU twin's model.py (gpu_twin_model.py), which loads it
from its own folder inside Triton's python-backend stub, where the triton_gke package is not importable.

Service time. A batch of b requests needs curve(b) * k seconds of the whole GPU, where curve(b) is the T4's execution
time per batch (data/t4_service_curves.csv, ms; linear between listed batches) and k the time scale (every time and
the SLO multiplied by k, so that a 2-core machine can drive the twin).

Sharing (processor sharing). While m executions are in flight on one GPU (any instances, any models of the server),
each progresses at rate s(m)/m of the whole GPU, s(m) = 1 by default (no gain from concurrency: the GPU's work is
conserved). Why this first model: instances of one model on one GPU run concurrently and share its SMs, so a
busy GPU gives each of m executions about 1/m of itself. Reported by Triton's users: a 4-instance TensorRT model
slower than a 1-instance one (github.com/triton-inference-server/server/issues/7075), more instances adding no
throughput (#7108), no gain past ~6 instances (#7956). Some GPUs do overlap small executions: #6825 reports 1.6x at 2
instances and 1.7x at 4 on one card, so s(m) can be given (`speedup`) once measured; 1 is the conservative default.
It is kept as one virtual time V: dV/dt = s(m)/m while m > 0; an execution of work w that starts at V0 ends when
V reaches V0 + w. One V for all executions is exact for processor sharing, because all progress at the same rate.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Curve = Mapping[int, float]  # batch size -> execution time of one batch, ms


def format_curve(curve: Curve) -> str:
    """The curve as the model config's `service_curve_ms` parameter: "1:7.34,2:9.29,..." (batch:ms)."""
    return ",".join(f"{b}:{float(ms)!r}" for b, ms in sorted(curve.items()))


def parse_curve(text: str) -> dict[int, float]:
    rows = (part.split(":") for part in text.split(",") if part.strip())
    return {int(b): float(ms) for b, ms in rows}


def curve_ms(curve: Curve, batch: int) -> float:
    """Execution time (ms) of a batch of `batch` on the whole GPU: the row for that batch, else linear between the
    nearest rows; a batch beyond the last row is refused (the model's max_batch_size must be within the curve)."""
    if batch in curve:
        return float(curve[batch])
    sizes = sorted(curve)
    if not sizes or batch < 1 or batch > sizes[-1]:
        raise ValueError(
            f"batch {batch}: the curve covers batches {sizes[0] if sizes else '-'}..{sizes[-1] if sizes else '-'}"
        )
    hi = bisect.bisect_left(sizes, batch)
    if hi == 0:  # below the first row: no extrapolation toward zero work; a batch costs at least the first row
        return float(curve[sizes[0]])
    lo_b, hi_b = sizes[hi - 1], sizes[hi]
    return curve[lo_b] + (curve[hi_b] - curve[lo_b]) * (batch - lo_b) / (hi_b - lo_b)


def service_s(curve: Curve, batch: int, k: float) -> float:
    """Seconds of the whole (simulated) GPU a batch needs at time scale k."""
    if not k > 0:
        raise ValueError(f"time scale k={k!r}: expected > 0")
    return curve_ms(curve, batch) * k / 1000.0


def rate(m: int, speedup: Sequence[float] = ()) -> float:
    """Progress per second of EACH of m executions in flight: s(m)/m, s(m) = speedup[m-1] (the last entry beyond
    the list; 1 when empty)."""
    if m <= 0:
        return 0.0
    s = speedup[min(m, len(speedup)) - 1] if speedup else 1.0
    return s / m


@dataclass(frozen=True)
class GpuState:
    """The shared GPU: virtual time v (whole-GPU seconds done per execution) at real time t, m in flight."""

    v: float = 0.0
    t: float = 0.0
    m: int = 0


def advance(state: GpuState, now: float, speedup: Sequence[float] = ()) -> GpuState:
    """The state at real time `now` (>= state.t; an earlier now, from clocks read just before the lock, is now)."""
    now = max(now, state.t)
    return GpuState(state.v + (now - state.t) * rate(state.m, speedup), now, state.m)


def join(state: GpuState, now: float, speedup: Sequence[float] = ()) -> GpuState:
    advanced = advance(state, now, speedup)
    return GpuState(advanced.v, advanced.t, advanced.m + 1)


def leave(state: GpuState, now: float, speedup: Sequence[float] = ()) -> GpuState:
    advanced = advance(state, now, speedup)
    return GpuState(advanced.v, advanced.t, max(0, advanced.m - 1))


def seconds_left(state: GpuState, target_v: float, speedup: Sequence[float] = ()) -> float:
    """Real seconds until v reaches target_v if nobody joins or leaves (0 when reached)."""
    left = target_v - state.v
    if left <= 0:
        return 0.0
    return left / rate(max(state.m, 1), speedup)


def shared_finish_s(works: Sequence[float], starts: Sequence[float], speedup: Sequence[float] = ()) -> list[float]:
    """When each execution ends (real seconds) under the sharing rule, given its work and start time: the rule as one
    pure function of (curve, batch, concurrency, k) through works = service_s(...). Used by the tests and as the
    reference the live model is compared with."""
    order = sorted(range(len(works)), key=lambda i: starts[i])
    ends = [0.0] * len(works)
    state, targets, pending = GpuState(), {}, list(order)
    while pending or targets:
        next_start = starts[pending[0]] if pending else float("inf")
        first_done = min(targets, key=lambda i: targets[i]) if targets else None
        next_done = (
            state.t + seconds_left(state, targets[first_done], speedup) if first_done is not None else float("inf")
        )
        if next_start <= next_done:
            i = pending.pop(0)
            state = join(state, next_start, speedup)
            targets[i] = state.v + works[i]
        else:
            state = leave(state, next_done, speedup)
            ends[first_done] = next_done
            del targets[first_done]
    return ends
