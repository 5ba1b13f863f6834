"""Prometheus: discovers Triton, DCGM and Locust pods with kubernetes_sd and evaluates the SLO rules."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.contracts.workloads import DEFAULT_NAMESPACES, PROMETHEUS_PORT, PROMETHEUS_SERVICE, Namespaces
from triton_gke.k8s.common import ANY_NODE, PodPlacement, http_probe, non_root_container_security
from triton_gke.k8s.monitoring.shapes import NOBODY, Scope, config_map_volume, meta, service, single_pod_deployment
from triton_gke.observability.prometheus_config import prometheus_config_yaml
from triton_gke.observability.rules import rules_yaml
from triton_gke.observability.settings import SloSettings, pod_selectors

PROMETHEUS_IMAGE = "quay.io/prometheus/prometheus:v3.5.0"
# The Prometheus Service below, as Grafana and the metrics adapter reach it inside the cluster (default namespaces).
PROMETHEUS_URL = DEFAULT_NAMESPACES.prometheus_url()
RULES_DIR = "/etc/prometheus-rules"


def prometheus(
    scope: Scope,
    ns: pulumi.Input[str],
    watched: Mapping[str, pulumi.Input[str]],
    *,
    region: str,
    stack: str,
    slo: SloSettings,
    retention: str,
    storage_gb: int,
    placement: PodPlacement = ANY_NODE,
    namespaces: Namespaces = DEFAULT_NAMESPACES,
) -> kubernetes.core.v1.Service:
    """Prometheus in `ns` with its config, rules, disk and pod readers in the `watched` namespaces (name -> the
    created namespace's name output); returns its Service."""
    account = kubernetes.core.v1.ServiceAccount(
        scope.name("prometheus-sa"), metadata=meta("prometheus", ns), opts=scope.opts()
    )
    # Least privilege: read pods in the three watched namespaces only, no cluster-wide access.
    selectors = pod_selectors(namespaces)
    for selector in selectors:
        _pod_reader(scope, selector.namespace, watched[selector.namespace], account, namespaces.monitoring)
    config = kubernetes.core.v1.ConfigMap(
        scope.name("prometheus-config"),
        metadata=meta("prometheus-config", ns),
        data={
            "prometheus.yml": prometheus_config_yaml(
                region, stack, rule_files=(f"{RULES_DIR}/*.yml",), selectors=selectors
            )
        },
        opts=scope.opts(),
    )
    rule_files = kubernetes.core.v1.ConfigMap(
        scope.name("prometheus-rules"),
        metadata=meta("prometheus-rules", ns),
        data={"triton.yml": rules_yaml(slo, region)},
        opts=scope.opts(),
    )
    storage = kubernetes.core.v1.PersistentVolumeClaim(
        scope.name("prometheus-data"),
        metadata=kubernetes.meta.v1.ObjectMetaArgs(
            name="prometheus-data",
            namespace=ns,
            # GKE's default class binds only once the pod is scheduled: waiting here would deadlock.
            annotations={"pulumi.com/skipAwait": "true"},
        ),
        spec=kubernetes.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteOnce"],
            resources=kubernetes.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{storage_gb}Gi"}),
        ),
        opts=scope.opts(),
    )
    single_pod_deployment(
        scope,
        "prometheus",
        ns,
        NOBODY,
        _container(retention),
        volumes=[
            config_map_volume("config", config),
            config_map_volume("rules", rule_files),
            kubernetes.core.v1.VolumeArgs(
                name="data",
                persistent_volume_claim=kubernetes.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=storage.metadata.name
                ),
            ),
        ],
        service_account=account,
        placement=placement,
    )
    return service(scope, PROMETHEUS_SERVICE, ns, {"web": PROMETHEUS_PORT}, ())


def _container(retention: str) -> kubernetes.core.v1.ContainerArgs:
    return kubernetes.core.v1.ContainerArgs(
        name="prometheus",
        image=PROMETHEUS_IMAGE,
        args=[
            "--config.file=/etc/prometheus/prometheus.yml",
            "--storage.tsdb.path=/prometheus",
            f"--storage.tsdb.retention.time={retention}",
        ],
        ports=[kubernetes.core.v1.ContainerPortArgs(name="web", container_port=PROMETHEUS_PORT)],
        readiness_probe=http_probe("/-/ready", "web"),
        resources=kubernetes.core.v1.ResourceRequirementsArgs(
            requests={"cpu": "200m", "memory": "1Gi"}, limits={"memory": "4Gi"}
        ),
        security_context=non_root_container_security(),
        volume_mounts=[
            kubernetes.core.v1.VolumeMountArgs(name="config", mount_path="/etc/prometheus", read_only=True),
            kubernetes.core.v1.VolumeMountArgs(name="rules", mount_path=RULES_DIR, read_only=True),
            kubernetes.core.v1.VolumeMountArgs(name="data", mount_path="/prometheus"),
        ],
    )


def _pod_reader(
    scope: Scope,
    namespace: str,
    ns: pulumi.Input[str],
    account: kubernetes.core.v1.ServiceAccount,
    account_namespace: str,
) -> None:
    """A Role that reads pods in `namespace` (`ns`: its created name) and its binding to Prometheus' account."""
    role = kubernetes.rbac.v1.Role(
        scope.name(f"read-pods-{namespace}"),
        metadata=meta("prometheus-read-pods", ns),
        rules=[kubernetes.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"])],
        opts=scope.opts(),
    )
    kubernetes.rbac.v1.RoleBinding(
        scope.name(f"read-pods-{namespace}-binding"),
        metadata=meta("prometheus-read-pods", ns),
        role_ref=kubernetes.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
        ),
        subjects=[
            kubernetes.rbac.v1.SubjectArgs(
                kind="ServiceAccount", name=account.metadata.name, namespace=account_namespace
            )
        ],
        opts=scope.opts(),
    )
