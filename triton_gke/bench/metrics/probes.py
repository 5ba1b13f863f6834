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
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    t: float  # time.time()
    server_cpu_s: float | None  # user + system seconds of the server process tree
    machine_busy: float | None  # /proc/stat jiffies, all cores
    machine_total: float | None
    inferences: float | None  # Triton nv_inference_count of the model (images, batch counted)
    executions: float | None  # nv_inference_exec_count: model executions (batches)
    successes: float | None  # nv_inference_request_success: requests answered
    request_us: float | None  # nv_inference_request_duration_us: their summed time in the server
    queue_us: float | None  # nv_inference_queue_duration_us: ... of which waiting in the queue
    gpu_util: float | None  # mean nv_gpu_utilization (0-1) over the server's GPUs


@dataclass(frozen=True)
class WindowStats:
    server_cpu_pct: float | None  # % of the whole machine (100 = every core busy)
    machine_cpu_pct: float | None  # the same for everything on the machine (Locust included)
    batch: float | None  # inferences per execution: the batch size the dynamic batcher achieved
    server_ms: float | None  # mean time a request spent in the server (queue included)
    queue_ms: float | None  # mean time a request waited in the queue (the batcher's delay included)
    gpu_pct: float | None


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
    """Averages between the last sample at or before `start` and the first at or after `end`."""
    if len(samples) < 2:
        return WindowStats(None, None, None, None, None, None)
    times = [s.t for s in samples]
    first = samples[max(0, bisect.bisect_right(times, start) - 1)]
    last = samples[min(len(samples) - 1, bisect.bisect_left(times, end))]
    elapsed = last.t - first.t
    if elapsed <= 0:
        return WindowStats(None, None, None, None, None, None)
    gpu = [s.gpu_util for s in samples if first.t <= s.t <= last.t and s.gpu_util is not None]
    return WindowStats(
        server_cpu_pct=_ratio(_delta(first.server_cpu_s, last.server_cpu_s), elapsed * cpu_count(), 100),
        machine_cpu_pct=_ratio(
            _delta(first.machine_busy, last.machine_busy), _delta(first.machine_total, last.machine_total), 100
        ),
        batch=_ratio(_delta(first.inferences, last.inferences), _delta(first.executions, last.executions), 1),
        server_ms=_ratio(_delta(first.request_us, last.request_us), _delta(first.successes, last.successes), 1e-3),
        queue_ms=_ratio(_delta(first.queue_us, last.queue_us), _delta(first.successes, last.successes), 1e-3),
        gpu_pct=100 * sum(gpu) / len(gpu) if gpu else None,
    )


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _ratio(part: float | None, whole: float | None, scale: float) -> float | None:
    return None if part is None or not whole else scale * part / whole
