"""The generated monitoring against real software: tritonserver, Prometheus and Locust on 127.0.0.1.

Prometheus runs the generated prometheus.yml (kubernetes_sd swapped for file_sd targets with a
pod's labels) and the generated rules; Triton serves CPU twins with random weights (these tests
check monitoring, not accuracy). No GPU here, so no DCGM exporter: the GPU panels' queries are
only shown to be accepted by Prometheus, with nothing to return.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import tritonclient.http as httpclient

from triton_gke.model_repo.cpu_twin import DELAY_PARAMETER
from triton_gke.observability.dashboards import dashboards, panel_queries
from triton_gke.observability.rules import quantile_label

if TYPE_CHECKING:  # imported by pytest_plugins; importing it here first would skip its assert rewriting
    from tests.support.monitoring_fixtures import LiveStack

pytest_plugins = ("tests.support.monitoring_fixtures",)


T = TypeVar("T")


GPU_METRICS = ("DCGM_FI_", "node:gpu_")
# Every wait below returns as soon as what it waits for holds; this deadline only ends a stack that will never get
# there. Not a budget: Locust's start alone (its imports) took over 30 s on 2 cores at a load of 6-7.
HANG_S = 300


def eventually(
    check: Callable[[], T], timeout_s: float, interval_s: float = 1.0, until: Callable[[T], bool] = bool
) -> T:
    """Poll check() until until(value) holds (by default: a truthy value); return the last value at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if until(value) or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


def grafana_to_promql(expr: str, region: str) -> str:
    values = {"$region": region, "$model": ".*", "$__rate_interval": "1m", "$__range": "1h"}
    for variable, value in values.items():
        expr = expr.replace(variable, value)
    return expr


def dashboard_queries(gpu: bool) -> list[tuple[str, str]]:
    queries = [(title, expr) for board in dashboards().values() for title, expr in panel_queries(board)]
    return [(title, expr) for title, expr in queries if any(m in expr for m in GPU_METRICS) == gpu]


def _active(stack: LiveStack, job: str) -> list[dict[str, Any]]:
    return [t for t in stack.prometheus.targets()["activeTargets"] if t["labels"].get("job") == job]


def test_relabelling_scrapes_only_the_metrics_ports(live_stack: LiveStack) -> None:
    triton, prometheus = live_stack.triton, live_stack.prometheus
    healthy = eventually(lambda: [t for t in _active(live_stack, "triton") if t["health"] == "up"], HANG_S)
    assert healthy, prometheus.targets()
    (target,) = _active(live_stack, "triton")
    assert target["scrapeUrl"] == f"http://127.0.0.1:{triton.metrics_port}/metrics"
    labels = target["labels"]
    assert {k: labels[k] for k in ("namespace", "pod", "node", "region")} == {
        "namespace": "triton",
        "pod": "triton-local-0",
        "node": "local-node-0",
        "region": live_stack.region,
    }
    dropped = {t["discoveredLabels"]["__address__"] for t in prometheus.targets()["droppedTargets"]}
    assert {triton.http_url, triton.grpc_url} <= dropped
    # Both Locusts up: each starts on its own (its imports take seconds on busy cores), so one can be up alone.
    pods = {"locust-master-normal", "locust-master-slow"}

    def locusts_up() -> set[str]:
        return {t["labels"]["pod"] for t in _active(live_stack, "locust") if t["health"] == "up"}

    assert eventually(locusts_up, HANG_S, until=pods.__eq__) == pods, prometheus.targets()
    web_ports = {pod.ports["web"] for key, pod in live_stack.pods.items() if key.startswith("locust")}
    assert web_ports <= dropped


def test_every_triton_and_locust_dashboard_query_returns_data(live_stack: LiveStack) -> None:
    prometheus = live_stack.prometheus
    queries = dashboard_queries(gpu=False)

    def empty() -> list[str]:
        return [f"{t}: {e}" for t, e in queries if not prometheus.query(grafana_to_promql(e, live_stack.region))]

    assert eventually(lambda: not empty(), HANG_S, interval_s=2), f"queries without data: {empty()}"
    assert live_stack.region in prometheus.api("label/region/values")
    models = {s["model"] for s in prometheus.api("series", **{"match[]": "nv_inference_request_success"})}
    assert models == {live_stack.normal_model, live_stack.slow_model}


def test_gpu_queries_are_accepted_and_empty_without_a_gpu(live_stack: LiveStack) -> None:
    queries = dashboard_queries(gpu=True)
    assert len(queries) == 5
    for _, expr in queries:
        # query() raises PrometheusError on a query Prometheus rejects; no DCGM exporter here.
        assert live_stack.prometheus.query(grafana_to_promql(expr, live_stack.region)) == []


def test_slo_alert_fires_for_the_slow_model_and_not_for_the_normal_one(live_stack: LiveStack) -> None:
    prometheus, slo = live_stack.prometheus, live_stack.slo

    def slow_firing() -> list[dict[str, str]]:
        return [a for a in prometheus.firing("TritonLatencySLOBreached") if a["model"] == live_stack.slow_model]

    firing = eventually(slow_firing, HANG_S)
    assert firing, f"no firing SLO alert; p95 now: {prometheus.query('triton:request_latency_ms:quantile')}"
    assert firing[0]["region"] == live_stack.region and firing[0]["severity"] == "critical"
    assert firing[0]["pod"] == "triton-local-0"
    p95 = f'triton:request_latency_ms:quantile{{quantile="{quantile_label(slo.quantile)}"}}'
    normal = prometheus.query(f'{p95[:-1]}, model="{live_stack.normal_model}"}}')
    assert normal and float(normal[0]["value"][1]) < slo.latency_ms  # measured, and within the SLO
    assert prometheus.query(f'ALERTS{{alertname="TritonLatencySLOBreached", model="{live_stack.normal_model}"}}') == []
    alerts = prometheus.api("alerts")["alerts"]
    slow_alert = next(a for a in alerts if a["labels"].get("model") == live_stack.slow_model)
    assert live_stack.region in slow_alert["annotations"]["description"]
    assert f"over the {slo.latency_ms} ms objective" in slow_alert["annotations"]["description"]


def test_the_slow_twin_is_a_delayed_copy_and_the_original_is_untouched(live_stack: LiveStack) -> None:
    client = httpclient.InferenceServerClient(live_stack.triton.http_url)
    slow = client.get_model_config(live_stack.slow_model)
    assert slow["parameters"][DELAY_PARAMETER]["string_value"] == "4000"  # INJECTED_DELAY_MS
    assert slow["dynamic_batching"] == client.get_model_config(live_stack.normal_model)["dynamic_batching"]
    assert DELAY_PARAMETER not in client.get_model_config(live_stack.normal_model).get("parameters", {})
    assert DELAY_PARAMETER not in (live_stack.repository / live_stack.normal_model / "config.pbtxt").read_text()
