"""Prometheus recording and alerting rules for Triton, its GPUs and the load test.

Triton's counters are cumulative since the server started, so every per-request figure is a
ratio of rates over the same window: average queue time is rate(queue_duration_us) /
rate(request_success), never the counter itself (triton-inference-server/server#8979).
The latency quantile comes from Triton's summaries (tritonserver
--metrics-config=summary_latencies=true): nv_inference_request_summary_us{quantile="0.95"},
a per-pod sliding window that cannot be aggregated across pods, so the SLO is checked per pod.
DCGM exporter metrics: DCGM_FI_DEV_GPU_UTIL (percent), DCGM_FI_DEV_FB_USED/FREE (MiB),
DCGM_FI_DEV_POWER_USAGE (W).
"""

from __future__ import annotations

from typing import Any

import yaml

from triton_gke.observability.settings import (
    TRITON_PODS,
    SloSettings,
    minutes_duration,
    validate_label_value,
)

TRITON_BY = "region, namespace, pod, node, model"
MODEL_BY = "region, model"
NODE_BY = "region, node"
MIB = 1024 * 1024
# The scrape job of Triton's pods as the Prometheus config names it (prometheus_config.py job_name): `up` carries it.
TRITON_JOB = TRITON_PODS.job


def quantile_label(quantile: float) -> str:
    """The quantile label value as Triton writes it (0.95 -> "0.95")."""
    return repr(float(quantile))


def _rate(metric: str, window: str) -> str:
    return f"sum by ({TRITON_BY}) (rate({metric}[{window}]))"


def recorded(name: str, slo: SloSettings) -> str:
    """Full name of a rate-based recording rule: triton:requests_per_second -> ...:rate1m."""
    return f"{name}:rate{slo.rate_window}"


def triton_recording_rules(slo: SloSettings) -> list[dict[str, str]]:
    w = slo.rate_window
    rps, fps = recorded("triton:requests_per_second", slo), recorded("triton:failures_per_second", slo)
    compute = " + ".join(f"rate(nv_inference_compute_{part}_duration_us[{w}])" for part in ("input", "infer", "output"))

    def per_request_ms(numerator: str) -> str:
        return f"{numerator} / {_rate('nv_inference_request_success', w)} / 1000"

    rules = {
        rps: _rate("nv_inference_request_success", w),
        fps: _rate("nv_inference_request_failure", w),
        recorded("triton:failure_ratio", slo): f"{fps} / ({fps} + {rps})",
        recorded("triton:queue_ms_per_request", slo): per_request_ms(_rate("nv_inference_queue_duration_us", w)),
        recorded("triton:compute_ms_per_request", slo): per_request_ms(f"sum by ({TRITON_BY}) ({compute})"),
        recorded("triton:request_latency_ms", slo): per_request_ms(_rate("nv_inference_request_duration_us", w)),
        recorded("triton:batch_size", slo): (
            f"{_rate('nv_inference_count', w)} / {_rate('nv_inference_exec_count', w)}"
        ),
        # Every configured quantile, in ms; NaN (no sample) while a model got no request lately.
        "triton:request_latency_ms:quantile": (
            f"max by ({TRITON_BY}, quantile) (nv_inference_request_summary_us) / 1000"
        ),
        recorded("model:triton_requests_per_second", slo): f"sum by ({MODEL_BY}) ({rps})",
        recorded("triton:request_share", slo): f"{rps} / on ({MODEL_BY}) group_left sum by ({MODEL_BY}) ({rps})",
    }
    return [{"record": name, "expr": expr} for name, expr in rules.items()]


def gpu_recording_rules() -> list[dict[str, str]]:
    rules = {
        "node:gpu_utilisation:avg": f"avg by ({NODE_BY}) (DCGM_FI_DEV_GPU_UTIL) / 100",
        "node:gpu_memory_used_bytes:sum": f"sum by ({NODE_BY}) (DCGM_FI_DEV_FB_USED) * {MIB}",
        "node:gpu_memory_used:ratio": (
            f"sum by ({NODE_BY}) (DCGM_FI_DEV_FB_USED)"
            f" / (sum by ({NODE_BY}) (DCGM_FI_DEV_FB_USED) + sum by ({NODE_BY}) (DCGM_FI_DEV_FB_FREE))"
        ),
        "node:gpu_power_watts:sum": f"sum by ({NODE_BY}) (DCGM_FI_DEV_POWER_USAGE)",
    }
    return [{"record": name, "expr": expr} for name, expr in rules.items()]


