"""A regional GKE cluster with a CPU pool and a T4 pool, its kubeconfig and Kubernetes provider.

Its arguments are plain values and Pulumi Inputs, not the stack's settings types (as pulumi-eks' ClusterArgs,
https://www.pulumi.com/registry/packages/eks/api-docs/cluster/, and pulumi/examples' gcp-py-gke take them), so the
component could be packaged on its own; infra/cluster_args.py maps a stack's settings onto them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as kubernetes

from triton_gke.infra.naming import gcp_name
from triton_gke.infra.node_recreation import (
    DEFAULT_POD_STARTUP_MINUTES,
    KUBERNETES_DEFAULT_GRACE_S,
    RecreationEstimate,
    estimate,
)
from triton_gke.k8s.common import CPU_NODES, GPU_NODES, NodePoolPlacement
from triton_gke.k8s.nvidia_driver import NvidiaDriverInstaller, NvidiaDriverInstallerArgs

# GKE's NodeTaint enum spells Kubernetes' effects differently
# (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeTaint: NO_SCHEDULE, PREFER_NO_SCHEDULE,
# NO_EXECUTE; https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/: NoSchedule, ...).
GKE_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
# gpu_driver_installation_config.gpu_driver_version: GKE installs the driver for DEFAULT and LATEST; with
# INSTALLATION_DISABLED "needs manual installation" (GPUDriverInstallationConfig.GPUDriverVersion,
# https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig#gpudriverversion).
GPU_DRIVER_VERSIONS = ("DEFAULT", "LATEST", "INSTALLATION_DISABLED")
# The one predefined role GKE documents for a least-privilege node service account
# (logging, monitoring and metadata writes; no access to data or other services).
NODE_SA_ROLES = ("roles/container.defaultNodeServiceAccount",)
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# The cluster's node_config describes only the default pool, which remove_default_node_pool deletes at once: the
# provider then reads the cluster back without it, and node_config forces a new cluster, so without this every later
# `pulumi up` would replace every cluster (hashicorp/terraform-provider-google#12070, #17511;
# GoogleCloudPlatform/cloud-foundation-fabric#1275, fixed the same way). Kept, not dropped: the short-lived default
# pool still runs as the least-privilege node account, not the Compute Engine default one.
CLUSTER_READ_BACK_DIFFERENTLY = ("nodeConfig",)
# initial_node_count forces a new node pool (hashicorp/terraform-provider-google#6354, pulumi/pulumi-gcp#412): it
# only matters at creation, so a later change of gpuMinNodes, cpuMinNodes or the zone count must not replace a pool.
POOL_READ_BACK_DIFFERENTLY = ("initialNodeCount",)
# Every zone starting with a GPU node makes the first `up` fail on any zone's T4 stock-out (node pool creation needs
# all its initial nodes: hashicorp/terraform-provider-google#10823, kubernetes/k8s.io#9834). From zero, the cluster
# autoscaler adds GPU nodes for the pending Triton pods in whichever zone has capacity (location_policy ANY).
GPU_POOL_INITIAL_NODES_PER_ZONE = 0


@dataclass(frozen=True)
class NodePoolArgs:
    """A CPU pool: its machine shape, boot disk and autoscaling bounds (pool-wide totals across the cluster's zones)."""

    machine_type: pulumi.Input[str]
    # Plain: the pool's initial node count per zone is computed from it.
    min_nodes: int
    max_nodes: pulumi.Input[int]
    disk_size_gb: pulumi.Input[int] = 100
    # The slowest pod the pool runs: minutes to Ready, seconds to stop (Kubernetes' default grace, 30 s). With a plain
    # max_nodes they size the pool's timeouts for recreating every node (infra/node_recreation.py).
    pod_startup_minutes: int = DEFAULT_POD_STARTUP_MINUTES
    pod_termination_grace_s: int = KUBERNETES_DEFAULT_GRACE_S

    def __post_init__(self) -> None:
        _check_min_nodes(self.min_nodes)


@dataclass(frozen=True)
class GpuNodePoolArgs:
    """The GPU pool: machine shape, accelerators per node, autoscaling bounds, spot, boot disk and driver."""

    machine_type: pulumi.Input[str]
    accelerator_type: str
    accelerator_count: pulumi.Input[int]
    min_nodes: int
    max_nodes: pulumi.Input[int]
    spot: pulumi.Input[bool]
    disk_size_gb: pulumi.Input[int]
    # Plain: it decides whether the cluster deploys the driver installer.
    driver_version: str
    # Triton's startup budget and grace period (tritonStartupMinutes, tritonTerminationGraceSeconds): with a plain
    # max_nodes they size the pool's timeouts for recreating every node (infra/node_recreation.py).
    pod_startup_minutes: int = 40
    pod_termination_grace_s: int = 15

    def __post_init__(self) -> None:
        _check_min_nodes(self.min_nodes)
        if self.driver_version not in GPU_DRIVER_VERSIONS:
            raise ValueError(f"driver_version: {self.driver_version!r} is not one of {', '.join(GPU_DRIVER_VERSIONS)}")

    @property
    def gke_installs_driver(self) -> bool:
        return self.driver_version != "INSTALLATION_DISABLED"


@dataclass(frozen=True)
class MaintenanceExclusionArgs:
    """A time GKE must not start the upgrades `scope` names (NO_UPGRADES, NO_MINOR_UPGRADES, ...)."""

    name: str
    start_time: str
    end_time: str
    scope: str


@dataclass(frozen=True)
class MaintenancePolicyArgs:
    """GKE's recurring maintenance window (RFC3339 UTC times, an RFC5545 RRULE) and its exclusions."""

    start_time: str
    end_time: str
    recurrence: str
    exclusions: tuple[MaintenanceExclusionArgs, ...] = ()


# Node pool upgrades (GKE "Ensure resources for node upgrades",
# https://cloud.google.com/kubernetes-engine/docs/how-to/node-upgrades-quota): a surge upgrade with maxSurge above
# zero creates extra VMs "before draining and deleting old nodes", which count against the project's quota, and an
# upgrade whose surge nodes cannot be created does not proceed. A T4 pool sized to its GPU quota (docs: quota is
# gpuMaxNodes x gpuAcceleratorCount per region) has no spare T4, so the GPU pool upgrades in place, one node at a
# time: maxSurge 0, maxUnavailable 1 (the node is drained, honouring Triton's PodDisruptionBudget, then recreated).
# The CPU pool keeps one surge node: CPU quota is not the constraint, and its pods move before a node goes.
# Both are updated in place (upgrade_settings: no ForceNew, nodePoolUpdate sends it on HasChange; terraform-provider-
# google-beta resource_container_node_pool.go at 3dc173a397749158369ea839a2890d89f8c9c370).
GPU_POOL_UPGRADE = {"max_surge": 0, "max_unavailable": 1}
CPU_POOL_UPGRADE = {"max_surge": 1, "max_unavailable": 0}


@dataclass(frozen=True)
class GkeClusterArgs:
    # Plain: it names the Workload Identity pool (PROJECT.svc.id.goog).
    project: str
    # Plain: stack and region name the cluster and its node service account.
    stack: str
    region: str
    # Plain: a pool's initial per-zone node count divides by their number.
    zones: tuple[str, ...]
    network: pulumi.Input[str]
    subnet: pulumi.Input[str]
    # The subnet's secondary ranges for pods and services (VPC-native), and the control plane's /28.
    pods_range: pulumi.Input[str]
    services_range: pulumi.Input[str]
    control_plane_cidr: pulumi.Input[str]
    release_channel: pulumi.Input[str]
    kubernetes_version: pulumi.Input[str]
    # Plain: also sets Pulumi's protect option, which must be known when the cluster is declared.
    deletion_protection: bool
    cpu_pool: NodePoolArgs
    gpu_pool: GpuNodePoolArgs
    # Plain: no authorized-networks block at all when empty.
    master_authorized_cidrs: tuple[str, ...] = ()
    # Ports on which the control plane must call pods (APIService backends, webhooks) beyond 443 and 10250.
    control_plane_ports: tuple[int, ...] = ()
    # When GKE may upgrade the cluster; None leaves GKE's default (any time).
    maintenance: MaintenancePolicyArgs | None = None
    # Plain: Pulumi's protect on the GPU pool, which must be known when the pool is declared. Pulumi then fails any
    # update that would delete or replace the pool (a driver, Spot or accelerator change forces a new pool).
    protect_gpu_pool: bool = False

    def __post_init__(self) -> None:
        if not self.zones:
            raise ValueError(f"zones: the cluster in {self.region} needs at least one zone")


def _check_min_nodes(min_nodes: int) -> None:
    if min_nodes < 0:
        raise ValueError(f"min_nodes: {min_nodes} is negative")


class GkeCluster(pulumi.ComponentResource):
    """Owns the cluster, its node pools and node service account, and exposes kubeconfig and provider."""

    cluster: gcp.container.Cluster
    cpu_pool: gcp.container.NodePool
    gpu_pool: gcp.container.NodePool
    node_service_account: gcp.serviceaccount.Account
    kubeconfig: pulumi.Output[str]
    provider: kubernetes.Provider
    # Known before creation: also names per-cluster cloud objects such as the Triton NEGs.
    cluster_name: str

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:GkeCluster", name, None, opts)
        self._name = name
        self._args = args
        self.cluster_name = gcp_name("triton", args.stack, args.region)
        self.node_service_account = self._node_service_account()
        self.cluster = self._cluster()
        self._control_plane_firewall()
        pools_depend = pulumi.ResourceOptions(parent=self, depends_on=self._node_sa_grants)
        cpu, gpu = args.cpu_pool, args.gpu_pool
        self.cpu_pool = self._pool(
            "cpu", self._cpu_node_config(), math.ceil(cpu.min_nodes / len(args.zones)), cpu, pools_depend
        )
        # No GPU node at creation: pending Triton pods make the autoscaler add them wherever a zone has T4s.
        # Protected (protect_gpu_pool): "Pulumi will fail any deployment that would delete" a protected resource, a
        # replacement included (https://www.pulumi.com/docs/iac/operations/stack-management/
        # protecting-against-undesired-changes/); setting protect false in the same update lets the replacement
        # through (pulumi/pulumi#8873), which is what allowGpuPoolReplacement does.
        self.gpu_pool = self._pool(
            "gpu",
            self._gpu_node_config(),
            GPU_POOL_INITIAL_NODES_PER_ZONE,
            gpu,
            pulumi.ResourceOptions.merge(pools_depend, pulumi.ResourceOptions(protect=args.protect_gpu_pool)),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
            ).apply(lambda parts: build_kubeconfig(*parts))
        )
        self.provider = kubernetes.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Workloads need nodes: the provider (and so every k8s resource) waits for both pools.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cpu_pool, self.gpu_pool]),
        )
        # Kept here, not composed in __main__: the cluster owns what makes its GPU nodes usable, and the pool's
        # driver_version alone decides between GKE's install and this one, never both, never neither.
        if not args.gpu_pool.gke_installs_driver:
            NvidiaDriverInstaller(
                f"{name}-nvidia-driver",
                NvidiaDriverInstallerArgs(accelerator_type=args.gpu_pool.accelerator_type),
                opts=pulumi.ResourceOptions(parent=self, providers=[self.provider]),
            )
        self.register_outputs(
            {
                "clusterName": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "kubeconfig": self.kubeconfig,
                "nodeServiceAccount": self.node_service_account.email,
            }
        )

    def _node_service_account(self) -> gcp.serviceaccount.Account:
        a = self._args
        account = gcp.serviceaccount.Account(
            f"{self._name}-nodes",
            account_id=gcp_name(a.stack, "nodes", a.region, max_len=30),
            display_name=f"GKE nodes of {a.stack} in {a.region}",
            project=a.project,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self._node_sa_grants = [
            gcp.projects.IAMMember(
                f"{self._name}-nodes-{role.split('/')[-1]}",
                project=a.project,
                role=role,
                member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in NODE_SA_ROLES
        ]
        return account

    def _cluster(self) -> gcp.container.Cluster:
        a = self._args
        authorized = (
            gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=c, display_name=c)
                    for c in a.master_authorized_cidrs
                ]
            )
            if a.master_authorized_cidrs
            else None
        )
        return gcp.container.Cluster(
            self._name,
            name=self.cluster_name,
            project=a.project,
            location=a.region,
            node_locations=list(a.zones),
            network=a.network,
            subnetwork=a.subnet,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=a.pods_range, services_secondary_range_name=a.services_range
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=a.control_plane_cidr,
            ),
            master_authorized_networks_config=authorized,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=a.release_channel),
            maintenance_policy=self._maintenance_policy(),
            min_master_version=a.kubernetes_version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{a.project}.svc.id.goog"
            ),
            # Dataplane V2 enforces NetworkPolicy without an extra add-on.
            datapath_provider="ADVANCED_DATAPATH",
            enable_shielded_nodes=True,
            # The default pool would run on the default compute service account: drop it at once.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=self.node_service_account.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            ),
            deletion_protection=a.deletion_protection,
            # GKE's deletion protection fails only when the cluster's own delete runs, after `pulumi destroy` has
            # already removed what runs on it; with Pulumi's protect, `destroy` fails in its preview, before any
            # delete (https://www.pulumi.com/docs/iac/concepts/resources/options/protect/, pulumi/pulumi#8158).
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=self._node_sa_grants,
                protect=a.deletion_protection,
                ignore_changes=list(CLUSTER_READ_BACK_DIFFERENTLY),
            ),
        )

    def _maintenance_policy(self) -> gcp.container.ClusterMaintenancePolicyArgs | None:
        """The recurring window and exclusions (settings/maintenance.py checks GKE's rules); updated in place
        (maintenance_policy has no ForceNew; resourceContainerClusterUpdate calls SetMaintenancePolicy on HasChange,
        terraform-provider-google-beta resource_container_cluster.go at 3dc173a397749158369ea839a2890d89f8c9c370)."""
        policy = self._args.maintenance
        if policy is None:
            return None
        return gcp.container.ClusterMaintenancePolicyArgs(
            recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                start_time=policy.start_time, end_time=policy.end_time, recurrence=policy.recurrence
            ),
            maintenance_exclusions=[
                gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name=e.name,
                    start_time=e.start_time,
                    end_time=e.end_time,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope=e.scope
                    ),
                )
                for e in policy.exclusions
            ]
            or None,
        )

    def _control_plane_firewall(self) -> None:
        """Let the control plane reach pods on `control_plane_ports` (the metrics adapter's 6443).

        A private cluster's control plane reaches nodes only on 443 and 10250 until a rule opens more
        (https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#add_firewall_rules); the
        APIService of an adapter on 6443 otherwise fails discovery (kubernetes-sigs/prometheus-adapter#534).
        The source is this cluster's masterIpv4CidrBlock; the target its nodes (by service account), which
        covers their pods' alias IPs, as in the documented fix for webhooks on pods
        (https://cert-manager.io/docs/installation/compatibility/#gke, GKE link above).
        """
        a = self._args
        if not a.control_plane_ports:
            return
        gcp.compute.Firewall(
            f"{self._name}-control-plane-to-pods",
            name=gcp_name("triton", a.stack, a.region, "control-plane", max_len=63),
            project=a.project,
            network=a.network,
            direction="INGRESS",
            source_ranges=[a.control_plane_cidr],
            target_service_accounts=[self.node_service_account.email],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in a.control_plane_ports])],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _base_node_config(
        self, machine_type: pulumi.Input[str], disk_size_gb: pulumi.Input[int], placement: NodePoolPlacement
    ) -> dict:
        return dict(
            machine_type=machine_type,
            disk_size_gb=disk_size_gb,
            disk_type="pd-balanced",
            image_type="COS_CONTAINERD",
            service_account=self.node_service_account.email,
            # Access is governed by IAM roles on the service account, not by legacy scopes.
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            # GKE copies node_config.labels onto each node as Kubernetes labels: pods select the pool by them.
            labels=placement.node_labels,
            metadata={"disable-legacy-endpoints": "true"},
            shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_integrity_monitoring=True
            ),
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        )

    def _cpu_node_config(self) -> gcp.container.NodePoolNodeConfigArgs:
        cpu = self._args.cpu_pool
        return gcp.container.NodePoolNodeConfigArgs(
            **self._base_node_config(cpu.machine_type, cpu.disk_size_gb, CPU_NODES)
        )

    def _gpu_node_config(self) -> gcp.container.NodePoolNodeConfigArgs:
        gpu = self._args.gpu_pool
        return gcp.container.NodePoolNodeConfigArgs(
            **self._base_node_config(gpu.machine_type, gpu.disk_size_gb, GPU_NODES),
            spot=gpu.spot,
            guest_accelerators=[
                gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=gpu.accelerator_type,
                    count=gpu.accelerator_count,
                    gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version=gpu.driver_version
                    ),
                )
            ],
            taints=[gke_taint(GPU_NODES)],
        )

    def _pool(
        self,
        role: str,
        node_config: gcp.container.NodePoolNodeConfigArgs,
        initial_nodes_per_zone: int,
        bounds: NodePoolArgs | GpuNodePoolArgs,
        opts: pulumi.ResourceOptions,
    ) -> gcp.container.NodePool:
        return gcp.container.NodePool(
            f"{self._name}-{role}",
            project=self._args.project,
            cluster=self.cluster.name,
            location=self._args.region,
            # Per zone, at creation only (ignored afterwards, see POOL_READ_BACK_DIFFERENTLY); the autoscaler then
            # keeps the pool-wide total within the bounds.
            initial_node_count=initial_nodes_per_zone,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=bounds.min_nodes,
                total_max_node_count=bounds.max_nodes,
                # ANY: scale up wherever capacity exists, which rides out per-zone T4 stock-outs.
                location_policy="ANY",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", **(GPU_POOL_UPGRADE if role == "gpu" else CPU_POOL_UPGRADE)
            ),
            # Deleting a pool ignores PodDisruptionBudgets unless asked (GKE "About node pools": deleting a node pool
            # does not respect PDBs; node_drain_config, updated in place by resource_container_node_pool.go
            # nodePoolUpdate): with it, a replaced pool's Triton pods leave one PDB step at a time.
            node_drain_configs=[gcp.container.NodePoolNodeDrainConfigArgs(respect_pdb_during_node_pool_deletion=True)],
            node_config=node_config,
            opts=pulumi.ResourceOptions.merge(
                opts,
                pulumi.ResourceOptions(
                    ignore_changes=list(POOL_READ_BACK_DIFFERENTLY), custom_timeouts=pool_timeouts(role, bounds)
                ),
            ),
        )


