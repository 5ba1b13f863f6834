"""observability.settings: the SLO settings are validated in one line naming the field."""

from __future__ import annotations

import re

import pytest

from triton_gke.observability.settings import MonitoringError, SloSettings, validate_slo


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
    from triton_gke.contracts.triton import SUMMARY_QUANTILES, triton_server_args

    served = {float(pair.split(":")[0]) for pair in SUMMARY_QUANTILES.split(",")}
    assert SloSettings().quantile in served
    assert set(SloSettings().summary_quantiles) <= served
    args = triton_server_args("gs://bucket/models")
    assert "--metrics-config=summary_latencies=true" in args
