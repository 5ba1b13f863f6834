"""prometheus-adapter: serves the Pods metric the Triton HPA scales on (custom.metrics.k8s.io)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import yaml

from k8s.common import non_root_container_security
from k8s.monitoring.shapes import NOBODY, Scope, config_map_volume, meta, service, single_pod_deployment
from k8s.triton import QUEUE_TIME_METRIC

ADAPTER_IMAGE = "registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0"
# The adapter's secure port: the API server calls it there (APIService discovery), from the control plane.
ADAPTER_PORT = 6443


def serves_custom_metrics(mode: str) -> bool:
    """Whether this stack deploys the adapter that serves the Triton HPA its metric (custom.metrics.k8s.io).

    Only builtin mode does; an HPA on a metric nobody serves never scales and reports FailedGetPodsMetric, so
    the program creates the HPA (and opens the control plane's path to the adapter) only where this is true.
    """
    return mode == "builtin"


def metrics_adapter(
    scope: Scope, ns: pulumi.Input[str], namespace: str, prometheus_url: str
) -> kubernetes.apiregistration.v1.APIService:
    """The adapter in `ns` (named `namespace`), reading `prometheus_url`, registered as custom.metrics.k8s.io."""
    account = kubernetes.core.v1.ServiceAccount(
        scope.name("adapter-sa"), metadata=meta("prometheus-adapter", ns), opts=scope.opts()
    )
    _rbac(scope, account, namespace)
    config = kubernetes.core.v1.ConfigMap(
        scope.name("adapter-config"),
        metadata=meta("prometheus-adapter-config", ns),
        data={"config.yaml": yaml.safe_dump(adapter_rules())},
        opts=scope.opts(),
    )
    adapter = single_pod_deployment(
        scope,
        "prometheus-adapter",
        ns,
        NOBODY,
        _container(prometheus_url),
        volumes=[
            config_map_volume("config", config),
            kubernetes.core.v1.VolumeArgs(name="tmp", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs()),
        ],
        service_account=account,
    )
    adapter_service = service(scope, "prometheus-adapter", ns, {"https": 443}, (), target={"https": "https"})
    return kubernetes.apiregistration.v1.APIService(
        scope.name("custom-metrics-api"),
        metadata=meta("v1beta1.custom.metrics.k8s.io"),
        spec=kubernetes.apiregistration.v1.APIServiceSpecArgs(
            group="custom.metrics.k8s.io",
            version="v1beta1",
            service=kubernetes.apiregistration.v1.ServiceReferenceArgs(
                name=adapter_service.metadata.name, namespace=namespace
            ),
            group_priority_minimum=100,
            version_priority=100,
            # The adapter serves a self-signed certificate; the API server reaches it inside the cluster.
            insecure_skip_tls_verify=True,
        ),
        # Registered after, and on destroy removed before, the pods that serve it: an APIService without a backend
        # fails discovery, and namespace deletion stalls on discovery errors (kubernetes/kubernetes#75788, #60807).
        opts=scope.opts(depends_on=[adapter, adapter_service]),
    )


def _rbac(scope: Scope, account: kubernetes.core.v1.ServiceAccount, namespace: str) -> None:
    """Read namespaces, pods and services; delegate authentication and read its configuration, as an API server
    extension must (system:auth-delegator, extension-apiserver-authentication-reader in kube-system:
    https://kubernetes.io/docs/tasks/extend-kubernetes/setup-extension-api-server/)."""
    subject = kubernetes.rbac.v1.SubjectArgs(kind="ServiceAccount", name=account.metadata.name, namespace=namespace)
    reader = kubernetes.rbac.v1.ClusterRole(
        scope.name("adapter-reader"),
        metadata=meta("prometheus-adapter-resource-reader"),
        rules=[
            kubernetes.rbac.v1.PolicyRuleArgs(
                api_groups=[""], resources=["namespaces", "pods", "services"], verbs=["get", "list", "watch"]
            )
        ],
        opts=scope.opts(),
    )
    bindings = {
        "reader": ("ClusterRole", reader.metadata.name, None),
        "auth-delegator": ("ClusterRole", "system:auth-delegator", None),
        "auth-reader": ("Role", "extension-apiserver-authentication-reader", "kube-system"),
    }
    for suffix, (kind, role, role_namespace) in bindings.items():
        binding_type = kubernetes.rbac.v1.RoleBinding if kind == "Role" else kubernetes.rbac.v1.ClusterRoleBinding
        binding_type(
            scope.name(f"adapter-{suffix}"),
            metadata=meta(f"prometheus-adapter-{suffix}", role_namespace),
            role_ref=kubernetes.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind=kind, name=role),
            subjects=[subject],
            opts=scope.opts(),
        )


def _container(prometheus_url: str) -> kubernetes.core.v1.ContainerArgs:
    return kubernetes.core.v1.ContainerArgs(
        name="prometheus-adapter",
        image=ADAPTER_IMAGE,
        args=[
            f"--prometheus-url={prometheus_url}",
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
