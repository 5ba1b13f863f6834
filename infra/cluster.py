"""A regional GKE cluster with a CPU pool and a T4 pool, its kubeconfig and Kubernetes provider."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as kubernetes

from infra.naming import gcp_name
from infra.network import PODS_RANGE, SERVICES_RANGE, SubnetPlan
from k8s.nvidia_driver import NvidiaDriverInstaller, NvidiaDriverInstallerArgs
from settings.values import ClusterSettings, CpuPoolSettings, GpuPoolSettings, RegionSettings

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
POOL_ROLE_LABEL = "triton-gke/pool"
# The one predefined role GKE documents for a least-privilege node service account
# (logging, monitoring and metadata writes; no access to data or other services).
NODE_SA_ROLES = ("roles/container.defaultNodeServiceAccount",)
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True)
class GkeClusterArgs:
    project: str
    stack: str
    region: RegionSettings
    settings: ClusterSettings
    cpu_pool: CpuPoolSettings
    gpu_pool: GpuPoolSettings
    network: pulumi.Input[str]
    subnet: pulumi.Input[str]
    subnet_plan: SubnetPlan
    # Ports on which the control plane must call pods (APIService backends, webhooks) beyond 443 and 10250.
    control_plane_ports: tuple[int, ...] = ()


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
        self.cluster_name = gcp_name("triton", args.stack, args.region.name)
        self.node_service_account = self._node_service_account()
        self.cluster = self._cluster()
        self._control_plane_firewall()
        pools_depend = pulumi.ResourceOptions(parent=self, depends_on=self._node_sa_grants)
        self.cpu_pool = self._pool(
            "cpu", self._cpu_node_config(), args.cpu_pool.min_nodes, args.cpu_pool.max_nodes, pools_depend
        )
        self.gpu_pool = self._pool(
            "gpu", self._gpu_node_config(), args.gpu_pool.min_nodes, args.gpu_pool.max_nodes, pools_depend
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
            account_id=gcp_name(a.stack, "nodes", a.region.name, max_len=30),
            display_name=f"GKE nodes of {a.stack} in {a.region.name}",
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
                    for c in a.settings.master_authorized_cidrs
                ]
            )
            if a.settings.master_authorized_cidrs
            else None
        )
        return gcp.container.Cluster(
            self._name,
            name=self.cluster_name,
            project=a.project,
            location=a.region.name,
            node_locations=list(a.region.zones),
            network=a.network,
            subnetwork=a.subnet,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=PODS_RANGE, services_secondary_range_name=SERVICES_RANGE
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=str(a.subnet_plan.control_plane),
            ),
            master_authorized_networks_config=authorized,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=a.settings.release_channel),
            min_master_version=a.settings.kubernetes_version,
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
            deletion_protection=a.settings.deletion_protection,
            # GKE's deletion protection fails only when the cluster's own delete runs, after `pulumi destroy` has
            # already removed what runs on it; with Pulumi's protect, `destroy` fails in its preview, before any
            # delete (https://www.pulumi.com/docs/iac/concepts/resources/options/protect/, pulumi/pulumi#8158).
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=self._node_sa_grants, protect=a.settings.deletion_protection
            ),
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
            name=gcp_name("triton", a.stack, a.region.name, "control-plane", max_len=63),
            project=a.project,
            network=a.network,
            direction="INGRESS",
            source_ranges=[str(a.subnet_plan.control_plane)],
            target_service_accounts=[self.node_service_account.email],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in a.control_plane_ports])],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _base_node_config(self, machine_type: str, disk_size_gb: int, role: str) -> dict:
        return dict(
            machine_type=machine_type,
            disk_size_gb=disk_size_gb,
            disk_type="pd-balanced",
            image_type="COS_CONTAINERD",
            service_account=self.node_service_account.email,
            # Access is governed by IAM roles on the service account, not by legacy scopes.
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            labels={POOL_ROLE_LABEL: role},
            metadata={"disable-legacy-endpoints": "true"},
            shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_integrity_monitoring=True
            ),
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        )

    def _cpu_node_config(self) -> gcp.container.NodePoolNodeConfigArgs:
        return gcp.container.NodePoolNodeConfigArgs(
            **self._base_node_config(self._args.cpu_pool.machine_type, 100, "cpu")
        )

    def _gpu_node_config(self) -> gcp.container.NodePoolNodeConfigArgs:
        gpu = self._args.gpu_pool
        return gcp.container.NodePoolNodeConfigArgs(
            **self._base_node_config(gpu.machine_type, gpu.disk_size_gb, "gpu"),
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
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(**GPU_TAINT)],
        )

    def _pool(
        self,
        role: str,
        node_config: gcp.container.NodePoolNodeConfigArgs,
        min_nodes: int,
        max_nodes: int,
        opts: pulumi.ResourceOptions,
    ) -> gcp.container.NodePool:
        zones = len(self._args.region.zones)
        return gcp.container.NodePool(
            f"{self._name}-{role}",
            project=self._args.project,
            cluster=self.cluster.name,
            location=self._args.region.name,
            # Per zone at creation; the autoscaler then keeps the pool-wide total within limits.
            initial_node_count=math.ceil(min_nodes / zones),
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=min_nodes,
                total_max_node_count=max_nodes,
                # ANY: scale up wherever capacity exists, which rides out per-zone T4 stock-outs.
                location_policy="ANY",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=node_config,
            opts=opts,
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
