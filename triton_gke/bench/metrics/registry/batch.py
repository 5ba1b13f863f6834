"""batch: the batch size the dynamic batcher achieved during a step, in images per model execution.

Triton's nv_inference_count (inferences, batch counted) over nv_inference_exec_count (executions), both cumulative
counters: https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window, delta, ratio


def read(w: Window) -> float | None:
    return ratio(delta(w.first.inferences, w.last.inferences), delta(w.first.executions, w.last.executions), 1)


METRIC = Metric(
    name="batch", header="batch size", unit="images per execution", read=read, better="higher", digits=2, order=20
)
