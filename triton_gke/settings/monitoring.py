"""Monitoring: the SLO its alerts judge, Prometheus' retention and volume, builtin mode (operator is refused)."""

from __future__ import annotations

from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.observability.settings import MonitoringError, SloSettings, validate_duration
from triton_gke.settings.cluster import DISK_MAX_GB
from triton_gke.settings.lifecycle import MAX_WAIT_S
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


# The longest SLO latency (and queue-time threshold below it): Triton's exit timeout must cover the longest request at
# the SLO, and it is at most an hour (settings/lifecycle.py MAX_WAIT_S), so no longer SLO can be coherent.
MAX_SLO_MS = MAX_SLO_LATENCY_MS  # contracts/slo.py, the one bound every SLO reader shares
assert MAX_SLO_MS == MAX_WAIT_S * 1000
# The longest an SLO breach may last before the alert fires: a week. Prometheus takes far longer `for:` durations
# (int64 nanoseconds), but an alert that waits a week is no alert, so a larger value is a typo.
MAX_SLO_FOR_MINUTES = 7 * 24 * 60


def monitoring(reader: Reader) -> MonitoringSettings:
    # Below 100: at 100 the alert (failure ratio above it) could never fire; capacity records refuse it alike.
    failure_percent = reader.integer(
        "sloMaxFailurePercent", maximum=99, too_large="expected a percentage, 0 to 99 (at 100 the alert never fires)"
    )
    slo = SloSettings(
        latency_ms=reader.integer(
            "sloLatencyMs", minimum=1, maximum=MAX_SLO_MS, too_large=f"expected at most {MAX_SLO_MS} ms (an hour)"
        ),
        for_minutes=reader.integer(
            "sloForMinutes",
            minimum=1,
            maximum=MAX_SLO_FOR_MINUTES,
            too_large=f"expected at most {MAX_SLO_FOR_MINUTES} minutes (a week)",
        ),
        max_failure_ratio=failure_percent / 100,
        # A whole number, as the default it replaces (50): the alert's expression shows it as written.
        queue_ms=reader.integer(
            "sloQueueTimeMs", minimum=1, maximum=MAX_SLO_MS, too_large=f"expected at most {MAX_SLO_MS} ms (an hour)"
        ),
    )
    retention = reader.string("prometheusRetention")
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
