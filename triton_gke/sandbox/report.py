"""The sandbox's report: Locust's final statistics for what clients saw, Prometheus (the generated recording rules and
alerts) for what Triton did. Printed as a few lines and saved as JSON with the raw query results.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import parse_json, read_text_file
from triton_gke.observability.rules import quantile_label, recorded
from triton_gke.observability.settings import SloSettings
from triton_gke.sandbox.prometheus import LocalPrometheus, PrometheusError

MAX_LOCUST_JSON_BYTES = 64 << 20  # Locust's stats of one run: a few KiB per request name

WEIGHTS_NOTE = "the model has random weights: latency and throughput are real, its predictions are meaningless"


class ReportError(RuntimeError):
    """The load test left no usable results (one line)."""


@dataclass
class Report:
    """Everything report.json holds; `summary` is what the text report shows."""

    summary: dict[str, Any]
    queries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {**self.summary, "note": WEIGHTS_NOTE, "prometheus_queries": self.queries}


# ---------------------------------------------------------------- Locust


def locust_results(prefix: Path, duration_s: float) -> dict[str, float | int | None]:
    """The whole run as Locust counted it at exit: requests, failures, RPS and latency percentiles (ms).

    From `--json-file prefix` ({prefix}.json), which Locust writes in shutdown() after runner.quit() (locust
    2.47 main.py; stats.py save_stats_json: one StatsEntryDict per request name). Not from the _stats.csv:
    a greenlet rewrites it once a second and nothing writes it at exit, so it misses the last second.
    RPS is over the load's `duration_s`, as Locust's own (requests / time since the test's start, stats.py
    total_rps): the file holds only each request name's first request time."""
    path = Path(f"{prefix}.json")
    if not os.path.lexists(path):
        raise ReportError(f"Locust wrote no statistics ({path}): no such file")
    text = read_text_file(path, MAX_LOCUST_JSON_BYTES, "Locust's statistics (a JSON file)", ReportError)
    entries = parse_json(text, path, ReportError)
    try:
        requests, failures, timed, histogram, total_ms = _merge_entries(entries)
        average_ms = _finite_number(total_ms / timed) if timed else None
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError, RecursionError):
        raise ReportError(f"{path}: not Locust's statistics (a list of entries with num_requests)") from None
    return {
        "requests": requests,
        "failures": failures,
        "rps": requests / duration_s if duration_s > 0 else None,
        "p50_ms": _percentile(histogram, timed, 0.5),
        "p95_ms": _percentile(histogram, timed, 0.95),
        "average_ms": average_ms,
    }


def _merge_entries(entries: list[dict[str, Any]]) -> tuple[int, int, int, dict[float, int], float]:
    """Sums over the request names (Locust's own Aggregated row is the same sum, stats.py RequestStats.total)."""
    if not isinstance(entries, list):
        raise TypeError(entries)
    requests = failures = timed = 0
    histogram: dict[float, int] = {}
    total_ms = 0.0
    for entry in entries:
        requests += _count(entry["num_requests"])
        failures += _count(entry["num_failures"])
        timed += _count(entry["num_requests"]) - _count(entry.get("num_none_requests", 0))
        total_ms += _finite_number(entry["total_response_time"])
        for ms, count in entry["response_times"].items():  # JSON keys: response times in ms, rounded by Locust
            histogram[_finite_number(ms)] = histogram.get(_finite_number(ms), 0) + _count(count)
    if timed < 0 or failures > requests:
        raise ValueError("more requests without a time, or failed, than requests")
    return requests, failures, timed, histogram, total_ms


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(value)
    return value


def _finite_number(value: Any) -> float:
    number = float(value)  # JSON numbers, or response-time keys (strings)
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise ValueError(value)
    return number


def _percentile(histogram: Mapping[float, int], count: int, percent: float) -> float | None:
    """Locust's own rule (stats.py calculate_response_time_percentile): the response time that all but
    int(count x percent) of the requests finished within, walking down from the slowest."""
    if not count or not histogram:
        return None
    allowed, seen = int(count * percent), 0
    for ms in sorted(histogram, reverse=True):
        seen += histogram[ms]
        if count - seen <= allowed:
            return ms
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None  # Locust writes N/A where it has no sample
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- Prometheus


def report_queries(model: str, slo: SloSettings, window_s: int) -> dict[str, str]:
    """Named PromQL: the stack's recording rules for the load-tested model, alerts, targets.

    Locust's series go stale once it exits, so its figures (and `up`) are read over the run's window.
    """
    selector = f'model="{model}"'
    quantile = f'quantile="{quantile_label(slo.quantile)}"'
    return {
        "triton_requests_per_second": f"{recorded('triton:requests_per_second', slo)}{{{selector}}}",
        "batch_size": f"{recorded('triton:batch_size', slo)}{{{selector}}}",
        "queue_ms_per_request": f"{recorded('triton:queue_ms_per_request', slo)}{{{selector}}}",
        "compute_ms_per_request": f"{recorded('triton:compute_ms_per_request', slo)}{{{selector}}}",
        "latency_ms_per_request": f"{recorded('triton:request_latency_ms', slo)}{{{selector}}}",
        "latency_quantile_ms": f"triton:request_latency_ms:quantile{{{quantile},{selector}}}",
        "alerts": "ALERTS",
        "targets_up": f"max by (job) (max_over_time(up[{window_s}s]))",
        "locust_users": f"max(max_over_time(locust_users[{window_s}s]))",
        "locust_requests": f"sum(max_over_time(locust_requests_total[{window_s}s]))",
    }


