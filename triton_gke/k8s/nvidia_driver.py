"""NVIDIA's driver-installer DaemonSet for COS nodes, used only when GKE's own install is disabled.

Modelled on GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos
(daemonset-preloaded): the installer image is preloaded on GKE GPU nodes, so it is never pulled.
The node-affinity term `gke-gpu-driver-version DoesNotExist` keeps it off nodes whose driver GKE
manages, so the two installs can never meet on one node.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.k8s.common import required_node_affinity

# Preloaded by GKE on GPU nodes (imagePullPolicy Never); pause is the upstream tag-pinned image.
INSTALLER_IMAGE = "cos-nvidia-installer:fixed"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
INSTALL_DIR_HOST = "/home/kubernetes/bin/nvidia"


@dataclass(frozen=True)
class NvidiaDriverInstallerArgs:
    accelerator_type: str


def _host_volume(name: str, path: str) -> kubernetes.core.v1.VolumeArgs:
    return kubernetes.core.v1.VolumeArgs(name=name, host_path=kubernetes.core.v1.HostPathVolumeSourceArgs(path=path))


def _installer_container() -> kubernetes.core.v1.ContainerArgs:
    mounts = {
        "nvidia-install-dir-host": "/usr/local/nvidia",
        "dev": "/dev",
        "root-mount": "/root",
        "cos-tools": "/build/cos-tools",
    }
    env = {
        "NVIDIA_INSTALL_DIR_HOST": INSTALL_DIR_HOST,
        "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
        "ROOT_MOUNT_DIR": "/root",
        "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
        "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
    }
    return kubernetes.core.v1.ContainerArgs(
        name="nvidia-driver-installer",
        image=INSTALLER_IMAGE,
        image_pull_policy="Never",
        # Loading a kernel module needs a privileged container; this pod runs on GPU nodes only.
        security_context=kubernetes.core.v1.SecurityContextArgs(privileged=True),
        resources=kubernetes.core.v1.ResourceRequirementsArgs(requests={"cpu": "150m"}),
        env=[kubernetes.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()],
        volume_mounts=[kubernetes.core.v1.VolumeMountArgs(name=k, mount_path=v) for k, v in mounts.items()],
    )


class NvidiaDriverInstaller(pulumi.ComponentResource):
    daemon_set: kubernetes.apps.v1.DaemonSet

    def __init__(self, name: str, args: NvidiaDriverInstallerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:NvidiaDriverInstaller", name, None, opts)
        labels = {"k8s-app": "nvidia-driver-installer"}
        affinity = required_node_affinity(
            kubernetes.core.v1.NodeSelectorRequirementArgs(
                key="cloud.google.com/gke-accelerator", operator="In", values=[args.accelerator_type]
            ),
            kubernetes.core.v1.NodeSelectorRequirementArgs(
                key="cloud.google.com/gke-gpu-driver-version", operator="DoesNotExist"
            ),
        )
        self.daemon_set = kubernetes.apps.v1.DaemonSet(
            f"{name}-ds",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                name="nvidia-driver-installer", namespace="kube-system", labels=labels
            ),
            spec=kubernetes.apps.v1.DaemonSetSpecArgs(
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
                update_strategy=kubernetes.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=kubernetes.core.v1.PodTemplateSpecArgs(
                    metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=kubernetes.core.v1.PodSpecArgs(
                        priority_class_name="system-node-critical",
                        affinity=affinity,
                        # Every taint, as in NVIDIA's manifest: a GPU node without its driver is useless whatever
                        # else taints it; the affinity above, not the GPU pool's toleration, keeps it on GPU nodes.
                        tolerations=[kubernetes.core.v1.TolerationArgs(operator="Exists")],
                        host_network=True,
                        host_pid=True,
                        volumes=[
                            _host_volume("dev", "/dev"),
                            _host_volume("nvidia-install-dir-host", INSTALL_DIR_HOST),
                            _host_volume("root-mount", "/"),
                            _host_volume("cos-tools", "/var/lib/cos-tools"),
                        ],
                        init_containers=[_installer_container()],
                        containers=[kubernetes.core.v1.ContainerArgs(name="pause", image=PAUSE_IMAGE)],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"name": self.daemon_set.metadata.name})
