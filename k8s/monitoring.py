"""Monitoring of one cluster: Prometheus, Grafana, the DCGM GPU exporter and the HPA's metrics adapter.

Prometheus discovers Triton, DCGM and Locust pods with kubernetes_sd (observability/prometheus_config.py)
and evaluates the recording and SLO alerting rules (observability/rules.py); Grafana starts with the
Prometheus datasource and the dashboards in dashboards/. With `monitoringMode: operator` the
cluster's own Prometheus Operator gets PodMonitor and PrometheusRule objects instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import yaml

from k8s.common import (
    CPU_POOL_SELECTOR,
    GPU_TOLERATION,
    http_probe,
    non_root_container_security,
    non_root_pod_security,
    required_node_affinity,
    restricted_namespace,
)
from k8s.triton import QUEUE_TIME_METRIC
from observability.dashboards import dashboard_text, dashboards
from observability.prometheus_config import prometheus_config_yaml
from observability.rules import rules, rules_yaml
from observability.settings import DCGM_PODS, POD_SELECTORS, TRITON_PODS, SloSettings

MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_IMAGE = "quay.io/prometheus/prometheus:v3.5.0"
GRAFANA_IMAGE = "docker.io/grafana/grafana:11.6.0"
DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
ADAPTER_IMAGE = "registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0"
PROMETHEUS_URL = f"http://prometheus.{MONITORING_NAMESPACE}.svc:9090"
DATASOURCE_UID = "prometheus"
RULES_DIR = "/etc/prometheus-rules"
NOBODY = 65534
GRAFANA_UID = 472
# The adapter's secure port: the API server calls it there (APIService discovery), from the control plane.
ADAPTER_PORT = 6443
# GKE ships a ResourceQuota in kube-system scoped to the system-*-critical PriorityClasses; once such a quota
# exists, the ResourceQuota admission plugin admits pods of those classes only in namespaces with a matching
# quota ("Limit Priority Class consumption by default",
# https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default;
# the same failure on GKE: fluxcd/flux2#3879, NVIDIA/aicr#921). Without one, every DCGM pod is refused.
DCGM_PRIORITY_CLASS = "system-node-critical"
# Far above any GPU pool (one exporter pod per GPU node): the quota exists to admit the class, not to cap it.
DCGM_CRITICAL_PODS = 1000


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


def _meta(name: str, namespace: pulumi.Input[str] | None = None, **labels: str) -> kubernetes.meta.v1.ObjectMetaArgs:
    return kubernetes.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=labels or None)


def _app(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name}


def serves_custom_metrics(mode: str) -> bool:
    """Whether this stack deploys the adapter that serves the Triton HPA its metric (custom.metrics.k8s.io).

    Only builtin mode does; an HPA on a metric nobody serves never scales and reports FailedGetPodsMetric, so
    the program creates the HPA (and opens the control plane's path to the adapter) only where this is true.
    """
    return mode == "builtin"


class Monitoring(pulumi.ComponentResource):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:Monitoring", name, None, opts)
        self._name = name
        self._args = args
        self._dcgm_exporter()
        if args.mode == "operator":
            self._operator_objects()
        else:
            self.namespace = restricted_namespace(f"{name}-ns", MONITORING_NAMESPACE, self)
            self._prometheus()
            if serves_custom_metrics(args.mode):
                self._metrics_adapter()
            self._grafana()
        self.register_outputs({})

    def _opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, **kwargs)

    def _namespace(self, name: str) -> pulumi.Input[str]:
        if name == DCGM_PODS.namespace:
            return self._gpu_namespace.metadata.name
        return self._args.watched_namespaces[name]

    # ------------------------------------------------------------------ GPU metrics

    def _dcgm_exporter(self) -> None:
        # Reading GPU counters needs the host's driver and a privileged container: its own namespace,
        # so every other namespace can keep the restricted Pod Security Standard.
        namespace = self._gpu_namespace = kubernetes.core.v1.Namespace(
            f"{self._name}-gpu-ns",
            metadata=_meta(DCGM_PODS.namespace, **{"pod-security.kubernetes.io/enforce": "privileged"}),
            opts=self._opts(),
        )
        quota = kubernetes.core.v1.ResourceQuota(
            f"{self._name}-critical-pods-quota",
            metadata=_meta("critical-pods", namespace.metadata.name),
            spec=kubernetes.core.v1.ResourceQuotaSpecArgs(
                hard={"pods": str(DCGM_CRITICAL_PODS)},
                scope_selector=kubernetes.core.v1.ScopeSelectorArgs(
                    match_expressions=[
                        kubernetes.core.v1.ScopedResourceSelectorRequirementArgs(
                            scope_name="PriorityClass", operator="In", values=[DCGM_PRIORITY_CLASS]
                        )
                    ]
                ),
            ),
            opts=self._opts(),
        )
        labels = dict(DCGM_PODS.labels)
        mounts = {
            "nvidia-install-dir-host": ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
            "pod-resources": ("/var/lib/kubelet/pod-resources", "/var/lib/kubelet/pod-resources"),
        }
        kubernetes.apps.v1.DaemonSet(
            f"{self._name}-dcgm-exporter",
            metadata=_meta("dcgm-exporter", namespace.metadata.name, **labels),
            spec=kubernetes.apps.v1.DaemonSetSpecArgs(
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=kubernetes.core.v1.PodTemplateSpecArgs(
                    metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=kubernetes.core.v1.PodSpecArgs(
                        automount_service_account_token=False,
                        affinity=_gpu_nodes_only(),
                        tolerations=[GPU_TOLERATION],
                        priority_class_name=DCGM_PRIORITY_CLASS,
                        containers=[
                            kubernetes.core.v1.ContainerArgs(
                                name="dcgm-exporter",
                                image=DCGM_IMAGE,
                                env=[
                                    kubernetes.core.v1.EnvVarArgs(
                                        name="LD_LIBRARY_PATH", value="/usr/local/nvidia/lib64"
                                    ),
                                    kubernetes.core.v1.EnvVarArgs(name="DCGM_EXPORTER_KUBERNETES", value="true"),
                                    # GKE's device plugin names GPUs nvidia0, nvidia1...; matching pods by the
                                    # default (uid) leaves the pod and namespace labels empty
                                    # (NVIDIA/dcgm-exporter#342, NVIDIA/gpu-monitoring-tools#160).
                                    kubernetes.core.v1.EnvVarArgs(
                                        name="DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", value="device-name"
                                    ),
                                ],
                                ports=[kubernetes.core.v1.ContainerPortArgs(name="metrics", container_port=9400)],
                                security_context=kubernetes.core.v1.SecurityContextArgs(privileged=True),
                                resources=kubernetes.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "50m", "memory": "128Mi"}, limits={"memory": "512Mi"}
                                ),
                                volume_mounts=[
                                    kubernetes.core.v1.VolumeMountArgs(name=n, mount_path=path, read_only=True)
                                    for n, (_, path) in mounts.items()
                                ],
                            )
                        ],
                        volumes=[
                            kubernetes.core.v1.VolumeArgs(
                                name=n, host_path=kubernetes.core.v1.HostPathVolumeSourceArgs(path=host)
                            )
                            for n, (host, _) in mounts.items()
                        ],
                    ),
                ),
            ),
            # Pods created before the quota would be refused (and retried with back-off): the quota goes first.
            opts=self._opts(depends_on=[quota]),
        )

    # ------------------------------------------------------------------ Prometheus

    def _prometheus(self) -> None:
        a = self._args
        ns = self.namespace.metadata.name
        account = kubernetes.core.v1.ServiceAccount(
            f"{self._name}-prometheus-sa", metadata=_meta("prometheus", ns), opts=self._opts()
        )
        # Least privilege: read pods in the three watched namespaces only, no cluster-wide access.
        for selector in POD_SELECTORS:
            self._pod_reader(selector.namespace, account)
        config = kubernetes.core.v1.ConfigMap(
            f"{self._name}-prometheus-config",
            metadata=_meta("prometheus-config", ns),
            data={"prometheus.yml": prometheus_config_yaml(a.region, a.stack, rule_files=(f"{RULES_DIR}/*.yml",))},
            opts=self._opts(),
        )
        rule_files = kubernetes.core.v1.ConfigMap(
            f"{self._name}-prometheus-rules",
            metadata=_meta("prometheus-rules", ns),
            data={"triton.yml": rules_yaml(a.slo, a.region)},
            opts=self._opts(),
        )
        storage = kubernetes.core.v1.PersistentVolumeClaim(
            f"{self._name}-prometheus-data",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                name="prometheus-data",
                namespace=ns,
                # GKE's default class binds only once the pod is scheduled: waiting here would deadlock.
                annotations={"pulumi.com/skipAwait": "true"},
            ),
            spec=kubernetes.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteOnce"],
                resources=kubernetes.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{a.storage_gb}Gi"}),
            ),
            opts=self._opts(),
        )
        self._deployment(
            "prometheus",
            ns,
            NOBODY,
            kubernetes.core.v1.ContainerArgs(
                name="prometheus",
                image=PROMETHEUS_IMAGE,
                args=[
                    "--config.file=/etc/prometheus/prometheus.yml",
                    "--storage.tsdb.path=/prometheus",
                    f"--storage.tsdb.retention.time={a.retention}",
                ],
                ports=[kubernetes.core.v1.ContainerPortArgs(name="web", container_port=9090)],
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
            ),
            volumes=[
                _config_map_volume("config", config),
                _config_map_volume("rules", rule_files),
                kubernetes.core.v1.VolumeArgs(
                    name="data",
                    persistent_volume_claim=kubernetes.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                        claim_name=storage.metadata.name
                    ),
                ),
            ],
            service_account=account,
        )
        self._service("prometheus", ns, {"web": 9090}, ())

    def _pod_reader(self, namespace: str, account: kubernetes.core.v1.ServiceAccount) -> None:
        role = kubernetes.rbac.v1.Role(
            f"{self._name}-read-pods-{namespace}",
            metadata=_meta("prometheus-read-pods", self._namespace(namespace)),
            rules=[
                kubernetes.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"])
            ],
            opts=self._opts(),
        )
        kubernetes.rbac.v1.RoleBinding(
            f"{self._name}-read-pods-{namespace}-binding",
            metadata=_meta("prometheus-read-pods", self._namespace(namespace)),
            role_ref=kubernetes.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name=role.metadata.name
            ),
            subjects=[
                kubernetes.rbac.v1.SubjectArgs(
                    kind="ServiceAccount", name=account.metadata.name, namespace=MONITORING_NAMESPACE
                )
            ],
            opts=self._opts(),
        )

    # ------------------------------------------------------------------ HPA metrics

    def _metrics_adapter(self) -> None:
        """prometheus-adapter serves the Pods metric the Triton HPA scales on (custom.metrics.k8s.io)."""
        ns = self.namespace.metadata.name
        account = kubernetes.core.v1.ServiceAccount(
            f"{self._name}-adapter-sa", metadata=_meta("prometheus-adapter", ns), opts=self._opts()
        )
        subject = kubernetes.rbac.v1.SubjectArgs(
            kind="ServiceAccount", name=account.metadata.name, namespace=MONITORING_NAMESPACE
        )
        reader = kubernetes.rbac.v1.ClusterRole(
            f"{self._name}-adapter-reader",
            metadata=_meta("prometheus-adapter-resource-reader"),
            rules=[
                kubernetes.rbac.v1.PolicyRuleArgs(
                    api_groups=[""], resources=["namespaces", "pods", "services"], verbs=["get", "list", "watch"]
                )
            ],
            opts=self._opts(),
        )
        bindings = {
            "reader": ("ClusterRole", reader.metadata.name, None),
            "auth-delegator": ("ClusterRole", "system:auth-delegator", None),
            "auth-reader": ("Role", "extension-apiserver-authentication-reader", "kube-system"),
        }
        for suffix, (kind, role, namespace) in bindings.items():
            binding_type = kubernetes.rbac.v1.RoleBinding if kind == "Role" else kubernetes.rbac.v1.ClusterRoleBinding
            binding_type(
                f"{self._name}-adapter-{suffix}",
                metadata=_meta(f"prometheus-adapter-{suffix}", namespace),
                role_ref=kubernetes.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind=kind, name=role),
                subjects=[subject],
                opts=self._opts(),
            )
        config = kubernetes.core.v1.ConfigMap(
            f"{self._name}-adapter-config",
            metadata=_meta("prometheus-adapter-config", ns),
            data={"config.yaml": yaml.safe_dump(adapter_rules())},
            opts=self._opts(),
        )
        adapter = self._deployment(
            "prometheus-adapter",
            ns,
            NOBODY,
            kubernetes.core.v1.ContainerArgs(
                name="prometheus-adapter",
                image=ADAPTER_IMAGE,
                args=[
                    f"--prometheus-url={PROMETHEUS_URL}",
                    "--config=/etc/adapter/config.yaml",
                    "--metrics-relist-interval=1m",
                    f"--secure-port={ADAPTER_PORT}",
                    "--cert-dir=/tmp/cert",
                ],
                ports=[kubernetes.core.v1.ContainerPortArgs(name="https", container_port=ADAPTER_PORT)],
                resources=kubernetes.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "512Mi"}
                ),
                security_context=non_root_container_security(),
                volume_mounts=[
                    kubernetes.core.v1.VolumeMountArgs(name="config", mount_path="/etc/adapter", read_only=True),
                    kubernetes.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                ],
            ),
            volumes=[
                _config_map_volume("config", config),
                kubernetes.core.v1.VolumeArgs(name="tmp", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs()),
            ],
            service_account=account,
        )
        service = self._service("prometheus-adapter", ns, {"https": 443}, (), target={"https": "https"})
        kubernetes.apiregistration.v1.APIService(
            f"{self._name}-custom-metrics-api",
            metadata=_meta("v1beta1.custom.metrics.k8s.io"),
            spec=kubernetes.apiregistration.v1.APIServiceSpecArgs(
                group="custom.metrics.k8s.io",
                version="v1beta1",
                service=kubernetes.apiregistration.v1.ServiceReferenceArgs(
                    name=service.metadata.name, namespace=MONITORING_NAMESPACE
                ),
                group_priority_minimum=100,
                version_priority=100,
                # The adapter serves a self-signed certificate; the API server reaches it inside the cluster.
                insecure_skip_tls_verify=True,
            ),
            # Registered after, and on destroy removed before, the pods that serve it: an APIService without a backend
            # fails discovery, and namespace deletion stalls on discovery errors (kubernetes/kubernetes#75788, #60807).
            opts=self._opts(depends_on=[adapter, service]),
        )

    # ------------------------------------------------------------------ Grafana

    def _grafana(self) -> None:
        a = self._args
        ns = self.namespace.metadata.name
        secret = kubernetes.core.v1.Secret(
            f"{self._name}-grafana-admin",
            metadata=_meta("grafana-admin", ns),
            string_data={"password": a.grafana_admin_password},
            opts=self._opts(),
        )
        provisioning = kubernetes.core.v1.ConfigMap(
            f"{self._name}-grafana-provisioning",
            metadata=_meta("grafana-provisioning", ns),
            data={
                "datasources.yaml": yaml.safe_dump(grafana_datasources()),
                "dashboards.yaml": yaml.safe_dump(dashboard_provider()),
            },
            opts=self._opts(),
        )
        boards = kubernetes.core.v1.ConfigMap(
            f"{self._name}-grafana-dashboards",
            metadata=_meta("grafana-dashboards", ns),
            data={file: dashboard_text(board) for file, board in dashboards(a.slo).items()},
            opts=self._opts(),
        )
        env = {
            "GF_SECURITY_ADMIN_USER": "admin",
            "GF_AUTH_ANONYMOUS_ENABLED": "false",
            "GF_USERS_ALLOW_SIGN_UP": "false",
            "GF_ANALYTICS_REPORTING_ENABLED": "false",
            "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
        }
        password = kubernetes.core.v1.EnvVarArgs(
            name="GF_SECURITY_ADMIN_PASSWORD",
            value_from=kubernetes.core.v1.EnvVarSourceArgs(
                secret_key_ref=kubernetes.core.v1.SecretKeySelectorArgs(name=secret.metadata.name, key="password")
            ),
        )
        mounts = {
            "provisioning-datasources": ("/etc/grafana/provisioning/datasources", provisioning, "datasources.yaml"),
            "provisioning-dashboards": ("/etc/grafana/provisioning/dashboards", provisioning, "dashboards.yaml"),
            "dashboards": ("/var/lib/grafana-dashboards", boards, None),
        }
        self._deployment(
            "grafana",
            ns,
            GRAFANA_UID,
            kubernetes.core.v1.ContainerArgs(
                name="grafana",
                image=GRAFANA_IMAGE,
                env=[kubernetes.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()] + [password],
                ports=[kubernetes.core.v1.ContainerPortArgs(name="web", container_port=3000)],
                readiness_probe=http_probe("/api/health", "web"),
                resources=kubernetes.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "1Gi"}
                ),
                security_context=non_root_container_security(),
                volume_mounts=[
                    kubernetes.core.v1.VolumeMountArgs(name=n, mount_path=path, read_only=True)
                    for n, (path, _, _) in mounts.items()
                ]
                + [kubernetes.core.v1.VolumeMountArgs(name="data", mount_path="/var/lib/grafana")],
            ),
            volumes=[_config_map_volume(n, cm, key) for n, (_, cm, key) in mounts.items()]
            + [kubernetes.core.v1.VolumeArgs(name="data", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs())],
        )
        self._service("grafana", ns, {"web": 3000}, ())
        if a.web_ui_source_ranges:
            self._service("grafana-web", ns, {"web": 3000}, a.web_ui_source_ranges, selector_name="grafana")

    # ------------------------------------------------------------------ Prometheus Operator

    def _operator_objects(self) -> None:
        """PodMonitors and a PrometheusRule for a cluster whose Prometheus Operator (and its CRDs) already runs."""
        a = self._args
        for selector in POD_SELECTORS:
            kubernetes.apiextensions.CustomResource(
                f"{self._name}-podmonitor-{selector.job}",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata=_meta(f"triton-gke-{selector.job}", self._namespace(selector.namespace)),
                spec={
                    "selector": {"matchLabels": dict(selector.labels)},
                    "podMetricsEndpoints": [
                        {"port": selector.port, "relabelings": [{"targetLabel": "region", "replacement": a.region}]}
                    ],
                },
                opts=self._opts(),
            )
        kubernetes.apiextensions.CustomResource(
            f"{self._name}-prometheusrule",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata=_meta("triton-gke", self._namespace(TRITON_PODS.namespace)),
            spec=rules(a.slo, a.region),
            opts=self._opts(),
        )

    # ------------------------------------------------------------------ shared shapes

    def _deployment(
        self,
        name: str,
        ns: pulumi.Input[str],
        uid: int,
        container: kubernetes.core.v1.ContainerArgs,
        volumes: list[kubernetes.core.v1.VolumeArgs],
        service_account: kubernetes.core.v1.ServiceAccount | None = None,
    ) -> kubernetes.apps.v1.Deployment:
        labels = _app(name)
        return kubernetes.apps.v1.Deployment(
            f"{self._name}-{name}",
            metadata=_meta(name, ns, **labels),
            spec=kubernetes.apps.v1.DeploymentSpecArgs(
                replicas=1,
                # A single writer of its volume: never two Prometheus pods on one disk.
                strategy=kubernetes.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=kubernetes.core.v1.PodTemplateSpecArgs(
                    metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=kubernetes.core.v1.PodSpecArgs(
                        service_account_name=service_account.metadata.name if service_account else None,
                        automount_service_account_token=service_account is not None,
                        node_selector=CPU_POOL_SELECTOR,
                        security_context=non_root_pod_security(uid),
                        containers=[container],
                        volumes=volumes,
                    ),
                ),
            ),
            opts=self._opts(),
        )

    def _service(
        self,
        name: str,
        ns: pulumi.Input[str],
        ports: dict[str, int],
        sources: tuple[str, ...],
        target: dict[str, str] | None = None,
        selector_name: str | None = None,
    ) -> kubernetes.core.v1.Service:
        return kubernetes.core.v1.Service(
            f"{self._name}-{name}-svc",
            metadata=_meta(name, ns),
            spec=kubernetes.core.v1.ServiceSpecArgs(
                # Reached with kubectl port-forward; a LoadBalancer only for the ranges the stack lists.
                type="LoadBalancer" if sources else "ClusterIP",
                load_balancer_source_ranges=list(sources) or None,
                selector=_app(selector_name or name),
                ports=[
                    kubernetes.core.v1.ServicePortArgs(name=n, port=p, target_port=(target or {}).get(n, n))
                    for n, p in ports.items()
                ],
            ),
            opts=self._opts(),
        )


def adapter_rules() -> dict[str, Any]:
    """The HPA's Pods metric: queue time per request in microseconds, from rates; 0 when idle (not NaN)."""
    window = "2m"
    return {
        "rules": [
            {
                "seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": "^.*$", "as": QUEUE_TIME_METRIC},
                "metricsQuery": (
                    f"max by (<<.GroupBy>>) (rate(nv_inference_queue_duration_us{{<<.LabelMatchers>>}}[{window}])"
                    f" / clamp_min(rate(nv_inference_request_success{{<<.LabelMatchers>>}}[{window}]), 0.001))"
                ),
            }
        ]
    }


def grafana_datasources() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "type": "prometheus",
                "uid": DATASOURCE_UID,
                "access": "proxy",
                "url": PROMETHEUS_URL,
                "isDefault": True,
                "editable": False,
            }
        ],
    }


def dashboard_provider() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "triton-gke",
                "folder": "Triton",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": "/var/lib/grafana-dashboards"},
            }
        ],
    }


def _gpu_nodes_only() -> kubernetes.core.v1.AffinityArgs:
    return required_node_affinity(
        kubernetes.core.v1.NodeSelectorRequirementArgs(key="cloud.google.com/gke-accelerator", operator="Exists")
    )


def _config_map_volume(
    name: str, config_map: kubernetes.core.v1.ConfigMap, key: str | None = None
) -> kubernetes.core.v1.VolumeArgs:
    items = [kubernetes.core.v1.KeyToPathArgs(key=key, path=key)] if key else None
    return kubernetes.core.v1.VolumeArgs(
        name=name, config_map=kubernetes.core.v1.ConfigMapVolumeSourceArgs(name=config_map.metadata.name, items=items)
    )