def _alert(
    name: str, expr: str, minutes: float, severity: str, region: str, summary: str, description: str
) -> dict[str, Any]:
    # Region is written into the text: an absent() alert has no series labels to take it from.
    return {
        "alert": name,
        "expr": expr,
        "for": minutes_duration(minutes),
        "labels": {"severity": severity, "region": region},
        "annotations": {
            "severity": severity,
            "summary": f"[{region}] {summary}",
            "description": f"{description} (region {region}).",
        },
    }


def alerting_rules(slo: SloSettings, region: str) -> list[dict[str, Any]]:
    quantile = quantile_label(slo.quantile)
    percentile = f"p{round(slo.quantile * 100, 1):g}"
    pod = "model {{ $labels.model }} on pod {{ $labels.pod }}"
    return [
        _alert(
            "TritonLatencySLOBreached",
            # Only where requests arrive: a model loaded beside the one under load keeps a stale or
            # warm-up-only quantile that says nothing about the service (the sandbox showed such
            # alerts pending for models that received no traffic).
            f'(triton:request_latency_ms:quantile{{quantile="{quantile}"}} > {slo.latency_ms})'
            f" and on ({TRITON_BY}) ({recorded('triton:requests_per_second', slo)} > 0)",
            slo.for_minutes,
            "critical",
            region,
            f"Triton {percentile} latency above the {slo.latency_ms} ms SLO",
            f'{percentile} request latency of {pod} is {{{{ $value | printf "%.0f" }}}} ms, over the '
            f"{slo.latency_ms} ms objective for {minutes_duration(slo.for_minutes)}",
        ),
        _alert(
            "TritonFailureRatioHigh",
            f"{recorded('triton:failure_ratio', slo)} > {slo.max_failure_ratio}",
            slo.for_minutes,
            "critical",
            region,
            "Triton requests failing",
            f"{{{{ $value | humanizePercentage }}}} of the requests to {pod} fail "
            f"(allowed: {slo.max_failure_ratio:.2%})",
        ),
        _alert(
            "TritonTargetDown",
            f'up{{job="{TRITON_JOB}"}} == 0',
            slo.down_for_minutes,
            "critical",
            region,
            "Triton metrics endpoint down",
            "Prometheus cannot scrape Triton pod {{ $labels.pod }} on node {{ $labels.node }}: "
            "the server is down, hung or restarting",
        ),
        _alert(
            "TritonAbsent",
            f'absent(up{{job="{TRITON_JOB}"}})',
            slo.down_for_minutes,
            "critical",
            region,
            "No Triton pod discovered",
            "Prometheus discovers no Triton pod with a metrics port: nothing serves inference",
        ),
        _alert(
            "GpuIdleWhileRequestsQueue",
            f"(node:gpu_utilisation:avg < {slo.gpu_idle_utilisation}) and on ({NODE_BY}) "
            f"(max by ({NODE_BY}) ({recorded('triton:queue_ms_per_request', slo)}) > {slo.queue_ms})",
            slo.gpu_idle_for_minutes,
            "warning",
            region,
            "GPU idle while Triton requests queue",
            "The GPU of node {{ $labels.node }} is only {{ $value | humanizePercentage }} busy while requests "
            f"wait over {slo.queue_ms:g} ms in Triton's queue: the bottleneck is elsewhere "
            "(CPU, model instance count, batching settings)",
        ),
    ]


def rules(slo: SloSettings, region: str) -> dict[str, Any]:
    """The rules file as a dict: recording groups first (alerts read their results)."""
    validate_label_value("region", region)
    return {
        "groups": [
            {"name": "triton.recording", "rules": triton_recording_rules(slo)},
            {"name": "gpu.recording", "rules": gpu_recording_rules()},
            {"name": "triton.alerts", "rules": alerting_rules(slo, region)},
        ]
    }


def rules_yaml(slo: SloSettings, region: str) -> str:
    """The text of the rules file the Prometheus config's rule_files points at."""
    header = "# Generated by monitoring.rules. Edit the generator or SloSettings, not this file.\n"
    return header + yaml.safe_dump(rules(slo, region), sort_keys=False, width=1000)


def alert_names(slo: SloSettings | None = None) -> list[str]:
    return [rule["alert"] for rule in alerting_rules(slo or SloSettings(), "any")]
