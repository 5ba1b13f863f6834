"""observability.rules: every alert has unit tests, severity, summary and a description naming the region."""

from __future__ import annotations

import re
from typing import Any

from tests.unit.observability.test_prometheus_config import REGION
from triton_gke.observability.rules import alert_names, rules
from triton_gke.observability.settings import SloSettings, minutes_duration

POD = {"region": REGION, "namespace": "triton", "pod": "triton-abc", "node": "gpu-node-1"}


SCRAPED = {**POD, "job": "triton", "instance": "10.0.0.7:8002", "model": "original", "version": "1"}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def test_for_durations_render_in_minutes_or_seconds() -> None:
    assert [minutes_duration(m) for m in (5, 0.25, 0, 1.5)] == ["5m", "15s", "0s", "90s"]
    alerts = {r["alert"]: r for r in rules(SloSettings(for_minutes=0.5), REGION)["groups"][2]["rules"]}
    assert alerts["TritonLatencySLOBreached"]["for"] == "30s"


# ---------------------------------------------------------------- each alert, unit-tested by promtool
SLO = SloSettings()


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


def test_every_alert_has_unit_tests() -> None:
    assert set(ALERT_CASES) == set(alert_names())
    for cases in ALERT_CASES.values():
        assert cases[0][3] and any(not expected for *_, expected in cases)  # fires, and stays quiet


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
