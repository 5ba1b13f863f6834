"""Grafana dashboards, built with grafana-foundation-sdk's typed builders and written as JSON.

Three dashboards: the inference service (Triton), its GPUs (DCGM exporter) and the load test
(Locust). Panels read the recording rules of monitoring.rules where one exists, so a dashboard
and an alert always agree on what "p95" or "queue time" means. The Prometheus data source is
chosen by the `datasource` variable (its uid); `region` filters every query.
`triton-gke dashboards` regenerates dashboards/*.json.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from triton_gke.contracts.paths import DASHBOARD_DIR
from triton_gke.observability.rules import quantile_label, recorded
from triton_gke.observability.settings import SloSettings

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
REGION = 'region="$region"'
MODEL = f'{REGION}, model=~"$model"'
TAGS = ["triton", "gke", "generated"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Threshold:
    value: float
    label: str  # what the line is, for the panel description


# ---------------------------------------------------------------- building blocks


def _targets(queries: Sequence[Query]) -> list[prometheus.Dataquery]:
    return [
        prometheus.Dataquery().expr(q.expr).legend_format(q.legend).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)
        for i, q in enumerate(queries)
    ]


def _thresholds(line: Threshold | None) -> dashboard_builders.ThresholdsConfig:
    steps = [model.Threshold(value=None, color="green")]
    if line:
        steps.append(model.Threshold(value=line.value, color="red"))
    return dashboard_builders.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(steps)


def _timeseries(
    panel_id: int,
    title: str,
    description: str,
    unit: str,
    queries: Sequence[Query],
    line: Threshold | None = None,
    stacked: bool = False,
) -> timeseries.Panel:
    if line:
        description = f"{description} Red line: {line.label}."
    style = common.GraphThresholdsStyleMode.DASHED if line else common.GraphThresholdsStyleMode.OFF
    panel = (
        timeseries.Panel()
        .id(panel_id)
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit(unit)
        .min(0)
        .height(8)
        .span(12)
        .thresholds(_thresholds(line))
        .thresholds_style(common_builders.GraphThresholdsStyleConfig().mode(style))
        .legend(common_builders.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST))
    )
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL)).fill_opacity(40)
    return panel


def _stat(panel_id: int, title: str, description: str, unit: str, queries: Sequence[Query]) -> stat.Panel:
    return (
        stat.Panel()
        .id(panel_id)
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit(unit)
        .height(8)
        .span(12)
        .thresholds(_thresholds(None))
    )


def _dashboard(uid: str, title: str, description: str, panels: Sequence[Any], model_variable: bool = False) -> Any:
    builder = (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .with_variable(dashboard_builders.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(_query_variable("region", "Region", "label_values(up, region)"))
    )
    if model_variable:
        variable = _query_variable("model", "Model", f"label_values(nv_inference_request_success{{{REGION}}}, model)")
        builder = builder.with_variable(variable.multi(True).include_all(True).all_value(".*"))
    for panel in panels:
        builder = builder.with_panel(panel)
    return builder.build()


def _query_variable(name: str, label: str, query: str) -> dashboard_builders.QueryVariable:
    return (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
    )


# ---------------------------------------------------------------- the dashboards


def inference_dashboard(slo: SloSettings) -> Any:
    percentile = f"p{round(slo.quantile * 100, 1):g}"
    pod = "{{model}} {{pod}}"
    slo_line = Threshold(slo.latency_ms, f"the {slo.latency_ms} ms SLO")
    failure_line = Threshold(slo.max_failure_ratio, f"the {slo.max_failure_ratio:.2%} failure budget")
    quantile = quantile_label(slo.quantile)
    panels = [
        _timeseries(
            1,
            "Requests per second",
            "Successful inference requests per second, all pods.",
            "reqps",
            [Query(f"sum by (model) ({recorded('model:triton_requests_per_second', slo)}{{{MODEL}}})", "{{model}}")],
        ),
        _timeseries(
            2,
            f"{percentile} latency vs SLO",
            f"Triton's own {percentile} request latency per pod (summary over a sliding window).",
            "ms",
            [Query(f'triton:request_latency_ms:quantile{{{MODEL}, quantile="{quantile}"}}', pod)],
            line=slo_line,
        ),
        _timeseries(
            3,
            "Average request latency",
            "Time from request arrival to response in Triton, averaged per request.",
            "ms",
            [Query(f"{recorded('triton:request_latency_ms', slo)}{{{MODEL}}}", pod)],
        ),
        _timeseries(
            4,
            "Queue vs compute time per request",
            "Average time a request waits in the queue (dynamic batcher, busy instances) and spends in "
            "the model (input + infer + output).",
            "ms",
            [
                Query(f"{recorded('triton:queue_ms_per_request', slo)}{{{MODEL}}}", "queue " + pod),
                Query(f"{recorded('triton:compute_ms_per_request', slo)}{{{MODEL}}}", "compute " + pod),
            ],
        ),
        _timeseries(
            5,
            "Achieved batch size",
            "Inferences per model execution: how many requests the dynamic batcher merged.",
            "none",
            [Query(f"{recorded('triton:batch_size', slo)}{{{MODEL}}}", pod)],
        ),
        _timeseries(
            6,
            "Share of requests per pod",
            "Each pod's share of a model's requests: uneven shares mean sticky connections (gRPC, keep-alive).",
            "percentunit",
            [Query(f"{recorded('triton:request_share', slo)}{{{MODEL}}}", pod)],
            stacked=True,
        ),
        _timeseries(
            7,
            "Failed requests per second",
            "Failed inference requests by reason.",
            "reqps",
            [
                Query(
                    f"sum by (model, reason) (rate(nv_inference_request_failure{{{MODEL}}}[$__rate_interval]))",
                    "{{model}} {{reason}}",
                )
            ],
        ),
        _timeseries(
            8,
            "Failure ratio",
            "Failed / all requests per pod.",
            "percentunit",
            [Query(f"{recorded('triton:failure_ratio', slo)}{{{MODEL}}}", pod)],
            line=failure_line,
        ),
        _timeseries(
            9,
            "Pending requests",
            "Requests waiting for execution right now.",
            "none",
            [Query(f"sum by (model, pod) (nv_inference_pending_request_count{{{MODEL}}})", pod)],
        ),
    ]
    return _dashboard(
        "triton-inference",
        "Triton inference service",
        f"Throughput, latency against the {slo.latency_ms} ms {percentile} objective, batching and failures.",
        panels,
        model_variable=True,
    )


def gpu_dashboard(slo: SloSettings) -> Any:
    node = "{{node}}"
    idle_line = Threshold(slo.gpu_idle_utilisation, f"{slo.gpu_idle_utilisation:.0%}: below counts as idle")
    panels = [
        _timeseries(
            1,
            "GPU utilisation per node",
            "Fraction of time the GPU was busy (DCGM_FI_DEV_GPU_UTIL), averaged over a node's GPUs.",
            "percentunit",
            [Query(f"node:gpu_utilisation:avg{{{REGION}}}", node)],
            line=idle_line,
        ),
        _timeseries(
            2,
            "GPU utilisation per GPU",
            "DCGM_FI_DEV_GPU_UTIL of every GPU.",
            "percent",
            [Query(f"DCGM_FI_DEV_GPU_UTIL{{{REGION}}}", "{{node}} GPU {{gpu}}")],
        ),
        _timeseries(
            3,
            "GPU memory used per node",
            "Frame buffer in use (DCGM_FI_DEV_FB_USED).",
            "bytes",
            [Query(f"node:gpu_memory_used_bytes:sum{{{REGION}}}", node)],
        ),
        _timeseries(
            4,
            "GPU memory used (fraction)",
            "Frame buffer used / (used + free).",
            "percentunit",
            [Query(f"node:gpu_memory_used:ratio{{{REGION}}}", node)],
        ),
        _timeseries(
            5,
            "GPU power per node",
            "Power draw (DCGM_FI_DEV_POWER_USAGE).",
            "watt",
            [Query(f"node:gpu_power_watts:sum{{{REGION}}}", node)],
        ),
    ]
    return _dashboard("triton-gpus", "Triton GPUs", "GPU utilisation, memory and power per node (DCGM).", panels)


def load_test_dashboard(slo: SloSettings) -> Any:
    name = "{{name}}"
    slo_line = Threshold(slo.latency_ms, f"the {slo.latency_ms} ms SLO")
    panels = [
        _timeseries(
            1, "Simulated users", "Locust users running.", "none", [Query(f"sum(locust_users{{{REGION}}})", "users")]
        ),
        _timeseries(
            2,
            "Requests per second (client side)",
            "Requests Locust completed per second, per model.",
            "reqps",
            [Query(f"sum by (name) (locust_requests_per_second{{{REGION}}})", name)],
        ),
        _timeseries(
            3,
            "Failures per second (client side)",
            "Requests Locust saw fail per second, per model.",
            "reqps",
            [Query(f"sum by (name) (locust_failures_per_second{{{REGION}}})", name)],
        ),
        _timeseries(
            4,
            "Response time p50 / p95 (client side)",
            "Locust's response-time percentiles over its last ~10 s, network included.",
            "ms",
            [
                Query(f"max by (name) (locust_response_time_p50_ms{{{REGION}}})", "p50 " + name),
                Query(f"max by (name) (locust_response_time_p95_ms{{{REGION}}})", "p95 " + name),
            ],
            line=slo_line,
        ),
        _stat(
            5,
            "Requests and failures in the time range",
            "Requests sent and requests failed, per the Locust master's counters.",
            "short",
            [
                Query(f"sum(increase(locust_requests_total{{{REGION}}}[$__range]))", "requests"),
                Query(f"sum(increase(locust_failures_total{{{REGION}}}[$__range]))", "failures"),
            ],
        ),
    ]
    return _dashboard(
        "triton-load-test", "Triton load test", "Locust's view: users, throughput, failures, latency.", panels
    )


# ---------------------------------------------------------------- JSON


def dashboards(slo: SloSettings | None = None) -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON (as a dict), for the given SLO (default: SloSettings())."""
    slo = slo or SloSettings()
    built = {
        "triton-inference.json": inference_dashboard(slo),
        "triton-gpus.json": gpu_dashboard(slo),
        "triton-load-test.json": load_test_dashboard(slo),
    }
    return {name: json.loads(json.dumps(board, cls=JSONEncoder)) for name, board in built.items()}


def dashboard_text(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def write_dashboards(out_dir: Path = DASHBOARD_DIR, slo: SloSettings | None = None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, board in dashboards(slo).items():
        path = out_dir / name
        path.write_text(dashboard_text(board), encoding="utf-8")
        paths.append(path)
    return paths


def stale_dashboards(out_dir: Path = DASHBOARD_DIR, slo: SloSettings | None = None) -> list[str]:
    """Names of dashboard files that are missing or differ from what the code generates."""
    stale = []
    for name, board in dashboards(slo).items():
        path = out_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != dashboard_text(board):
            stale.append(name)
    return stale


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL expression) of every query in a dashboard's JSON."""
    return [
        (panel["title"], target["expr"]) for panel in board.get("panels", []) for target in panel.get("targets", [])
    ]
