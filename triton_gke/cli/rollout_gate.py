"""The rollout's gate: one region's SLO over N consecutive windows, read from that region's own Prometheus.

What a window reads: the region's p95 request latency and its error ratio, by the recording rules every region's
Prometheus already evaluates (observability/rules.py: triton:request_latency_ms:quantile, the failures and requests
per second), so the gate and the alerts judge the same series. Thresholds are the stack's (sloLatencyMs, its
quantile, sloMaxFailurePercent: settings/monitoring.py). A window with no request counts as a miss: a canary the
balancer sends nothing to has shown nothing (fail closed).

The route (PrometheusReader): `kubectl port-forward` to the region's Prometheus Service with the region's kubeconfig
(the stack output `kubeconfigs`), then the HTTP API's instant query, GET /api/v1/query?query=... answering
{"status": "success", "data": {"resultType": "vector", "result": [{"value": [TIME, "TEXT"]}]}}
(https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries). The reader is an interface
(WindowReader): the sandbox points one at a local Prometheus, the tests at recorded windows.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from triton_gke.cli.rollout_machine import GateFigures
from triton_gke.observability.rules import TRITON_BY, quantile_label, recorded
from triton_gke.observability.settings import SloSettings


@dataclass(frozen=True)
class Window:
    p95_ms: float | None  # None: no request in the window
    error_ratio: float | None


class WindowReader(Protocol):
    def read(self, region: str) -> Window:
        """The region's figures over the last window."""
        ...


def slo_queries(slo: SloSettings) -> dict[str, str]:
    """The two PromQL instant queries of a window, over the region's Prometheus (one per region: no region label)."""
    rps, fps = recorded("triton:requests_per_second", slo), recorded("triton:failures_per_second", slo)
    quantile = quantile_label(slo.quantile)
    return {
        # The worst model's quantile where requests arrive (as TritonLatencySLOBreached judges it).
        "p95_ms": f'max(triton:request_latency_ms:quantile{{quantile="{quantile}"}} and on ({TRITON_BY}) ({rps} > 0))',
        "error_ratio": f"sum({fps}) / (sum({fps}) + sum({rps}))",
    }


def meets(window: Window, slo: SloSettings) -> bool:
    if window.p95_ms is None or window.error_ratio is None:
        return False
    return window.p95_ms <= slo.latency_ms and window.error_ratio <= slo.max_failure_ratio


def judge(windows: Sequence[Window], slo: SloSettings, n: int) -> bool | None:
    """True once N consecutive windows meet the SLO, False once N consecutive miss it or 3N were read without either
    (fail closed), None while undecided."""
    run_ok = run_miss = 0
    for window in windows:
        if meets(window, slo):
            run_ok, run_miss = run_ok + 1, 0
        else:
            run_ok, run_miss = 0, run_miss + 1
        if run_ok >= n:
            return True
        if run_miss >= n:
            return False
    return False if len(windows) >= 3 * n else None


def run_gate(region: str, reader: WindowReader, slo: SloSettings, n: int, wait: Callable[[], None]) -> GateFigures:
    """Read windows (wait() between them: one window's length) until judge decides."""
    windows: list[Window] = []
    verdict = None
    while verdict is None:
        wait()
        windows.append(reader.read(region))
        verdict = judge(windows, slo, n)
    return GateFigures(
        region=region,
        p95_ms=tuple(w.p95_ms for w in windows),
        error_ratio=tuple(w.error_ratio for w in windows),
        latency_ms=slo.latency_ms,
        max_error_ratio=slo.max_failure_ratio,
        passed=verdict,
    )


class PrometheusReader:
    """A WindowReader over Prometheus HTTP APIs: `base_url(region)` is where the region's Prometheus answers (the
    port-forward's local address, or a local Prometheus in the sandbox)."""

    def __init__(self, base_url: Callable[[str], str], slo: SloSettings, timeout_s: float = 10) -> None:
        self._base_url = base_url
        self._queries = slo_queries(slo)
        self._timeout_s = timeout_s

    def read(self, region: str) -> Window:
        base = self._base_url(region).rstrip("/")
        values = {name: self._scalar(base, query) for name, query in self._queries.items()}
        return Window(p95_ms=values["p95_ms"], error_ratio=values["error_ratio"])

    def _scalar(self, base: str, query: str) -> float | None:
        url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        with urllib.request.urlopen(url, timeout=self._timeout_s) as response:  # noqa: S310 (http to localhost)
            return scalar_of(json.loads(response.read()))


def scalar_of(answer: dict) -> float | None:
    """The one value of an instant vector answer; None for an empty vector or NaN (no request: 0/0)."""
    if answer.get("status") != "success":
        raise ValueError(f"Prometheus answered {answer.get('status')!r}: {answer.get('error', '')}")
    result = answer["data"]["result"]
    if not result:
        return None
    value = float(result[0]["value"][1])  # Prometheus writes sample values as text ("NaN" too)
    return None if math.isnan(value) else value
