"""gpu_pct: the mean GPU utilisation over the server's GPUs during a step, in %; None on a CPU-only server.

Triton's nv_gpu_utilization gauge (0-1), present only on a GPU:
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html
Higher is better for a saturated server, as in Model Analyzer's gpu_utilization record.
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window


def read(w: Window) -> float | None:
    gpu = [s.gpu_util for s in w.inside if s.gpu_util is not None]
    return 100 * sum(gpu) / len(gpu) if gpu else None


METRIC = Metric(name="gpu_pct", header="GPU %", unit="%", read=read, better="higher", digits=0, order=50)