def run_queries(prometheus: LocalPrometheus, queries: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    results = {}
    for name, expr in queries.items():
        try:
            results[name] = {"query": expr, "result": prometheus.query(expr)}
        except PrometheusError as err:
            results[name] = {"query": expr, "error": str(err)}
    return results


def scalar(prometheus: LocalPrometheus, expr: str) -> float | None:
    """The first sample of an instant query; None when it has none or Prometheus refuses it."""
    try:
        samples = prometheus.query(expr)
    except PrometheusError:
        return None
    return _number(samples[0]["value"][1]) if samples else None


def first_value(results: Mapping[str, dict[str, Any]], name: str) -> float | None:
    samples = results.get(name, {}).get("result") or []
    return _number(samples[0]["value"][1]) if samples else None


def alerts(results: Mapping[str, dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {"firing": [], "pending": []}
    for sample in results.get("alerts", {}).get("result") or []:
        labels = {k: v for k, v in sample["metric"].items() if k != "__name__"}
        found.setdefault(labels.get("alertstate", "firing"), []).append(labels)
    return found


def targets(results: Mapping[str, dict[str, Any]]) -> dict[str, bool]:
    """Per scrape job: whether Prometheus scraped it successfully at least once during the run."""
    samples = results.get("targets_up", {}).get("result") or []
    return {s["metric"].get("job", "?"): _number(s["value"][1]) == 1 for s in samples}


def triton_summary(results: Mapping[str, dict[str, Any]], slo: SloSettings) -> dict[str, Any]:
    # Averages over the rules' rate window: ratios of rates, so idle time in the window does not dilute them.
    names = ("batch_size", "queue_ms_per_request", "compute_ms_per_request", "latency_ms_per_request")
    summary: dict[str, Any] = {name: first_value(results, name) for name in names}
    summary["latency_quantile"] = slo.quantile
    summary["latency_quantile_ms"] = first_value(results, "latency_quantile_ms")
    return summary


# ---------------------------------------------------------------- text and files


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def _alert_list(found: list[dict[str, str]]) -> str:
    """'Name (model, model), Other': one entry per alert, with the models it concerns."""
    models: dict[str, set[str]] = {}
    for alert in found:
        models.setdefault(alert.get("alertname", "?"), set()).update([alert["model"]] if "model" in alert else [])
    entries = [f"{name} ({', '.join(sorted(m))})" if m else name for name, m in sorted(models.items())]
    return ", ".join(entries) or "none"


def render(report: Report) -> str:
    s = report.summary
    load, triton, slo = s["locust"], s["triton"], s["slo"]
    batch = triton["batch_size"]
    percentile = f"p{round(triton['latency_quantile'] * 100, 1):g}"
    scraped = ", ".join(f"{job} {'up' if up else 'DOWN'}" for job, up in sorted(s["targets"].items())) or "none"
    lines = [
        f"sandbox report: stack {s['stack']}, model {s['model']} over {s['protocol']} ({s['payload']}), "
        f"Poisson arrivals at {s['users']} users x {s['rps_per_user']} req/s "
        f"({s['users'] * s['rps_per_user']:g} req/s, open loop), {s['duration_s']} s",
        f"  Locust       {_rate(load['rps'])} req/s, p50 {_ms(load['p50_ms'])}, p95 {_ms(load['p95_ms'])}, "
        f"{load['failures']} failures of {load['requests']} requests",
        f"  Triton       batch size {'n/a' if batch is None else f'{batch:.2f}'} per execution; per request "
        f"queue {_ms(triton['queue_ms_per_request'])}, compute {_ms(triton['compute_ms_per_request'])}; "
        f"{percentile} {_ms(triton['latency_quantile_ms'])} (its summary)",
        f"  Alerts       firing: {_alert_list(s['alerts']['firing'])}; pending: {_alert_list(s['alerts']['pending'])} "
        f"(SLO {percentile} < {slo['latency_ms']} ms; alerts fire after {slo['for_minutes']:g} min)",
        f"  Scraped      {scraped}",
        f"  Note         {WEIGHTS_NOTE}",
        f"  Data         {s['out_dir']}/: {', '.join(s['files'])}",
    ]
    return "\n".join(lines)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _finite(value: Any) -> Any:
    """NaN and infinities as null: report.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(_finite(report.as_json()), indent=2, allow_nan=False) + "\n", encoding="utf-8")
