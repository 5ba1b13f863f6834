"""Operator mode (MonitoringArgs.mode): PodMonitors and a PrometheusRule for the cluster's own Prometheus Operator.

For a cluster that already runs the operator: the stack refuses `monitoringMode: operator` (settings/monitoring.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.k8s.monitoring.shapes import Scope, meta
from triton_gke.observability.rules import rules
from triton_gke.observability.settings import POD_SELECTORS, TRITON_PODS, PodSelector, SloSettings

# The Prometheus Operator's API group and version of PodMonitor and PrometheusRule
# (https://github.com/prometheus-operator/prometheus-operator/blob/master/Documentation/api.md); its CRDs must exist
# before `pulumi up` (pulumi/pulumi-kubernetes#1712).
OPERATOR_API_VERSION = "monitoring.coreos.com/v1"


def operator_objects(
    scope: Scope,
    namespaces: Mapping[str, pulumi.Input[str]],
    *,
    region: str,
    slo: SloSettings,
    selectors: Sequence[PodSelector] = POD_SELECTORS,
) -> None:
    """One PodMonitor per scraped workload, in its namespace (name -> the created namespace's name output), and the
    recording and alerting rules as a PrometheusRule beside Triton."""
    for selector in selectors:
        kubernetes.apiextensions.CustomResource(
            scope.name(f"podmonitor-{selector.job}"),
            api_version=OPERATOR_API_VERSION,
            kind="PodMonitor",
            metadata=meta(f"triton-gke-{selector.job}", namespaces[selector.namespace]),
            spec={
                "selector": {"matchLabels": dict(selector.labels)},
                "podMetricsEndpoints": [
                    {"port": selector.port, "relabelings": [{"targetLabel": "region", "replacement": region}]}
                ],
            },
            opts=scope.opts(),
        )
    kubernetes.apiextensions.CustomResource(
        scope.name("prometheusrule"),
        api_version=OPERATOR_API_VERSION,
        kind="PrometheusRule",
        metadata=meta("triton-gke", namespaces[next(s for s in selectors if s.job == TRITON_PODS.job).namespace]),
        spec=rules(slo, region),
        opts=scope.opts(),
    )
