"""Monitoring: the SLO its alerts judge, Prometheus' retention and volume, builtin mode (operator is refused)."""

from __future__ import annotations

from triton_gke.observability.settings import MonitoringError, SloSettings, validate_duration, validate_slo
from triton_gke.settings.cluster import DISK_MAX_GB
from triton_gke.settings.reader import Reader
from triton_gke.settings.values import MonitoringSettings

# Operator mode declares PodMonitors and a PrometheusRule (monitoring.coreos.com/v1) for a Prometheus Operator the
# cluster already runs; this program creates its clusters in the same `up`, and a new GKE cluster has neither the
# operator nor its CRDs, so the first `up` would fail half-way, after the clusters ("no matches for kind"):
# https://github.com/pulumi/pulumi-kubernetes/issues/1712. The Monitoring component keeps the mode for direct use.
OPERATOR_REFUSED = (
    "this stack creates its GKE clusters, which have no Prometheus Operator CRDs (monitoring.coreos.com/v1), so "
    "the first `up` would fail after creating them (pulumi/pulumi-kubernetes#1712); use builtin (operator mode is "
    "for composing the triton-gke:k8s:Monitoring component onto a cluster that already runs the operator)"
)


def monitoring(reader: Reader) -> MonitoringSettings:
    # Below 100: at 100 the alert (failure ratio above it) could never fire; capacity records refuse it alike.
    failure_percent = reader.integer(
        "sloMaxFailurePercent", maximum=99, too_large="expected a percentage, 0 to 99 (at 100 the alert never fires)"
    )
    slo = SloSettings(
        latency_ms=reader.integer("sloLatencyMs", minimum=1),
        for_minutes=reader.integer("sloForMinutes", minimum=1),
        max_failure_ratio=failure_percent / 100,
        # A whole number, as the default it replaces (50): the alert's expression shows it as written.
        queue_ms=reader.integer("sloQueueTimeMs", minimum=1),
    )
    retention = reader.string("prometheusRetention")
    validate_slo(slo)  # cannot fail on the whole numbers read above; guards the dataclass contract
    try:
        validate_duration("prometheusRetention", retention)
    except MonitoringError:
        raise reader.fail(
            "prometheusRetention", retention, "expected a Prometheus duration such as 15d or 720h"
        ) from None
    if reader.string("monitoringMode") == "operator":
        raise reader.fail("monitoringMode", "operator", OPERATOR_REFUSED)
    return MonitoringSettings(
        mode=reader.choice("monitoringMode", ("builtin",)),
        slo=slo,
        retention=retention,
        storage_gb=reader.integer(
            "prometheusStorageGb", minimum=1, maximum=DISK_MAX_GB, why="pd-balanced volume size in GB"
        ),
    )
