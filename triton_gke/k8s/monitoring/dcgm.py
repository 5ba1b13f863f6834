"""NVIDIA's DCGM exporter: GPU metrics from every GPU node, in its own privileged namespace."""

from __future__ import annotations

import pulumi_kubernetes as kubernetes

from triton_gke.k8s.common import GPU_NODES, required_node_affinity
from triton_gke.k8s.monitoring.shapes import Scope, meta
from triton_gke.observability.settings import DCGM_PODS

DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
# GKE ships a ResourceQuota in kube-system scoped to the system-*-critical PriorityClasses; once such a quota
# exists, the ResourceQuota admission plugin admits pods of those classes only in namespaces with a matching
# quota ("Limit Priority Class consumption by default",
# https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default;
# the same failure on GKE: fluxcd/flux2#3879, NVIDIA/aicr#921). Without one, every DCGM pod is refused.
DCGM_PRIORITY_CLASS = "system-node-critical"
# Far above any GPU pool (one exporter pod per GPU node): the quota exists to admit the class, not to cap it.
DCGM_CRITICAL_PODS = 1000


# GKE's GPU taint (contracts/placement.py GPU_TAINT_KEY, tolerated with any value): the exporter's default toleration.
GPU_TOLERATIONS = (GPU_NODES.toleration,)


def dcgm_exporter(
    scope: Scope,
    tolerations: tuple[kubernetes.core.v1.TolerationArgs, ...] = GPU_TOLERATIONS,
    namespace_name: str = DCGM_PODS.namespace,
) -> kubernetes.core.v1.Namespace:
    """The exporter's namespace (`namespace_name`), its priority-class quota and the DaemonSet on every node with
    GKE's accelerator label, tolerating `tolerations` (default GKE's GPU taint); returns the namespace."""
    # Reading GPU counters needs the host's driver and a privileged container: its own namespace,
    # so every other namespace can keep the restricted Pod Security Standard.
    namespace = kubernetes.core.v1.Namespace(
        scope.name("gpu-ns"),
        metadata=meta(namespace_name, **{"pod-security.kubernetes.io/enforce": "privileged"}),
        opts=scope.opts(),
    )
    quota = kubernetes.core.v1.ResourceQuota(
        scope.name("critical-pods-quota"),
        metadata=meta("critical-pods", namespace.metadata.name),
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
        opts=scope.opts(),
    )
    labels = dict(DCGM_PODS.labels)
    kubernetes.apps.v1.DaemonSet(
        scope.name("dcgm-exporter"),
        metadata=meta("dcgm-exporter", namespace.metadata.name, **labels),
        spec=kubernetes.apps.v1.DaemonSetSpecArgs(
            selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
            template=kubernetes.core.v1.PodTemplateSpecArgs(
                metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels), spec=_pod_spec(tolerations)
            ),
        ),
        # Pods created before the quota would be refused (and retried with back-off): the quota goes first.
        opts=scope.opts(depends_on=[quota]),
    )
    return namespace


def _pod_spec(tolerations: tuple[kubernetes.core.v1.TolerationArgs, ...]) -> kubernetes.core.v1.PodSpecArgs:
    mounts = {
        "nvidia-install-dir-host": ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
        "pod-resources": ("/var/lib/kubelet/pod-resources", "/var/lib/kubelet/pod-resources"),
    }
    return kubernetes.core.v1.PodSpecArgs(
        automount_service_account_token=False,
        affinity=_gpu_nodes_only(),
        tolerations=list(tolerations),
        priority_class_name=DCGM_PRIORITY_CLASS,
        containers=[
            kubernetes.core.v1.ContainerArgs(
                name="dcgm-exporter",
                image=DCGM_IMAGE,
                env=[
                    kubernetes.core.v1.EnvVarArgs(name="LD_LIBRARY_PATH", value="/usr/local/nvidia/lib64"),
                    kubernetes.core.v1.EnvVarArgs(name="DCGM_EXPORTER_KUBERNETES", value="true"),
                    # GKE's device plugin names GPUs nvidia0, nvidia1...; matching pods by the default (uid) leaves
                    # the pod and namespace labels empty (NVIDIA/dcgm-exporter#342, NVIDIA/gpu-monitoring-tools#160).
                    kubernetes.core.v1.EnvVarArgs(name="DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", value="device-name"),
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
            kubernetes.core.v1.VolumeArgs(name=n, host_path=kubernetes.core.v1.HostPathVolumeSourceArgs(path=host))
            for n, (host, _) in mounts.items()
        ],
    )


def _gpu_nodes_only() -> kubernetes.core.v1.AffinityArgs:
    return required_node_affinity(
        kubernetes.core.v1.NodeSelectorRequirementArgs(key="cloud.google.com/gke-accelerator", operator="Exists")
    )
