"""GkeCluster's plain arguments: the stack's settings reach them unchanged, bad values are refused in one line
naming the field, and the cluster and pools the component declares follow them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import evaluate_component
from triton_gke.contracts.placement import (
    CPU_POOL,
    GPU_POOL,
    GPU_TAINT_EFFECT_GKE,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    POOL_LABEL,
)
from triton_gke.infra.cluster import GPU_DRIVER_VERSIONS, GkeCluster, GkeClusterArgs, GpuNodePoolArgs, NodePoolArgs
from triton_gke.infra.cluster_args import gke_cluster_args
from triton_gke.infra.network import PODS_RANGE, SERVICES_RANGE, SubnetPlan
from triton_gke.settings.cluster import RELEASE_CHANNELS
from triton_gke.settings.values import ClusterSettings, CpuPoolSettings, GpuPoolSettings, RegionSettings

NODE_POOL = "gcp:container/nodePool:NodePool"
CIDRS = ["203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"]


@st.composite
def regions(draw: st.DrawFn) -> RegionSettings:
    name = draw(st.sampled_from(["us-central1", "europe-west4", "asia-east1"]))
    zones = draw(st.lists(st.sampled_from("abcf"), min_size=1, max_size=4, unique=True))
    return RegionSettings(name, tuple(f"{name}-{z}" for z in zones), draw(st.integers(0, 63)))


@st.composite
def cpu_pools(draw: st.DrawFn) -> CpuPoolSettings:
    low = draw(st.integers(0, 12))
    return CpuPoolSettings(
        draw(st.sampled_from(["e2-standard-4", "n1-standard-8"])), low, draw(st.integers(max(low, 1), 1000))
    )


@st.composite
def gpu_pools(draw: st.DrawFn) -> GpuPoolSettings:
    low = draw(st.integers(0, 12))
    return GpuPoolSettings(
        machine_type=draw(st.sampled_from(["n1-standard-4", "n1-highmem-8"])),
        accelerator_type="nvidia-tesla-t4",
        accelerator_count=draw(st.sampled_from([1, 2, 4])),
        min_nodes=low,
        max_nodes=draw(st.integers(max(low, 1), 1000)),
        spot=draw(st.booleans()),
        disk_size_gb=draw(st.integers(10, 65536)),
        driver_version=draw(st.sampled_from(GPU_DRIVER_VERSIONS)),
    )


clusters = st.builds(
    ClusterSettings,
    release_channel=st.sampled_from(RELEASE_CHANNELS),
    kubernetes_version=st.integers(25, 37).map(lambda minor: f"1.{minor}"),
    deletion_protection=st.booleans(),
    master_authorized_cidrs=st.lists(st.sampled_from(CIDRS), unique=True, max_size=3).map(tuple),
)


def args_for(
    region: RegionSettings, cluster: ClusterSettings, cpu: CpuPoolSettings, gpu: GpuPoolSettings
) -> GkeClusterArgs:
    return gke_cluster_args(
        project="demo-project",
        stack="test",
        region=region,
        cluster=cluster,
        cpu_pool=cpu,
        gpu_pool=gpu,
        network="vpc",
        subnet="subnet",
        subnet_plan=SubnetPlan.for_region(region),
        control_plane_ports=(6443,),
    )


@settings(max_examples=60, deadline=None)
@given(region=regions(), cluster=clusters, cpu=cpu_pools(), gpu=gpu_pools())
def test_every_setting_reaches_the_plain_args(
    region: RegionSettings, cluster: ClusterSettings, cpu: CpuPoolSettings, gpu: GpuPoolSettings
) -> None:
    args = args_for(region, cluster, cpu, gpu)
    assert (args.region, args.zones) == (region.name, region.zones)
    assert (args.pods_range, args.services_range) == (PODS_RANGE, SERVICES_RANGE)
    assert args.control_plane_cidr == str(SubnetPlan.for_region(region).control_plane)
    assert (args.release_channel, args.kubernetes_version) == (cluster.release_channel, cluster.kubernetes_version)
    assert args.deletion_protection is cluster.deletion_protection
    assert args.master_authorized_cidrs == cluster.master_authorized_cidrs
    assert args.cpu_pool == NodePoolArgs(cpu.machine_type, cpu.min_nodes, cpu.max_nodes)
    assert args.gpu_pool == GpuNodePoolArgs(
        gpu.machine_type,
        gpu.accelerator_type,
        gpu.accelerator_count,
        gpu.min_nodes,
        gpu.max_nodes,
        gpu.spot,
        gpu.disk_size_gb,
        gpu.driver_version,
    )
    assert args.gpu_pool.gke_installs_driver is gpu.gke_installs_driver
    assert args.control_plane_ports == (6443,)


@settings(max_examples=25, deadline=None)
@given(region=regions(), cluster=clusters, cpu=cpu_pools(), gpu=gpu_pools())
def test_the_cluster_and_pools_follow_the_args(
    region: RegionSettings, cluster: ClusterSettings, cpu: CpuPoolSettings, gpu: GpuPoolSettings
) -> None:
    plan = evaluate_component(lambda: GkeCluster("gke-test", args_for(region, cluster, cpu, gpu)))
    (gke,) = plan.of_type("gcp:container/cluster:Cluster")
    assert gke.inputs["location"] == region.name and gke.inputs["nodeLocations"] == list(region.zones)
    assert gke.inputs["releaseChannel"]["channel"] == cluster.release_channel
    assert gke.inputs["minMasterVersion"] == cluster.kubernetes_version
    assert (
        gke.inputs["deletionProtection"] is cluster.deletion_protection and gke.protect is cluster.deletion_protection
    )
    blocks = (gke.inputs.get("masterAuthorizedNetworksConfig") or {}).get("cidrBlocks", [])
    assert [b["cidrBlock"] for b in blocks] == list(cluster.master_authorized_cidrs)
    pools = {p.inputs["nodeConfig"]["labels"][POOL_LABEL]: p for p in plan.of_type(NODE_POOL)}
    assert set(pools) == {CPU_POOL, GPU_POOL}
    for role, pool_settings in ((CPU_POOL, cpu), (GPU_POOL, gpu)):
        pool = pools[role]
        # GPU pools start empty (a T4 stock-out in one zone cannot fail the first `up`: infra/cluster.py).
        initial = 0 if role == GPU_POOL else math.ceil(pool_settings.min_nodes / len(region.zones))
        assert pool.inputs["initialNodeCount"] == initial
        assert pool.inputs["autoscaling"]["totalMinNodeCount"] == pool_settings.min_nodes
        assert pool.inputs["autoscaling"]["totalMaxNodeCount"] == pool_settings.max_nodes
        assert pool.inputs["nodeConfig"]["machineType"] == pool_settings.machine_type
    assert not pools[CPU_POOL].inputs["nodeConfig"].get("taints")
    node = pools[GPU_POOL].inputs["nodeConfig"]
    assert node["taints"] == [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT_GKE}]
    assert (node["spot"], node["diskSizeGb"]) == (gpu.spot, gpu.disk_size_gb)
    (accelerator,) = node["guestAccelerators"]
    assert (accelerator["type"], accelerator["count"]) == (gpu.accelerator_type, gpu.accelerator_count)
    assert accelerator["gpuDriverInstallationConfig"]["gpuDriverVersion"] == gpu.driver_version
    installers = plan.of_type("kubernetes:apps/v1:DaemonSet")
    assert len(installers) == (0 if gpu.gke_installs_driver else 1)


def one_line_refusal(build: object, field: str) -> None:
    with pytest.raises(ValueError) as refused:
        build()  # type: ignore[operator]
    message = str(refused.value)
    assert message.startswith(f"{field}: ") and "\n" not in message


@settings(max_examples=40, deadline=None)
@given(min_nodes=st.integers(max_value=-1), driver=st.text(max_size=30).filter(lambda d: d not in GPU_DRIVER_VERSIONS))
def test_bad_pool_values_are_refused_in_one_line_naming_the_field(min_nodes: int, driver: str) -> None:
    one_line_refusal(lambda: NodePoolArgs("e2-standard-4", min_nodes, 3), "min_nodes")
    gpu = dict(machine_type="n1-standard-4", accelerator_type="nvidia-tesla-t4", accelerator_count=1)
    rest = dict(max_nodes=3, spot=False, disk_size_gb=100)
    one_line_refusal(lambda: GpuNodePoolArgs(**gpu, min_nodes=min_nodes, **rest, driver_version="LATEST"), "min_nodes")
    one_line_refusal(lambda: GpuNodePoolArgs(**gpu, min_nodes=0, **rest, driver_version=driver), "driver_version")


def test_a_cluster_without_zones_is_refused_before_anything_is_declared() -> None:
    region = RegionSettings("us-central1", (), 30)
    cluster = ClusterSettings("STABLE", "1.33", False, ())
    cpu = CpuPoolSettings("e2-standard-4", 1, 2)
    gpu = GpuPoolSettings("n1-standard-4", "nvidia-tesla-t4", 1, 0, 1, True, 100, "LATEST")
    one_line_refusal(lambda: args_for(region, cluster, cpu, gpu), "zones")
