"""The stack's settings mapped onto GkeCluster's plain arguments (the component itself knows no settings types)."""

from __future__ import annotations

import pulumi

from triton_gke.infra.cluster import (
    GkeClusterArgs,
    GpuNodePoolArgs,
    MaintenanceExclusionArgs,
    MaintenancePolicyArgs,
    NodePoolArgs,
)
from triton_gke.infra.network import PODS_RANGE, SERVICES_RANGE, SubnetPlan
from triton_gke.settings.values import ClusterSettings, CpuPoolSettings, GpuPoolSettings, RegionSettings


def gke_cluster_args(
    *,
    project: str,
    stack: str,
    region: RegionSettings,
    cluster: ClusterSettings,
    cpu_pool: CpuPoolSettings,
    gpu_pool: GpuPoolSettings,
    network: pulumi.Input[str],
    subnet: pulumi.Input[str],
    subnet_plan: SubnetPlan,
    control_plane_ports: tuple[int, ...] = (),
    triton_startup_minutes: int = 40,
    triton_termination_grace_s: int = 15,
) -> GkeClusterArgs:
    """GkeClusterArgs for one region of the stack, on the subnet the Network component made for it."""
    return GkeClusterArgs(
        project=project,
        stack=stack,
        region=region.name,
        zones=tuple(region.zones),
        network=network,
        subnet=subnet,
        pods_range=PODS_RANGE,
        services_range=SERVICES_RANGE,
        control_plane_cidr=str(subnet_plan.control_plane),
        release_channel=cluster.release_channel,
        kubernetes_version=cluster.kubernetes_version,
        deletion_protection=cluster.deletion_protection,
        master_authorized_cidrs=tuple(cluster.master_authorized_cidrs),
        maintenance=MaintenancePolicyArgs(
            # Each region its own window (settings/maintenance.py): GKE upgrades one region at a time.
            start_time=cluster.maintenance.window(region.name).start_time,
            end_time=cluster.maintenance.window(region.name).end_time,
            recurrence=cluster.maintenance.window(region.name).recurrence,
            exclusions=tuple(
                MaintenanceExclusionArgs(name=e.name, start_time=e.start_time, end_time=e.end_time, scope=e.scope)
                for e in cluster.maintenance.exclusions
            ),
        ),
        protect_gpu_pool=cluster.protect_gpu_pool,
        cpu_pool=NodePoolArgs(
            machine_type=cpu_pool.machine_type, min_nodes=cpu_pool.min_nodes, max_nodes=cpu_pool.max_nodes
        ),
        gpu_pool=GpuNodePoolArgs(
            machine_type=gpu_pool.machine_type,
            accelerator_type=gpu_pool.accelerator_type,
            accelerator_count=gpu_pool.accelerator_count,
            min_nodes=gpu_pool.min_nodes,
            max_nodes=gpu_pool.max_nodes,
            spot=gpu_pool.spot,
            disk_size_gb=gpu_pool.disk_size_gb,
            driver_version=gpu_pool.driver_version,
            pod_startup_minutes=triton_startup_minutes,
            pod_termination_grace_s=triton_termination_grace_s,
        ),
        control_plane_ports=control_plane_ports,
    )
