"""The generated Prometheus config, rules and dashboards, checked by Prometheus' own promtool.

promtool comes with Debian's `prometheus` package (apt-get install prometheus). Its build has no
kubernetes_sd, so the config is checked in its file_sd form (same relabelling). Each alert is
unit-tested with `promtool test rules`: it fires on the series it is meant for, stays quiet
otherwise, and its annotations name the region.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from triton_gke.observability.dashboards import DASHBOARD_DIR, dashboards, panel_queries, stale_dashboards
from triton_gke.observability.prometheus_config import (
    meta_label,
    prometheus_config,
    prometheus_config_yaml,
    render_yaml,
)
from triton_gke.observability.rules import alert_names, rules, rules_yaml
from triton_gke.observability.settings import TRITON_PODS, MonitoringError, SloSettings, minutes_duration, validate_slo
from triton_gke.sandbox.prometheus import LocalPod, pod_target_groups, to_file_sd, write_file_sd_targets

REGION = "europe-west4"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing: apt-get install prometheus")
POD = {"region": REGION, "namespace": "triton", "pod": "triton-abc", "node": "gpu-node-1"}
SCRAPED = {**POD, "job": "triton", "instance": "10.0.0.7:8002", "model": "original", "version": "1"}
# Grafana variables, replaced by what Grafana would send.
GRAFANA_VARIABLES = {"$region": REGION, "$model": ".*", "$__rate_interval": "1m", "$__range": "1h"}


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=60)


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


# ---------------------------------------------------------------- config and rules pass promtool


@needs_promtool
def test_prometheus_config_passes_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(rules_yaml(SloSettings(), REGION))
    config = prometheus_config(REGION, "prod", rule_files=[str(tmp_path / "rules.yml")])
    for job in ("triton", "dcgm-exporter", "locust"):
        write_file_sd_targets(tmp_path / "sd", job, [])
    (tmp_path / "prometheus.yml").write_text(render_yaml(to_file_sd(config, tmp_path / "sd")))
    result = promtool("check", "config", tmp_path / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 19 rules found" in result.stdout


@needs_promtool
def test_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(rules_yaml(SloSettings(), REGION))
    result = promtool("check", "rules", tmp_path / "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_config_discovers_pods_and_keeps_only_their_metrics_port() -> None:
    config = yaml.safe_load(prometheus_config_yaml(REGION, "prod", scrape_interval="30s"))
    assert config["global"] == {
        "scrape_interval": "30s",
        "evaluation_interval": "30s",
        "external_labels": {"region": REGION, "stack": "prod"},
    }
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"prometheus", "triton", "dcgm-exporter", "locust"}
    expected = {
        "triton": ("triton", {"app_kubernetes_io_name": "triton"}),
        "dcgm-exporter": ("gpu-metrics", {"app_kubernetes_io_name": "dcgm-exporter"}),
        "locust": ("load", {"app_kubernetes_io_name": "locust", "app_kubernetes_io_component": "master"}),
    }
    for job, (namespace, labels) in expected.items():
        (discovery,) = jobs[job]["kubernetes_sd_configs"]
        assert discovery["role"] == "pod" and discovery["namespaces"] == {"names": [namespace]}
        keeps = {r["source_labels"][0]: r["regex"] for r in jobs[job]["relabel_configs"] if r.get("action") == "keep"}
        assert keeps.pop("__meta_kubernetes_pod_container_port_name") == "metrics"
        assert keeps.pop("__meta_kubernetes_namespace") == namespace
        assert keeps == {f"__meta_kubernetes_pod_label_{k}": v for k, v in labels.items()}
        copied = {
            r["target_label"]: r.get("source_labels", [r.get("replacement")])[0]
            for r in jobs[job]["relabel_configs"]
            if "target_label" in r
        }
        assert copied == {
            "namespace": "__meta_kubernetes_namespace",
            "pod": "__meta_kubernetes_pod_name",
            "node": "__meta_kubernetes_pod_node_name",
            "region": REGION,
        }


def test_file_sd_swap_keeps_relabelling_and_targets_carry_pod_labels(tmp_path: Path) -> None:
    config = prometheus_config(REGION, "dev")
    swapped = to_file_sd(config, tmp_path)
    for original, local in zip(config["scrape_configs"], swapped["scrape_configs"], strict=True):
        assert "kubernetes_sd_configs" not in local
        assert local["relabel_configs"] == original["relabel_configs"]
        if "kubernetes_sd_configs" in original:
            assert local["file_sd_configs"][0]["files"] == [str(tmp_path / f"{original['job_name']}.json")]
    assert "file_sd_configs" not in config["scrape_configs"][1]  # the input is left as it was
    pod = LocalPod("triton-0", "triton", dict(TRITON_PODS.labels), {"http": "127.0.0.1:1", "metrics": "127.0.0.1:2"})
    groups = {g["labels"]["__meta_kubernetes_pod_container_port_name"]: g for g in pod_target_groups(pod)}
    assert groups["metrics"]["targets"] == ["127.0.0.1:2"]
    assert groups["metrics"]["labels"][meta_label("app.kubernetes.io/name")] == "triton"
    assert groups["http"]["labels"]["__meta_kubernetes_pod_container_port_number"] == "1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"region": 'eu"west'}, "region: "),
        ({"stack": ""}, "stack: "),
        ({"scrape_interval": "15"}, "scrape_interval: '15' is not a Prometheus duration"),
    ],
)
def test_config_rejects_bad_arguments_in_one_line(kwargs: dict[str, str], message: str) -> None:
    args = {"region": REGION, "stack": "dev", **kwargs}
    with pytest.raises(MonitoringError, match=re.escape(message)) as err:
        prometheus_config(args.pop("region"), args.pop("stack"), **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("latency_ms", 0, "latency_ms: must be a positive integer, got 0"),
        ("quantile", 0.97, "quantile: 0.97 is not one of Triton's summary quantiles"),
        ("max_failure_ratio", 1.5, "max_failure_ratio: must be between 0 and 1, got 1.5"),
        ("for_minutes", -1, "for_minutes: must be >= 0, got -1"),
        ("gpu_idle_utilisation", "low", "gpu_idle_utilisation: must be a finite number, got 'low'"),
        ("rate_window", "1 minute", "rate_window: '1 minute' is not a Prometheus duration"),
    ],
)
def test_slo_settings_are_validated_with_one_line_naming_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(MonitoringError, match=re.escape(message)) as err:
        validate_slo(SloSettings(**{field: value}))
    assert "\n" not in str(err.value)


def test_slo_quantile_is_one_triton_is_started_with() -> None:
    from triton_gke.k8s.triton import SUMMARY_QUANTILES, triton_server_args

    served = {float(pair.split(":")[0]) for pair in SUMMARY_QUANTILES.split(",")}
    assert SloSettings().quantile in served
    assert set(SloSettings().summary_quantiles) <= served
    args = triton_server_args("gs://bucket/models")
    assert "--metrics-config=summary_latencies=true" in args


def test_for_durations_render_in_minutes_or_seconds() -> None:
    assert [minutes_duration(m) for m in (5, 0.25, 0, 1.5)] == ["5m", "15s", "0s", "90s"]
    alerts = {r["alert"]: r for r in rules(SloSettings(for_minutes=0.5), REGION)["groups"][2]["rules"]}
    assert alerts["TritonLatencySLOBreached"]["for"] == "30s"


# ---------------------------------------------------------------- each alert, unit-tested by promtool

SLO = SloSettings()
LATENCY = 'triton:request_latency_ms:quantile{quantile="0.95"}'


def _summary(p95_ms: float, p99_ms: float = 0) -> list[dict[str, str]]:
    return [
        series("nv_inference_request_summary_us", f"{p95_ms * 1000:g}x40", **SCRAPED, quantile="0.95"),
        series("nv_inference_request_summary_us", f"{(p99_ms or p95_ms) * 1000:g}x40", **SCRAPED, quantile="0.99"),
    ]


def _requests(success_per_s: float, failures_per_s: float) -> list[dict[str, str]]:
    # 15 s between samples: a counter growing by 15 * rate per sample.
    return [
        series("nv_inference_request_success", f"0+{success_per_s * 15:g}x40", **SCRAPED),
        series("nv_inference_request_failure", f"0+{failures_per_s * 15:g}x40", **SCRAPED, reason="BACKEND"),
    ]


def _gpu_and_queue(utilisation_percent: float, queue_ms: float) -> list[dict[str, str]]:
    dcgm = {"region": REGION, "namespace": "gpu-metrics", "pod": "dcgm-x", "node": "gpu-node-1", "job": "dcgm-exporter"}
    return [
        series("DCGM_FI_DEV_GPU_UTIL", f"{utilisation_percent:g}x60", **dcgm, gpu="0", instance="10.0.0.9:9400"),
        series("nv_inference_request_success", "0+150x60", **SCRAPED),  # 10 requests/s
        series("nv_inference_queue_duration_us", f"0+{queue_ms * 1000 * 150:g}x60", **SCRAPED),
    ]


def _fired(labels: dict[str, str], summary: str, description: str, severity: str = "critical") -> dict[str, Any]:
    """An expected alert: promtool compares every label and annotation exactly."""
    return {
        "exp_labels": {"severity": severity, **labels},
        "exp_annotations": {
            "severity": severity,
            "summary": f"[{REGION}] {summary}",
            "description": f"{description} (region {REGION}).",
        },
    }


UP = {k: SCRAPED[k] for k in ("job", "instance", *POD)}
ON_POD = "model original on pod triton-abc"

# alert -> (case, input series, eval time, expected alerts): firing cases first, then quiet ones.
ALERT_CASES: dict[str, list[tuple[str, list[dict[str, str]], str, list[dict[str, Any]]]]] = {
    "TritonLatencySLOBreached": [
        (
            "p95 over the SLO for longer than 5m",
            _summary(150) + _requests(10, 0),
            "6m",
            [
                _fired(
                    {**POD, "model": "original", "quantile": "0.95"},
                    "Triton p95 latency above the 100 ms SLO",
                    f"p95 request latency of {ON_POD} is 150 ms, over the 100 ms objective for 5m",
                )
            ],
        ),
        ("p95 over the SLO, not yet for 5m", _summary(150) + _requests(10, 0), "4m", []),
        ("p95 over the SLO on a model that gets no requests", _summary(150) + _requests(0, 0), "6m", []),
        ("p95 over the SLO, no request counter at all", _summary(150), "6m", []),
        ("p95 within the SLO", _summary(80), "6m", []),
        ("only p99 over the SLO", _summary(80, p99_ms=400), "6m", []),
    ],
    "TritonFailureRatioHigh": [
        (
            "5% of requests fail",
            _requests(9.5, 0.5),
            "7m",
            [
                _fired(
                    {**POD, "model": "original"},
                    "Triton requests failing",
                    f"5% of the requests to {ON_POD} fail (allowed: 1.00%)",
                )
            ],
        ),
        ("0.5% of requests fail", _requests(9.95, 0.05), "7m", []),
        ("no traffic at all", _requests(0, 0), "7m", []),
    ],
    "TritonTargetDown": [
        (
            "a Triton target unreachable for 3m",
            [series("up", "0x20", **UP)],
            "3m",
            [
                _fired(
                    UP,
                    "Triton metrics endpoint down",
                    "Prometheus cannot scrape Triton pod triton-abc on node gpu-node-1: "
                    "the server is down, hung or restarting",
                )
            ],
        ),
        ("a Triton target answering", [series("up", "1x20", **UP)], "3m", []),
        ("Prometheus itself down is not Triton", [series("up", "0x20", job="prometheus", instance="x")], "3m", []),
    ],
    "TritonAbsent": [
        (
            "no Triton pod discovered",
            [series("up", "1x20", job="prometheus", instance="localhost:9090", region=REGION)],
            "3m",
            [
                _fired(
                    {"job": "triton", "region": REGION},
                    "No Triton pod discovered",
                    "Prometheus discovers no Triton pod with a metrics port: nothing serves inference",
                )
            ],
        ),
        ("a Triton pod discovered", [series("up", "1x20", **UP)], "3m", []),
    ],
    "GpuIdleWhileRequestsQueue": [
        (
            "GPU 10% busy while requests queue 100 ms",
            _gpu_and_queue(10, 100),
            "12m",
            [
                _fired(
                    {"region": REGION, "node": "gpu-node-1"},
                    "GPU idle while Triton requests queue",
                    "The GPU of node gpu-node-1 is only 10% busy while requests wait over 50 ms in Triton's queue: "
                    "the bottleneck is elsewhere (CPU, model instance count, batching settings)",
                    severity="warning",
                )
            ],
        ),
        ("GPU idle, queue short", _gpu_and_queue(10, 5), "12m", []),
        ("GPU busy, queue long", _gpu_and_queue(80, 100), "12m", []),
        ("GPU idle, requests queue, but not yet for 10m", _gpu_and_queue(10, 100), "8m", []),
    ],
}


def _unit_test_file(rules_file: Path, alert: str) -> dict[str, Any]:
    tests = []
    for name, input_series, eval_time, expected in ALERT_CASES[alert]:
        tests.append(
            {
                "name": name,
                "interval": "15s",
                "input_series": input_series,
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": expected}],
            }
        )
    return {"rule_files": [str(rules_file)], "evaluation_interval": "15s", "tests": tests}


def test_every_alert_has_unit_tests() -> None:
    assert set(ALERT_CASES) == set(alert_names())
    for cases in ALERT_CASES.values():
        assert cases[0][3] and any(not expected for *_, expected in cases)  # fires, and stays quiet


@needs_promtool
@pytest.mark.parametrize("alert", sorted(ALERT_CASES))
def test_alert_fires_on_its_series_and_stays_quiet_otherwise(tmp_path: Path, alert: str) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(rules_yaml(SLO, REGION))
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(_unit_test_file(rules_file, alert), sort_keys=False))
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_severity_summary_and_description_naming_the_region() -> None:
    for group in rules(SLO, REGION)["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            assert rule["labels"]["severity"] in ("critical", "warning")
            assert set(rule["annotations"]) == {"severity", "summary", "description"}
            assert REGION in rule["annotations"]["summary"] and REGION in rule["annotations"]["description"]


def test_queue_time_is_a_ratio_of_rates_never_the_cumulative_counter() -> None:
    recording = {r["record"]: r["expr"] for r in rules(SLO, REGION)["groups"][0]["rules"]}
    queue = recording["triton:queue_ms_per_request:rate1m"]
    assert "rate(nv_inference_queue_duration_us[1m])" in queue
    assert "rate(nv_inference_request_success[1m])" in queue
    assert re.sub(r"rate\([^)]*\)", "", queue).count("nv_inference_queue_duration_us") == 0


# ---------------------------------------------------------------- dashboards


def grafana_to_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


def _variable_selectors(board: dict[str, Any]) -> list[str]:
    """The series selector inside each label_values(selector, label) variable query."""
    queries = [v.get("query", "") for v in board["templating"]["list"] if v["type"] == "query"]
    return [m.group(1) for q in queries if (m := re.fullmatch(r"label_values\((.+), *\w+\)", q))]


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    exprs = [expr for board in dashboards().values() for _, expr in panel_queries(board)]
    exprs += [sel for board in dashboards().values() for sel in _variable_selectors(board)]
    wrapped = [{"record": f"dashboard:query_{i}", "expr": grafana_to_promql(e)} for i, e in enumerate(exprs)]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": wrapped}]}))
    result = promtool("check", "rules", tmp_path / "queries.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_committed_dashboards_equal_what_the_code_generates() -> None:
    assert stale_dashboards(DASHBOARD_DIR) == [], "run `triton-gke dashboards` and commit dashboards/"


def test_dashboards_have_titles_panels_and_variables() -> None:
    boards = dashboards()
    titles = {name: board["title"] for name, board in boards.items()}
    assert titles == {
        "triton-inference.json": "Triton inference service",
        "triton-gpus.json": "Triton GPUs",
        "triton-load-test.json": "Triton load test",
    }
    for board in boards.values():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        assert variables["region"]["query"] == "label_values(up, region)"
        ids = [panel["id"] for panel in board["panels"]]
        assert len(ids) == len(set(ids)) and board["uid"]
        for panel in board["panels"]:
            assert panel["title"] and panel["description"] and panel["targets"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert all('region="$region"' in target["expr"] for target in panel["targets"])
        _assert_no_overlap([panel["gridPos"] for panel in board["panels"]])
    inference = [panel["title"] for panel in boards["triton-inference.json"]["panels"]]
    for wanted in (
        "Requests per second",
        "p95 latency vs SLO",
        "Queue vs compute time per request",
        "Achieved batch size",
        "Share of requests per pod",
        "Failed requests per second",
    ):
        assert wanted in inference


def _assert_no_overlap(positions: list[dict[str, int]]) -> None:
    cells = set()
    for pos in positions:
        assert pos["x"] + pos["w"] <= 24
        area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & area, f"panels overlap at {pos}"
        cells |= area


def _threshold_lines(board: dict[str, Any]) -> dict[str, list[float]]:
    lines = {}
    for panel in board["panels"]:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        if panel["fieldConfig"]["defaults"].get("custom", {}).get("thresholdsStyle", {}).get("mode", "off") != "off":
            lines[panel["title"]] = [s["value"] for s in steps if s["value"] is not None]
    return lines


@pytest.mark.parametrize("latency_ms", [100, 250])
def test_slo_threshold_line_is_the_slo_latency(latency_ms: int) -> None:
    boards = dashboards(SloSettings(latency_ms=latency_ms))
    assert _threshold_lines(boards["triton-inference.json"])["p95 latency vs SLO"] == [latency_ms]
    assert _threshold_lines(boards["triton-load-test.json"])["Response time p50 / p95 (client side)"] == [latency_ms]
    assert _threshold_lines(boards["triton-inference.json"])["Failure ratio"] == [SloSettings().max_failure_ratio]
