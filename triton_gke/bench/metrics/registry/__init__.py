"""The bench's reported metrics, one module each (Model Analyzer's model_analyzer/record/types/ is the model).

Every reader enumerates METRICS: WindowStats and window_stats (bench/metrics/probes.py), StepRow and VariantSummary
(bench/plans/results.py, hence results.csv, summary.csv and results.json), the runner's step rows and summaries, and
the README's results table (bench/reports/report.py). A new metric is a module here with a METRIC and one line in
MODULES.

An explicit list rather than pkgutil's walk of the package: the list's order is the order of the metric columns in
results.csv and summary.csv and of the keys in results.json, which committed runs must keep (pkgutil would give the
files' alphabetical order), and every import stays visible to import-linter and the structure drawing.
tests/unit/bench/test_metric_registry.py fails when a module of this package is missing from the list.
"""

from __future__ import annotations

from triton_gke.bench.metrics.registry import batch, gpu_pct, machine_cpu_pct, queue_ms, server_cpu_pct, server_ms
from triton_gke.bench.metrics.registry.base import Metric

# In the order of their columns in results.csv, summary.csv and results.json.
MODULES = (batch, server_ms, queue_ms, server_cpu_pct, machine_cpu_pct, gpu_pct)
METRICS: tuple[Metric, ...] = tuple(module.METRIC for module in MODULES)


def metric(name: str) -> Metric:
    """The registered metric called `name` (a reader that shows one metric on purpose, e.g. the payload table)."""
    return next(m for m in METRICS if m.name == name)
