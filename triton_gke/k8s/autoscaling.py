"""Autoscaling of Triton on queue time per request: the HPA and the metrics source it reads, as one component.

The HPA scales on a Pods metric that only prometheus-adapter serves (through the custom.metrics.k8s.io
APIService); an HPA without its source never scales (FailedGetPodsMetric), a source without an HPA serves nobody.
Pending Triton pods (one per GPU node) then make the cluster autoscaler add GPU nodes up to the pool's maximum.

These objects lived in TritonServing (the HPA) and Monitoring (the adapter) before; their resource names are kept
and `hpa_aliases` / `adapter_aliases` name the old parents, so `pulumi up` on an existing stack moves them in its
state instead of deleting and recreating them (https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as kubernetes
import yaml

from triton_gke.contracts.workloads import ADAPTER_NAME, ADAPTER_NAME_MAX, adapter_name_ok
from triton_gke.k8s.common import ANY_NODE, PodPlacement, non_root_container_security
from triton_gke.k8s.monitoring.shapes import NOBODY, Scope, config_map_volume, meta, service, single_pod_deployment

# Pods metric served by the adapter: rate(queue time) / rate(successes), never the cumulative counter.
QUEUE_TIME_METRIC = "triton_queue_time_per_request_us"
ADAPTER_IMAGE = "registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0"
# The adapter's secure port: the API server calls it there (APIService discovery), from the control plane.
ADAPTER_PORT = 6443
# minReplicas and maxReplicas are int32 (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/
# horizontal-pod-autoscaler-v2/).
INT32_MAX = 2**31 - 1
# A namespace name is an RFC 1123 label: at most 63 lower-case alphanumerics or '-', alphanumeric at both ends
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def serves_custom_metrics(mode: str) -> bool:
    """Whether a stack in monitoring `mode` gets this component, the adapter serving custom.metrics.k8s.io with it.

    Only builtin mode does (operator mode leaves metrics to the cluster's own stack); an HPA on a metric nobody
    serves never scales and reports FailedGetPodsMetric, so the program creates the HPA (and opens the control
    plane's path to the adapter, ADAPTER_PORT) only where this is true, and Triton otherwise runs fixed replicas.
    """
    return mode == "builtin"


@dataclass(frozen=True)
class AutoscalingArgs:
    """What to scale, within which bounds, on which target, and where the metric comes from."""

    # The Deployment to scale and its namespace (the HPA lives beside it): its name outputs, so the HPA waits for it.
    deployment: pulumi.Input[str]
    namespace: pulumi.Input[str]
    # Replica bounds; with one pod per GPU node, the GPU pool's node range.
    min_replicas: int
    max_replicas: int
    # Average queue time per request (microseconds) the HPA holds each pod to.
    queue_time_target_us: int
    # Where the adapter reads Triton's metrics (a Prometheus that scrapes the Triton pods).
    prometheus_url: str
    # The namespace the adapter runs in, by name: its RBAC subjects and the APIService's service reference name it.
    adapter_namespace: str
    # The same namespace as the output of the object creating it, when the program creates it: the adapter's own
    # objects then wait for it (and are deleted before it). Defaults to adapter_namespace.
    adapter_namespace_output: pulumi.Input[str] | None = None
    # Prefixes of the child resource names (default: this component's name); a refactoring keeps the old ones.
    hpa_name_prefix: str | None = None
    adapter_name_prefix: str | None = None
    # Where the HPA and the adapter's objects lived before, e.g. [pulumi.Alias(parent=old_component)].
    hpa_aliases: Sequence[pulumi.Alias] = ()
    adapter_aliases: Sequence[pulumi.Alias] = ()
    # Where the adapter's pod runs (node selector, tolerations); default any node.
    placement: PodPlacement = ANY_NODE
    # The prefix of the adapter's cluster-wide RBAC objects (ClusterRole, ClusterRoleBindings, its RoleBinding in
    # kube-system): names a second adapter must not share. Its APIService is named by its API and cannot differ.
    adapter_name: str = ADAPTER_NAME

    def __post_init__(self) -> None:
        _check_replicas(self.min_replicas, self.max_replicas)
        if isinstance(self.queue_time_target_us, bool) or not isinstance(self.queue_time_target_us, int):
            raise ValueError(f"queue_time_target_us: {self.queue_time_target_us!r} is not a whole number")
        # A target of 0 would scale out on any queueing at all: straight to max_replicas.
        if not 0 < self.queue_time_target_us <= INT32_MAX:
            raise ValueError(f"queue_time_target_us: {self.queue_time_target_us} is not within 1..{INT32_MAX}")
        _check_prometheus_url(self.prometheus_url)
        if not isinstance(self.adapter_namespace, str) or not DNS_LABEL.fullmatch(self.adapter_namespace):
            raise ValueError(f"adapter_namespace: {self.adapter_namespace!r} is not a Kubernetes namespace name")
        if not isinstance(self.adapter_name, str) or not adapter_name_ok(self.adapter_name):
            raise ValueError(
                f"adapter_name: {self.adapter_name!r} is not a DNS-1123 label of at most {ADAPTER_NAME_MAX} characters"
            )
        for key in ("hpa_name_prefix", "adapter_name_prefix"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{key}: {value!r} is not a resource name prefix")


def _check_replicas(low: Any, high: Any) -> None:
    """The HPA API's rules: maxReplicas at least minReplicas; minReplicas at least 1, as 0 needs the alpha
    HPAScaleToZero gate and an Object or External metric, and ours is a Pods metric
    (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/horizontal-pod-autoscaler-v2/)."""
    for key, value in (("min_replicas", low), ("max_replicas", high)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}: {value!r} is not a whole number")
        if not 1 <= value <= INT32_MAX:
            raise ValueError(f"{key}: {value} is not within 1..{INT32_MAX}")
    if high < low:
        raise ValueError(f"max_replicas: {high} is less than min_replicas {low}")


def _check_prometheus_url(url: Any) -> None:
    """prometheus-adapter's --prometheus-url: an http(s) URL of a Prometheus server
    (flag "prometheus-url", https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/cmd/adapter/adapter.go)."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        valid = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a malformed IPv6 host or port
        valid = False
    if not valid or any(c.isspace() for c in url):
        raise ValueError(f"prometheus_url: {url!r} is not an http(s) URL with a host")


class Autoscaling(pulumi.ComponentResource):
    """An HPA on QUEUE_TIME_METRIC and the prometheus-adapter that serves it. Outputs: the HPA's name, the metric
    and the APIService's name."""

    hpa: kubernetes.autoscaling.v2.HorizontalPodAutoscaler
    api_service: kubernetes.apiregistration.v1.APIService

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:Autoscaling", name, None, opts)
        adapter_scope = Scope(args.adapter_name_prefix or name, self, tuple(args.adapter_aliases))
        self.api_service = metrics_adapter(
            adapter_scope,
            args.adapter_namespace_output if args.adapter_namespace_output is not None else args.adapter_namespace,
            args.adapter_namespace,
            args.prometheus_url,
            args.placement,
            args.adapter_name,
        )
        self.hpa = queue_time_autoscaler(Scope(args.hpa_name_prefix or name, self, tuple(args.hpa_aliases)), args)
        self.register_outputs(
            {"hpa": self.hpa.metadata.name, "metric": QUEUE_TIME_METRIC, "api_service": self.api_service.metadata.name}
        )


def queue_time_autoscaler(scope: Scope, args: AutoscalingArgs) -> kubernetes.autoscaling.v2.HorizontalPodAutoscaler:
    """The HPA on the Deployment: average queue time per request per pod at most the target."""
    return kubernetes.autoscaling.v2.HorizontalPodAutoscaler(
        scope.name("hpa"),
        # Named like the Deployment it scales (`kubectl get hpa` beside `kubectl get deploy`).
        metadata=kubernetes.meta.v1.ObjectMetaArgs(name=args.deployment, namespace=args.namespace),
        spec=kubernetes.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
            scale_target_ref=kubernetes.autoscaling.v2.CrossVersionObjectReferenceArgs(
                api_version="apps/v1", kind="Deployment", name=args.deployment
            ),
            min_replicas=args.min_replicas,
            max_replicas=args.max_replicas,
            metrics=[
                kubernetes.autoscaling.v2.MetricSpecArgs(
                    type="Pods",
                    pods=kubernetes.autoscaling.v2.PodsMetricSourceArgs(
                        metric=kubernetes.autoscaling.v2.MetricIdentifierArgs(name=QUEUE_TIME_METRIC),
                        target=kubernetes.autoscaling.v2.MetricTargetArgs(
                            type="AverageValue", average_value=str(args.queue_time_target_us)
                        ),
                    ),
                )
            ],
            behavior=kubernetes.autoscaling.v2.HorizontalPodAutoscalerBehaviorArgs(
                # A new GPU node takes minutes: do not give one back at the first quiet minute.
                scale_down=kubernetes.autoscaling.v2.HPAScalingRulesArgs(stabilization_window_seconds=600)
            ),
        ),
        opts=scope.opts(),
    )


# ---------------------------------------------------------------------------------------------- the metrics source


def metrics_adapter(
    scope: Scope,
    ns: pulumi.Input[str],
    namespace: str,
    prometheus_url: str,
    placement: PodPlacement = ANY_NODE,
    adapter_name: str = ADAPTER_NAME,
) -> kubernetes.apiregistration.v1.APIService:
    """prometheus-adapter in `ns` (named `namespace`), reading `prometheus_url`, registered as
    custom.metrics.k8s.io; returns the APIService. `adapter_name` prefixes its cluster-wide RBAC objects."""
    account = kubernetes.core.v1.ServiceAccount(
        scope.name("adapter-sa"), metadata=meta("prometheus-adapter", ns), opts=scope.opts()
    )
    _adapter_rbac(scope, account, namespace, adapter_name)
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
        _adapter_container(prometheus_url),
        volumes=[
            config_map_volume("config", config),
            kubernetes.core.v1.VolumeArgs(name="tmp", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs()),
        ],
        service_account=account,
        placement=placement,
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


def _adapter_rbac(
    scope: Scope, account: kubernetes.core.v1.ServiceAccount, namespace: str, adapter_name: str = ADAPTER_NAME
) -> None:
    """Read namespaces, pods and services; delegate authentication and read its configuration, as an API server
    extension must (system:auth-delegator, extension-apiserver-authentication-reader in kube-system:
    https://kubernetes.io/docs/tasks/extend-kubernetes/setup-extension-api-server/)."""
    subject = kubernetes.rbac.v1.SubjectArgs(kind="ServiceAccount", name=account.metadata.name, namespace=namespace)
    reader = kubernetes.rbac.v1.ClusterRole(
        scope.name("adapter-reader"),
        metadata=meta(f"{adapter_name}-resource-reader"),
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
            metadata=meta(f"{adapter_name}-{suffix}", role_namespace),
            role_ref=kubernetes.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind=kind, name=role),
            subjects=[subject],
            opts=scope.opts(),
        )


def _adapter_container(prometheus_url: str) -> kubernetes.core.v1.ContainerArgs:
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
