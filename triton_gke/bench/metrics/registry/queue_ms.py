"""queue_ms: the mean time a request waited in Triton's queue during a step, the dynamic batcher's delay included.

nv_inference_queue_duration_us over nv_inference_request_success, cumulative counters:
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html
Shown in brackets in server_ms's column: it is part of that time.
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window, delta, ratio


def read(w: Window) -> float | None:
    return ratio(delta(w.first.queue_us, w.last.queue_us), delta(w.first.successes, w.last.successes), 1e-3)


METRIC = Metric(
    name="queue_ms", header="queue", unit="ms", read=read, better="lower", digits=0, order=11, inside="server_ms"
)
