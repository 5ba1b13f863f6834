"""What the server did during a step: CPU use, batch size and GPU use, sampled in the background.

A Sampler thread records, every `interval_s`: the CPU seconds of the server's process tree
(tritonserver and its python-backend stubs; local servers only), the whole machine's busy and
total time from /proc/stat, and from Triton's metrics endpoint the model's inference and
execution counters, its request and queue times, and the GPU utilisation (nv_gpu_*, present
only on a GPU). A step's figures
are the differences between the samples around its measurement window, so they are averages
over the window give or take one interval.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
import urllib.request
from dataclasses import make_dataclass

from triton_gke.bench.metrics import registry
from triton_gke.bench.metrics.registry.base import Sample, Window

# What a step's window reads: one field per registered metric (bench/metrics/registry/), in its order.
WindowStats = make_dataclass(
    "WindowStats", [(m.name, "float | None") for m in registry.METRICS], frozen=True, namespace={"__module__": __name__}
)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours cpusets/containers
    except AttributeError:
        return os.cpu_count() or 1


def machine_jiffies() -> tuple[float, float] | None:
    """(busy, total) jiffies of all cores since boot; None where /proc/stat is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [float(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])  # guest time is already inside user/nice


def process_tree_cpu_s(pid: int) -> float | None:
    """CPU seconds of a process and all its descendants (Triton's python stubs are children)."""
    import psutil  # the 'local' extra: imported when used, so --help needs no extra

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):  # a child may exit between listing and reading
            times = process.cpu_times()
            total += times.user + times.system
    return total


# Triton counters read per model, in Sample field order.
COUNTERS = (
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_success",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
)


def triton_counters(metrics_url: str, model: str, timeout_s: float = 2.0) -> tuple[float | None, ...]:
    """The model's COUNTERS, then the GPU utilisation (0-1), from Triton's Prometheus endpoint."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 must not go via a proxy
    try:
        with opener.open(metrics_url, timeout=timeout_s) as response:
            text = response.read().decode("utf-8", "replace")
    except OSError:
        return (None,) * (len(COUNTERS) + 1)
    sums: dict[str, float] = {}
    gpu: list[float] = []
    from prometheus_client.parser import (
        text_string_to_metric_families,  # the 'local' extra: imported when used, so --help needs no extra
    )

    # By family name: the parser renames counter samples to <name>_total.
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name in COUNTERS and sample.labels.get("model") == model:
                sums[family.name] = sums.get(family.name, 0.0) + sample.value
            elif family.name == "nv_gpu_utilization":
                gpu.append(sample.value)
    return (*(sums.get(name) for name in COUNTERS), sum(gpu) / len(gpu) if gpu else None)


class Sampler:
    """Background sampling of one server and one model; use as a context manager."""

    def __init__(self, model: str, metrics_url: str | None, server_pid: int | None, interval_s: float = 0.5) -> None:
        self.model, self.metrics_url, self.server_pid = model, metrics_url, server_pid
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sampler-{model}", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.interval_s)
        self.samples.append(self.sample())

    def sample(self) -> Sample:
        counters = triton_counters(self.metrics_url, self.model) if self.metrics_url else (None,) * (len(COUNTERS) + 1)
        jiffies = machine_jiffies() or (None, None)
        server = process_tree_cpu_s(self.server_pid) if self.server_pid else None
        return Sample(time.time(), server, *jiffies, *counters)

    def window(self, start: float, end: float) -> WindowStats:
        return window_stats(list(self.samples), start, end)


def window_stats(samples: list[Sample], start: float, end: float) -> WindowStats:
    """Averages between the last sample at or before `start` and the first at or after `end`, one per registered
    metric."""
    nothing = WindowStats(**{m.name: None for m in registry.METRICS})
    if len(samples) < 2:
        return nothing
    times = [s.t for s in samples]
    first = samples[max(0, bisect.bisect_right(times, start) - 1)]
    last = samples[min(len(samples) - 1, bisect.bisect_left(times, end))]
    elapsed = last.t - first.t
    if elapsed <= 0:
        return nothing
    inside = [s for s in samples if first.t <= s.t <= last.t]
    window = Window(first, last, inside, elapsed, cpu_count())
    return WindowStats(**{m.name: m.read(window) for m in registry.METRICS})
