"""server_cpu_pct: the % of the whole machine (100 = every core busy) the server's process tree used during a step.

The CPU seconds of tritonserver and its python-backend stubs (psutil, local servers only) over the window's
seconds times the cores.
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window, delta, ratio


def read(w: Window) -> float | None:
    return ratio(delta(w.first.server_cpu_s, w.last.server_cpu_s), w.elapsed * w.cores, 100)


METRIC = Metric(name="server_cpu_pct", header="server CPU %", unit="%", read=read, better="lower", digits=0, order=30)
