"""server_ms: the mean time a request spent in the server during a step (Triton's request duration), queue included.

nv_inference_request_duration_us over nv_inference_request_success, cumulative counters:
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window, delta, ratio


def read(w: Window) -> float | None:
    return ratio(delta(w.first.request_us, w.last.request_us), delta(w.first.successes, w.last.successes), 1e-3)


METRIC = Metric(name="server_ms", header="in server ms", unit="ms", read=read, better="lower", digits=0, order=10)
