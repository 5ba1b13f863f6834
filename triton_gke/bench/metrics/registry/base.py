"""What one reported metric is, and the window of samples it is read from (bench/metrics/registry/).

A metric is one module of this package holding a METRIC: its name (the key in results.csv, summary.csv and
results.json), how it is read from the samples around a step, how a variant's steps are summarised into one figure,
and how the README's results table shows it. Model Analyzer's record types are the model: one class per measured
quantity, in model_analyzer/record/types/ (https://github.com/triton-inference-server/model_analyzer).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal


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
class Window:
    """The samples around one step: the last at or before its start, the first at or after its end, and those
    between (both included); `elapsed` > 0."""

    first: Sample
    last: Sample
    inside: Sequence[Sample]
    elapsed: float  # seconds between first and last
    cores: int  # the cores this process may use: 100 % of the machine


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values present (None: a step that had no figure); None when none has one."""
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def ratio(part: float | None, whole: float | None, scale: float) -> float | None:
    return None if part is None or not whole else scale * part / whole


@dataclass(frozen=True)
class Metric:
    """One reported metric; every reader (WindowStats, StepRow, VariantSummary, the CSVs, results.json and the
    README's results table) enumerates registry.METRICS rather than naming it."""

    name: str  # the field and column name: results.csv, summary.csv, results.json
    header: str  # its column in the README's results table
    unit: str  # "ms", "%", "images per execution"...
    read: Callable[[Window], float | None]  # its value over one step's window
    better: Literal["higher", "lower"]  # which way is better, for a reader that ranks (MA's record types say so too)
    digits: int  # decimals in the README
    order: int  # its place among the results table's metric columns (lower: further left)
    inside: str | None = None  # shown in brackets in this other metric's column instead of a column of its own
    summarise: Callable[[Sequence[float | None]], float | None] = median  # a variant's figure from its chosen steps