def pool_recreation(role: str, bounds: NodePoolArgs | GpuNodePoolArgs) -> RecreationEstimate | None:
    """How long recreating every node of the pool may take (a machine or image type change, an upgrade); None when
    max_nodes is not a plain number."""
    if not isinstance(bounds.max_nodes, int):
        return None
    upgrade = GPU_POOL_UPGRADE if role == "gpu" else CPU_POOL_UPGRADE
    return estimate(
        bounds.max_nodes,
        upgrade["max_surge"],
        upgrade["max_unavailable"],
        bounds.pod_startup_minutes,
        bounds.pod_termination_grace_s,
    )


def pool_timeouts(role: str, bounds: NodePoolArgs | GpuNodePoolArgs) -> pulumi.CustomTimeouts | None:
    """The pool's create, update and delete timeouts: the whole recreation of its nodes, never below the provider's
    two hours. An update that recreates the nodes (machine type, image type) waits for GKE's node upgrade
    (node_config.go nodePoolNodeConfigUpdate waits on the operation with the update timeout); past it `up` fails
    while GKE carries on."""
    recreation = pool_recreation(role, bounds)
    if recreation is None:
        return None
    minutes = f"{recreation.timeout_minutes}m"
    return pulumi.CustomTimeouts(create=minutes, update=minutes, delete=minutes)


def gke_taint(placement: NodePoolPlacement) -> gcp.container.NodePoolNodeConfigTaintArgs:
    """The pool's taint as GKE's node-pool API wants it (effect in GKE's spelling, GKE_TAINT_EFFECTS)."""
    taint = placement.taint
    if taint is None:
        raise ValueError(f"node pool {placement.pool!r} has no taint")
    return gcp.container.NodePoolNodeConfigTaintArgs(
        key=taint.key, value=taint.value, effect=GKE_TAINT_EFFECTS[taint.effect]
    )


def build_kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin, never a stored token."""
    context = f"gke-{cluster_name}"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context,
                    "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
                }
            ],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "users": [
                {
                    "name": context,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "installHint": "gcloud components install gke-gcloud-auth-plugin",
                            "provideClusterInfo": True,
                        }
                    },
                }
            ],
        },
        indent=2,
    )
