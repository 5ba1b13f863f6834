"""Monitoring of one cluster: Prometheus, Grafana and the DCGM GPU exporter.

Prometheus discovers Triton, DCGM and Locust pods with kubernetes_sd (observability/prometheus_config.py)
and evaluates the recording and SLO alerting rules (observability/rules.py); Grafana starts with the
Prometheus datasource and the dashboards in dashboards/. In operator mode (MonitoringArgs.mode) the
cluster's own Prometheus Operator gets PodMonitor and PrometheusRule objects instead: for a program composing
this component onto a cluster that already runs the operator (the stack refuses `monitoringMode: operator`,
settings/monitoring.py: the clusters it creates have no such CRDs).

One module per concern, each a builder that declares its objects through a `Scope` (shapes.py): dcgm.py,
prometheus.py, grafana.py, operator.py. This component composes them. The metrics adapter the Triton HPA reads
lives with that HPA in k8s/autoscaling.py (Autoscaling), which reads this Prometheus (PROMETHEUS_URL).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.contracts.workloads import DEFAULT_NAMESPACES, MONITORING_NAMESPACE, Namespaces
from triton_gke.k8s.common import ANY_NODE, PodPlacement, restricted_namespace
from triton_gke.k8s.monitoring.dcgm import (
    DCGM_CRITICAL_PODS,
    DCGM_IMAGE,
    DCGM_PRIORITY_CLASS,
    GPU_TOLERATIONS,
    dcgm_exporter,
)
from triton_gke.k8s.monitoring.grafana import (
    DATASOURCE_UID,
    GRAFANA_IMAGE,
    GRAFANA_UID,
    dashboard_provider,
    grafana,
    grafana_datasources,
)
from triton_gke.k8s.monitoring.operator import operator_objects
from triton_gke.k8s.monitoring.prometheus import (
    PROMETHEUS_IMAGE,
    PROMETHEUS_URL,
    RULES_DIR,
    prometheus,
)
from triton_gke.k8s.monitoring.shapes import NOBODY, Scope
from triton_gke.observability.settings import SloSettings, pod_selectors

__all__ = [
    "DATASOURCE_UID",
    "DCGM_CRITICAL_PODS",
    "DCGM_IMAGE",
    "DCGM_PRIORITY_CLASS",
    "GRAFANA_IMAGE",
    "GRAFANA_UID",
    "MONITORING_NAMESPACE",
    "NOBODY",
    "PROMETHEUS_IMAGE",
    "PROMETHEUS_URL",
    "RULES_DIR",
    "Monitoring",
    "MonitoringArgs",
    "dashboard_provider",
    "grafana_datasources",
]


@dataclass(frozen=True)
class MonitoringArgs:
    region: str
    stack: str
    slo: SloSettings
    mode: str  # "builtin" or "operator"
    retention: str
    storage_gb: int
    grafana_admin_password: pulumi.Input[str]
    # Namespace name -> the created Namespace's name output, for objects this component puts in
    # other components' namespaces (so they wait for them, and go before them on destroy).
    watched_namespaces: dict[str, pulumi.Input[str]]
    web_ui_source_ranges: tuple[str, ...] = ()
    # Where Prometheus and Grafana run (default any node), and the taints the DCGM exporter tolerates on the GPU nodes
    # (default GKE's nvidia.com/gpu taint; it selects nodes by GKE's own accelerator label, k8s/monitoring/dcgm.py).
    placement: PodPlacement = ANY_NODE
    gpu_tolerations: tuple[kubernetes.core.v1.TolerationArgs, ...] = GPU_TOLERATIONS
    # The namespaces of every component: this one creates `monitoring` and `gpu_metrics` and scrapes the others.
    namespaces: Namespaces = DEFAULT_NAMESPACES


class Monitoring(pulumi.ComponentResource):
    """The DCGM exporter always; Prometheus and Grafana in builtin mode, PodMonitors and a PrometheusRule in operator
    mode. Outputs: the namespaces, and in builtin mode the Prometheus and Grafana Services and Prometheus' URL."""

    gpu_namespace: kubernetes.core.v1.Namespace
    # The `monitoring` namespace, Prometheus' and Grafana's Services: builtin mode only, else None.
    namespace: kubernetes.core.v1.Namespace | None = None
    prometheus_service: kubernetes.core.v1.Service | None = None
    grafana_service: kubernetes.core.v1.Service | None = None

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:Monitoring", name, None, opts)
        scope = Scope(name, self)
        self.gpu_namespace = dcgm_exporter(scope, args.gpu_tolerations, args.namespaces.gpu_metrics)
        # Where the scraped pods live: the other components' namespaces and the exporter's own.
        namespaces = {**args.watched_namespaces, args.namespaces.gpu_metrics: self.gpu_namespace.metadata.name}
        outputs: dict[str, pulumi.Input[str]] = {"gpu_namespace": self.gpu_namespace.metadata.name}
        if args.mode == "operator":
            operator_objects(
                scope, namespaces, region=args.region, slo=args.slo, selectors=pod_selectors(args.namespaces)
            )
        else:
            outputs |= self._builtin(scope, args, namespaces)
        self.register_outputs(outputs)

    def _builtin(
        self, scope: Scope, args: MonitoringArgs, namespaces: dict[str, pulumi.Input[str]]
    ) -> dict[str, pulumi.Input[str]]:
        """Prometheus and Grafana in their own namespace; returns the outputs a user reaches them by."""
        namespace = self.namespace = restricted_namespace(scope.name("ns"), args.namespaces.monitoring, self)
        ns = namespace.metadata.name
        prometheus_service = self.prometheus_service = prometheus(
            scope,
            ns,
            namespaces,
            region=args.region,
            stack=args.stack,
            slo=args.slo,
            retention=args.retention,
            storage_gb=args.storage_gb,
            placement=args.placement,
            namespaces=args.namespaces,
        )
        grafana_service = self.grafana_service = grafana(
            scope,
            ns,
            slo=args.slo,
            admin_password=args.grafana_admin_password,
            web_ui_source_ranges=args.web_ui_source_ranges,
            placement=args.placement,
            prometheus_url=args.namespaces.prometheus_url(),
        )
        return {
            "namespace": ns,
            "prometheus_service": prometheus_service.metadata.name,
            "grafana_service": grafana_service.metadata.name,
            "prometheus_url": args.namespaces.prometheus_url(),
        }
