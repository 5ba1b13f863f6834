"""machine_cpu_pct: the % of the whole machine everything used during a step (Locust included), from /proc/stat.

Busy over total jiffies of all cores (proc(5): https://man7.org/linux/man-pages/man5/proc.5.html); its difference
from server_cpu_pct is what competed with the server.
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry.base import Metric, Window, delta, ratio


def read(w: Window) -> float | None:
    return ratio(
        delta(w.first.machine_busy, w.last.machine_busy), delta(w.first.machine_total, w.last.machine_total), 100
    )


METRIC = Metric(name="machine_cpu_pct", header="machine CPU %", unit="%", read=read, better="lower", digits=0, order=40)
