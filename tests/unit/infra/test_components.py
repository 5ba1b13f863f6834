"""Each component alone, under the mock runtime."""

from __future__ import annotations

from tests.support.stacks import evaluate_component
from triton_gke.infra.cluster import GkeCluster, GkeClusterArgs, GpuNodePoolArgs, NodePoolArgs, build_kubeconfig
from triton_gke.infra.network import Network, NetworkArgs, SubnetPlan
from triton_gke.k8s.nvidia_driver import NvidiaDriverInstaller, NvidiaDriverInstallerArgs
from triton_gke.settings.values import RegionSettings

US = RegionSettings(name="us-central1", zones=("us-central1-a", "us-central1-b"), index=30)
EU = RegionSettings(name="europe-west4", zones=("europe-west4-a",), index=17)
GPU_POOL = GpuNodePoolArgs(
    machine_type="n1-standard-4",
    accelerator_type="nvidia-tesla-t4",
    accelerator_count=1,
    min_nodes=0,
    max_nodes=4,
    spot=True,
    disk_size_gb=100,
    driver_version="LATEST",
)


def cluster_args(gpu_pool: GpuNodePoolArgs = GPU_POOL) -> GkeClusterArgs:
    return GkeClusterArgs(
        project="demo-project",
        stack="test",
        region="us-central1",
        zones=("us-central1-a", "us-central1-b"),
        network="vpc",
        subnet="subnet",
        pods_range="pods",
        services_range="services",
        control_plane_cidr="172.16.30.0/28",
        release_channel="STABLE",
        kubernetes_version="1.33",
        deletion_protection=False,
        master_authorized_cidrs=("203.0.113.0/24",),
        cpu_pool=NodePoolArgs("e2-standard-4", 1, 2),
        gpu_pool=gpu_pool,
    )


def test_network_has_a_subnet_router_and_nat_per_region():
    plan = evaluate_component(lambda: Network("net", NetworkArgs(regions=(US, EU))))
    subnets = {s.inputs["region"]: s for s in plan.of_type("gcp:compute/subnetwork:Subnetwork")}
    assert set(subnets) == {"us-central1", "europe-west4"}
    assert subnets["us-central1"].inputs["ipCidrRange"] == "10.30.0.0/20"
    assert {r["rangeName"] for r in subnets["europe-west4"].inputs["secondaryIpRanges"]} == {"pods", "services"}
    assert len(plan.of_type("gcp:compute/routerNat:RouterNat")) == 2
    (vpc,) = plan.of_type("gcp:compute/network:Network")
    assert vpc.inputs["autoCreateSubnetworks"] is False
    assert all(r.parent is not None for r in plan.resources if r.custom), "every child has parent=self"


def test_subnet_plan_depends_on_the_region_not_its_position():
    assert SubnetPlan.for_region(US) == SubnetPlan.for_region(RegionSettings("us-central1", (), 30))
    assert SubnetPlan.for_region(US).pods != SubnetPlan.for_region(EU).pods


def test_cluster_alone_owns_pools_account_and_provider():
    plan = evaluate_component(lambda: GkeCluster("gke-test", cluster_args()))
    (cluster,) = plan.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["releaseChannel"]["channel"] == "STABLE"
    assert cluster.inputs["masterAuthorizedNetworksConfig"]["cidrBlocks"][0]["cidrBlock"] == "203.0.113.0/24"
    assert cluster.inputs["nodeConfig"]["serviceAccount"].startswith("test-nodes-us-central1@")
    pools = plan.of_type("gcp:container/nodePool:NodePool")
    gpu = next(p for p in pools if p.name == "gke-test-gpu")
    assert gpu.inputs["initialNodeCount"] == 0 and gpu.inputs["autoscaling"]["locationPolicy"] == "ANY"
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert provider.parent.type == "triton-gke:infra:GkeCluster"
    # The provider waits for both node pools, so no workload is applied to a cluster without nodes.
    assert {p.urn for p in pools} <= set(provider.dependencies)
    assert plan.of_type("kubernetes:apps/v1:DaemonSet") == []


def test_kubeconfig_uses_the_gke_auth_plugin_not_a_token():
    config = build_kubeconfig("c1", "203.0.113.10", "Q0E=")
    assert '"command": "gke-gcloud-auth-plugin"' in config
    assert '"server": "https://203.0.113.10"' in config
    assert "token" not in config


def test_driver_installer_avoids_nodes_whose_driver_gke_manages():
    plan = evaluate_component(
        lambda: NvidiaDriverInstaller("drv", NvidiaDriverInstallerArgs(accelerator_type="nvidia-tesla-t4"))
    )
    (ds,) = plan.of_type("kubernetes:apps/v1:DaemonSet")
    assert ds.inputs["metadata"]["namespace"] == "kube-system"
    terms = ds.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    expressions = {e["key"]: e for e in terms[0]["matchExpressions"]}
    assert expressions["cloud.google.com/gke-gpu-driver-version"]["operator"] == "DoesNotExist"
    assert expressions["cloud.google.com/gke-accelerator"]["values"] == ["nvidia-tesla-t4"]
