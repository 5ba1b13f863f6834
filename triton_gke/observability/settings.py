"""What the monitoring watches and the service-level objective its alerts enforce.

Kept free of heavy imports so stack configuration code can build and validate these cheaply.
The pod selectors are the contract with the Kubernetes components: namespaces, labels and the metrics
container port name come from contracts/workloads.py, which the components use to create and label the pods.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.contracts.workloads import (
    COMPONENT_LABEL,
    DCGM_APP,
    DCGM_NAMESPACE,
    DEFAULT_NAMESPACES,
    LOCUST_APP,
    LOCUST_MASTER,
    LOCUST_NAMESPACE,
    METRICS_PORT_NAME,
    NAME_LABEL,
    TRITON_APP,
    TRITON_NAMESPACE,
    Namespaces,
)

# Quantiles Triton's summaries are asked for (--metrics-config=summary_quantiles=...); an SLO
# quantile must be one of them, because a summary's quantiles cannot be computed afterwards.
DEFAULT_SUMMARY_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
_DURATION_RE = re.compile(r"^[1-9][0-9]*(ms|s|m|h|d|w|y)$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MonitoringError(ValueError):
    """A setting is invalid; the one-line message names the field and the value.

    The field is data (`field`, and `reason`: the line without it), so a caller names its own key for it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Copied or pickled with its data: the default would call __init__(message).
        return type(self), (self.field, self.reason)


@dataclass(frozen=True)
class SloSettings:
    """The performance objective of the reference system and the thresholds of its alerts."""

    latency_ms: int = 100  # the reference objective: 95% of requests within 100 ms
    quantile: float = 0.95
    for_minutes: float = 5  # how long the SLO (and failure ratio) must be broken before alerting
    max_failure_ratio: float = 0.01
    # GPU busy fraction (DCGM_FI_DEV_GPU_UTIL / 100) under which a GPU counts as idle.
    gpu_idle_utilisation: float = 0.2
    # Average queue time per request that counts as "requests queue"; above the batcher's
    # 20 ms max_queue_delay, so waiting for a batch to fill does not count.
    queue_ms: float = 50
    gpu_idle_for_minutes: float = 10
    down_for_minutes: float = 2
    rate_window: str = "1m"  # the rate() window of every recording rule
    summary_quantiles: tuple[float, ...] = field(default=DEFAULT_SUMMARY_QUANTILES)

    def __post_init__(self) -> None:
        # The type's own invariant, checked once where an SLO is made (by the settings layer from the stack, or by
        # a caller of the public components), so the rules and dashboards built from it need not check it again.
        validate_slo(self)


@dataclass(frozen=True)
class PodSelector:
    """Pods one scrape job discovers: namespace, labels that must all match, port name."""

    job: str
    namespace: str
    labels: tuple[tuple[str, str], ...]
    port: str = METRICS_PORT_NAME


# Job names are Prometheus' own (rules and dashboards use them); namespaces and labels are the components'.
TRITON_PODS = PodSelector("triton", TRITON_NAMESPACE, ((NAME_LABEL, TRITON_APP),))
DCGM_PODS = PodSelector("dcgm-exporter", DCGM_NAMESPACE, ((NAME_LABEL, DCGM_APP),))
LOCUST_MASTER_PODS = PodSelector(
    "locust", LOCUST_NAMESPACE, ((NAME_LABEL, LOCUST_APP), (COMPONENT_LABEL, LOCUST_MASTER))
)
POD_SELECTORS: tuple[PodSelector, ...] = (TRITON_PODS, DCGM_PODS, LOCUST_MASTER_PODS)


def pod_selectors(namespaces: Namespaces = DEFAULT_NAMESPACES) -> tuple[PodSelector, ...]:
    """POD_SELECTORS with the namespaces the components were given (TritonOnCluster's `namespaces`)."""
    where = {TRITON_PODS.job: namespaces.triton, DCGM_PODS.job: namespaces.gpu_metrics}
    where[LOCUST_MASTER_PODS.job] = namespaces.load_test
    return tuple(dataclasses.replace(s, namespace=where[s.job]) for s in POD_SELECTORS)


def validate_slo(slo: SloSettings) -> None:
    """Raise MonitoringError on the first invalid field (SloSettings runs it when made)."""
    _positive_int("latency_ms", slo.latency_ms)
    if slo.latency_ms > MAX_SLO_LATENCY_MS:
        raise MonitoringError("latency_ms", f"{slo.latency_ms} is above {MAX_SLO_LATENCY_MS} ms (an hour)")
    _fraction("quantile", slo.quantile, open_upper=True)
    if slo.quantile not in slo.summary_quantiles:
        allowed = ", ".join(str(q) for q in slo.summary_quantiles)
        raise MonitoringError("quantile", f"{slo.quantile} is not one of Triton's summary quantiles ({allowed})")
    for key in ("for_minutes", "gpu_idle_for_minutes", "down_for_minutes", "queue_ms"):
        _non_negative(key, getattr(slo, key))
    _fraction("max_failure_ratio", slo.max_failure_ratio)
    _fraction("gpu_idle_utilisation", slo.gpu_idle_utilisation)
    validate_duration("rate_window", slo.rate_window)
    if not slo.summary_quantiles:
        raise MonitoringError("summary_quantiles", "at least one quantile is required")
    for q in slo.summary_quantiles:
        _fraction("summary_quantiles", q, open_upper=True)


def validate_duration(key: str, value: object) -> None:
    if not isinstance(value, str) or not _DURATION_RE.fullmatch(value):  # `$` alone: "15s\n"
        raise MonitoringError(key, f"{value!r} is not a Prometheus duration such as 15s, 1m or 500ms")


def validate_label_value(key: str, value: object) -> None:
    if not isinstance(value, str) or not value or any(c in value for c in '"\\\n{}$'):
        raise MonitoringError(key, f"{value!r} must be a non-empty string without quotes, braces, '$' or newlines")


def validate_label_name(key: str, value: object) -> None:
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value):  # `$` alone: "job\n"
        raise MonitoringError(key, f"{value!r} is not a Prometheus label name")


def minutes_duration(minutes: float) -> str:
    """A `for:` duration; whole seconds, so 0.25 minutes is 15s."""
    seconds = round(minutes * 60)
    return f"{seconds // 60}m" if seconds and seconds % 60 == 0 else f"{seconds}s"


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MonitoringError(key, f"must be a finite number, got {value!r}")
    return float(value)


def _positive_int(key: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MonitoringError(key, f"must be a positive integer, got {value!r}")


def _non_negative(key: str, value: object) -> None:
    if _number(key, value) < 0:
        raise MonitoringError(key, f"must be >= 0, got {value!r}")


def _fraction(key: str, value: object, open_upper: bool = False) -> None:
    number = _number(key, value)
    if not (0 < number < 1 if open_upper else 0 <= number <= 1):
        bounds = "strictly between 0 and 1" if open_upper else "between 0 and 1"
        raise MonitoringError(key, f"must be {bounds}, got {value!r}")
