"""Monitoring: the SLO its alerts judge, Prometheus' retention and volume, builtin or operator mode."""

from __future__ import annotations

from observability.settings import MonitoringError, SloSettings, validate_duration, validate_slo
from settings.cluster import DISK_MAX_GB
from settings.reader import Reader
from settings.values import MonitoringSettings


def monitoring(reader: Reader) -> MonitoringSettings:
    failure_percent = reader.integer("sloMaxFailurePercent", maximum=100, too_large="expected a percentage, 0 to 100")
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
    return MonitoringSettings(
        mode=reader.choice("monitoringMode", ("builtin", "operator")),
        slo=slo,
        retention=retention,
        storage_gb=reader.integer(
            "prometheusStorageGb", minimum=1, maximum=DISK_MAX_GB, why="pd-balanced volume size in GB"
        ),
    )
