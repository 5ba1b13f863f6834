"""Kubernetes names two sides must spell the same: namespaces, service accounts and the labels pods carry.

The components (k8s/) create the namespaces and label the pods; the scrape jobs (observability/settings.py
PodSelector) select pods by these; the model store (infra/model_store.py) binds Triton's service account by
Workload Identity; the load test addresses Triton's Service by name and namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from triton_gke.contracts.naming import DNS_LABEL, DNS_LABEL_MAX

# Kubernetes' recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
# The container port name every scraped pod gives its metrics port; Prometheus' kubernetes_sd keeps pods whose
# port name matches (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#kubernetes_sd_config).
METRICS_PORT_NAME = "metrics"

# Triton: its namespace, its Kubernetes service account (Workload Identity maps
# serviceAccount:PROJECT.svc.id.goog[NAMESPACE/KSA] to the bucket reader,
# https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity), the name of its Deployment and Service.
# The namespace is the same in every stack: renaming it would replace every object in it on a running cluster, the
# Services and their NEGs included. TRITON_SERVICE_ACCOUNT is only TritonServingArgs' fallback: a stack runs Triton as
# policy/principals.py triton_service_account(stack), a TritonOnCluster by default as component_service_account (one
# per instance; see there why).
TRITON_NAMESPACE = "triton"
TRITON_SERVICE_ACCOUNT = "triton"
TRITON_APP = "triton"
TRITON_COMPONENT = "inference-server"

# Locust: master and workers in one namespace; the master serves the metrics Prometheus scrapes.
LOCUST_NAMESPACE = "load"
LOCUST_APP = "locust"
LOCUST_MASTER = "master"
LOCUST_WORKER = "worker"

# NVIDIA's DCGM exporter (GPU metrics) in its own, privileged namespace; Prometheus, the adapter and Grafana.
DCGM_NAMESPACE = "gpu-metrics"
DCGM_APP = "dcgm-exporter"
MONITORING_NAMESPACE = "monitoring"
# The Service in front of the builtin Prometheus (k8s/monitoring/prometheus.py), which `triton-gke rollout` reads.
PROMETHEUS_SERVICE = "prometheus"

# The web UIs an operator reaches (`kubectl port-forward`, the stack's `access` output, or the LoadBalancers
# webUiSourceRanges opens), each on its program's default port: Locust's --web-port
# (https://docs.locust.io/en/stable/configuration.html), Grafana's http_port
# (https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#http_port) and Prometheus'
# --web.listen-address (https://prometheus.io/docs/prometheus/latest/command-line/prometheus/).
LOCUST_WEB_PORT = 8089
GRAFANA_PORT = 3000
PROMETHEUS_PORT = 9090


# prometheus-adapter: its Deployment and Service, and the prefix of its cluster-scoped RBAC objects (ClusterRole,
# ClusterRoleBindings; k8s/autoscaling.py). The APIService it registers is named by the API it serves,
# v1beta1.custom.metrics.k8s.io, so a cluster has one custom metrics adapter whatever its name.
ADAPTER_NAME = "prometheus-adapter"
# Its objects are ADAPTER_NAME-resource-reader, -reader, -auth-delegator, -auth-reader: a DNS-1123 label short
# enough for the longest suffix (RBAC names are path segments,
# https://kubernetes.io/docs/reference/access-authn-authz/rbac/; a label is the strictest form, as every name here).
ADAPTER_NAME_MAX = DNS_LABEL_MAX - len("-resource-reader")


def adapter_name_ok(name: str) -> bool:
    return bool(DNS_LABEL.fullmatch(name)) and len(name) <= ADAPTER_NAME_MAX


@dataclass(frozen=True)
class Namespaces:
    """The namespaces the components run in (TritonOnCluster's `namespaces` input; these defaults for the stack).

    Each is created by its component, so they must differ from each other and from the ones the cluster already has:
    the DCGM exporter's is privileged (it reads the host's GPU driver), the others are restricted."""

    triton: str = TRITON_NAMESPACE
    load_test: str = LOCUST_NAMESPACE
    monitoring: str = MONITORING_NAMESPACE
    gpu_metrics: str = DCGM_NAMESPACE

    def triton_host(self) -> str:
        """Triton's Service by its cluster DNS name (https://kubernetes.io/docs/concepts/services-networking/
        dns-pod-service/#services: "my-svc.my-namespace.svc.cluster-domain.example")."""
        return f"{TRITON_APP}.{self.triton}.svc.cluster.local"

    def prometheus_url(self) -> str:
        """The builtin Prometheus' URL inside the cluster (Grafana's data source, prometheus-adapter's source)."""
        return f"http://prometheus.{self.monitoring}.svc:{PROMETHEUS_PORT}"


DEFAULT_NAMESPACES = Namespaces()
NAMESPACE_ROLES = tuple(f.name for f in fields(Namespaces))


# Namespaces the cluster makes itself. Kubernetes: "default", "kube-system", "kube-public", "kube-node-lease", and the
# kube- prefix is reserved (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/
# #initial-namespaces). GKE: gke-managed-* (gke-managed-system, ...) and Managed Service for Prometheus' gmp-system and
# gmp-public ("Do not modify or deploy anything in this namespace",
# https://cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed).
CLUSTER_OWN_NAMESPACES = ("default",)
CLUSTER_OWN_PREFIXES = ("kube-", "gke-", "gmp-")
MAX_SHOWN = 80  # characters of a refused key or value repeated in its one-line error


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[: MAX_SHOWN - 3]}..."


def namespaces_problem(given: object) -> str | None:
    """One line naming what is wrong with a {role: namespace} mapping (roles: NAMESPACE_ROLES), or None."""
    if not isinstance(given, Mapping):
        return f"expected a mapping of {', '.join(NAMESPACE_ROLES)} to namespace names, got {type(given).__name__}"
    for role, name in given.items():
        if role not in NAMESPACE_ROLES:
            return f"{_shown(role)} is not a namespace the components use; expected one of {', '.join(NAMESPACE_ROLES)}"
        if not (isinstance(name, str) and DNS_LABEL.fullmatch(name) and len(name) <= DNS_LABEL_MAX):
            return (
                f"{role}: {_shown(name)} is not a namespace name; expected a DNS-1123 label (lowercase letters, digits"
                f" and -, starting and ending with a letter or digit, at most {DNS_LABEL_MAX} characters)"
            )
        if name in CLUSTER_OWN_NAMESPACES or name.startswith(CLUSTER_OWN_PREFIXES):
            return f"{role}: {name!r} is a namespace Kubernetes or GKE makes itself; name one the components may create"
    chosen = Namespaces(**dict(given))
    names = [getattr(chosen, role) for role in NAMESPACE_ROLES]
    for role in NAMESPACE_ROLES:
        name = getattr(chosen, role)
        if names.count(name) > 1:
            others = [r for r in NAMESPACE_ROLES if r != role and getattr(chosen, r) == name]
            return f"{role}: {name!r} is also the namespace of {others[0]}; each component creates its own"
    return None


def pod_labels(app: str, component: str | None = None) -> dict[str, str]:
    """The labels a workload's pods carry (and its selector matches): name, and component when given."""
    return {NAME_LABEL: app} | ({COMPONENT_LABEL: component} if component else {})


def workload_identity_member(project: str, namespace: str, service_account: str) -> str:
    """The IAM member of a Kubernetes service account under Workload Identity Federation for GKE."""
    return f"serviceAccount:{project}.svc.id.goog[{namespace}/{service_account}]"
