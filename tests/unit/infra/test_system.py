"""The whole program for the dev and prod stacks, as `pulumi up` would receive it (mock runtime)."""

from __future__ import annotations

import pytest

from tests.support.stacks import evaluate, stack_settings
from triton_gke.offline.runtime import Plan

CLUSTER = "gcp:container/cluster:Cluster"


NODE_POOL = "gcp:container/nodePool:NodePool"


SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"


K8S_PROVIDER = "pulumi:providers:kubernetes"


PROD_REGIONS = {"us-central1", "europe-west4", "asia-east1"}


# Kubernetes components named `<kind>-<region>`, one per cluster.
REGIONAL_K8S_COMPONENTS = (
    "triton-gke:k8s:TritonServing",
    "triton-gke:k8s:LoadTest",
    "triton-gke:k8s:Monitoring",
    "triton-gke:k8s:Autoscaling",
)


def gpu_pools(plan: Plan):
    return [p for p in plan.of_type(NODE_POOL) if p.inputs["nodeConfig"].get("guestAccelerators")]


def driver_installers(plan: Plan):
    daemonsets = plan.of_type("kubernetes:apps/v1:DaemonSet")
    return [d for d in daemonsets if d.inputs["metadata"]["name"] == "nvidia-driver-installer"]


def node_accounts(plan: Plan):
    return [a for a in plan.of_type(SERVICE_ACCOUNT) if a.parent.type == "triton-gke:infra:GkeCluster"]


def region_of(plan: Plan, resource) -> str:
    """The region of the per-region component (a cluster, or a workload on one) that a resource belongs to."""
    for owner in [resource, *plan.ancestors(resource)]:
        if owner.type == "triton-gke:infra:GkeCluster":
            return owner.name.removeprefix("gke-")
        if owner.type in REGIONAL_K8S_COMPONENTS:
            return owner.name.split("-", 1)[1]
    raise AssertionError(f"{resource.name} belongs to no region")


def test_dev_is_one_region_one_spot_t4_and_disposable(dev_plan):
    (cluster,) = dev_plan.of_type(CLUSTER)
    assert cluster.inputs["location"] == "us-central1"
    assert cluster.inputs["deletionProtection"] is False
    (gpu,) = gpu_pools(dev_plan)
    assert gpu.inputs["nodeConfig"]["spot"] is True
    assert gpu.inputs["autoscaling"]["totalMaxNodeCount"] == 1
    # One GPU node at most, none at creation: the autoscaler adds it for the pending Triton pod (infra/cluster.py).
    assert gpu.inputs["autoscaling"]["totalMinNodeCount"] == 1 and gpu.inputs["initialNodeCount"] == 0


def test_prod_has_three_protected_clusters_each_in_its_region(prod_plan):
    clusters = prod_plan.of_type(CLUSTER)
    assert {c.inputs["location"] for c in clusters} == PROD_REGIONS
    assert all(c.inputs["deletionProtection"] is True for c in clusters)
    for cluster in clusters:
        assert all(zone.startswith(cluster.inputs["location"]) for zone in cluster.inputs["nodeLocations"])


@pytest.mark.parametrize("stack,regions", [("dev", 1), ("prod", 3)])
def test_resource_counts_per_region(stack, regions):
    plan = evaluate(stack)
    per_region = {
        CLUSTER: 1,
        NODE_POOL: 2,
        K8S_PROVIDER: 1,
        "gcp:compute/subnetwork:Subnetwork": 1,
        "gcp:compute/router:Router": 1,
        "gcp:compute/routerNat:RouterNat": 1,
    }
    for type_token, count in per_region.items():
        assert len(plan.of_type(type_token)) == count * regions, type_token
    assert len(node_accounts(plan)) == regions
    assert len(plan.of_type("gcp:compute/network:Network")) == 1


def test_prod_t4_pools_are_tainted_autoscaled_with_managed_drivers(prod_plan):
    pools = gpu_pools(prod_plan)
    assert {region_of(prod_plan, p) for p in pools} == PROD_REGIONS
    for pool in pools:
        node = pool.inputs["nodeConfig"]
        (accelerator,) = node["guestAccelerators"]
        assert accelerator["type"] == "nvidia-tesla-t4" and accelerator["count"] == 1
        assert accelerator["gpuDriverInstallationConfig"]["gpuDriverVersion"] == "LATEST"
        assert node["machineType"] == "n1-standard-4"
        assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
        assert pool.inputs["autoscaling"]["totalMinNodeCount"] < pool.inputs["autoscaling"]["totalMaxNodeCount"]
        assert pool.inputs["location"] == region_of(prod_plan, pool)


def test_cpu_pools_are_untainted_so_system_pods_land_there(prod_plan):
    cpu_pools = [p for p in prod_plan.of_type(NODE_POOL) if not p.inputs["nodeConfig"].get("guestAccelerators")]
    assert len(cpu_pools) == 3
    assert all(not p.inputs["nodeConfig"].get("taints") for p in cpu_pools)


def test_every_pool_runs_its_own_clusters_least_privilege_service_account(prod_plan):
    accounts = {region_of(prod_plan, a): a for a in node_accounts(prod_plan)}
    assert len({a.inputs["accountId"] for a in accounts.values()}) == 3
    for pool in prod_plan.of_type(NODE_POOL):
        email = pool.inputs["nodeConfig"]["serviceAccount"]
        assert email.startswith(accounts[region_of(prod_plan, pool)].inputs["accountId"] + "@")
        assert "compute@developer" not in email
    grants = prod_plan.of_type("gcp:projects/iAMMember:IAMMember")
    assert {g.inputs["role"] for g in grants} == {"roles/container.defaultNodeServiceAccount"}


def test_workload_identity_shielded_nodes_and_private_nodes(prod_plan):
    pool = f"{stack_settings('prod')['gcp:project']}.svc.id.goog"  # Workload Identity's pool: one per project
    for cluster in prod_plan.of_type(CLUSTER):
        assert cluster.inputs["workloadIdentityConfig"]["workloadPool"] == pool
        assert cluster.inputs["removeDefaultNodePool"] is True
        assert cluster.inputs["privateClusterConfig"]["enablePrivateNodes"] is True
        assert cluster.inputs["releaseChannel"]["channel"] == "REGULAR"
    for pool in prod_plan.of_type(NODE_POOL):
        node = pool.inputs["nodeConfig"]
        assert node["workloadMetadataConfig"]["mode"] == "GKE_METADATA"
        assert node["shieldedInstanceConfig"]["enableSecureBoot"] is True


def test_subnets_are_vpc_native_with_distinct_ranges(prod_plan):
    subnets = prod_plan.of_type("gcp:compute/subnetwork:Subnetwork")
    ranges = [s.inputs["ipCidrRange"] for s in subnets]
    ranges += [r["ipCidrRange"] for s in subnets for r in s.inputs["secondaryIpRanges"]]
    assert len(ranges) == len(set(ranges)) == 9
    assert {s.inputs["region"] for s in subnets} == PROD_REGIONS


def test_installation_disabled_deploys_the_driver_daemonset_instead_in_every_region():
    plan = evaluate("prod", gpuDriverVersion="INSTALLATION_DISABLED")
    for pool in gpu_pools(plan):
        config = pool.inputs["nodeConfig"]["guestAccelerators"][0]["gpuDriverInstallationConfig"]
        assert config["gpuDriverVersion"] == "INSTALLATION_DISABLED"
    daemonsets = driver_installers(plan)
    assert len(daemonsets) == 3
    for ds in daemonsets:
        provider = plan.by_urn(ds.provider_urn)
        assert provider is not None and provider.type == K8S_PROVIDER
        assert region_of(plan, provider) == region_of(plan, ds), "DaemonSet bound to another region's cluster"


def test_managed_drivers_never_also_get_the_daemonset(prod_plan):
    assert driver_installers(prod_plan) == []


def test_every_kubernetes_resource_is_bound_to_its_own_regions_provider():
    plan = evaluate("prod", gpuDriverVersion="INSTALLATION_DISABLED")
    k8s_resources = [r for r in plan.resources if r.type.startswith("kubernetes:") and r.custom]
    assert k8s_resources
    for resource in k8s_resources:
        provider = plan.by_urn(resource.provider_urn)
        assert provider is not None, f"{resource.name} has no explicit provider"
        assert region_of(plan, provider) == region_of(plan, resource)


def test_adding_a_region_is_a_config_edit():
    plan = evaluate("prod", regions=["us-central1", "europe-west4", "asia-east1", "us-east4"])
    assert {c.inputs["location"] for c in plan.of_type(CLUSTER)} == PROD_REGIONS | {"us-east4"}


def test_kubeconfigs_are_exported_as_secrets_and_use_the_gke_auth_plugin(dev_plan):
    providers = dev_plan.of_type(K8S_PROVIDER)
    assert providers and all(p.inputs["kubeconfig"] == "[secret]" for p in providers)
    assert set(dev_plan.outputs) >= {"clusters", "endpoints", "kubeconfigs"}


def test_a_region_refusing_its_args_fails_the_program_instead_of_hanging_it(monkeypatch):
    """The bucket's binding waits for the clusters through a deferred Output; had a region refused its args before
    handing them over, the SDK would wait for that registration forever before reporting the error. Here the
    component's bound is made tighter than the stack's, so the region refuses what the settings layer let through."""
    import signal

    from triton_gke.k8s import on_cluster_args
    from triton_gke.k8s.common import ArgsError

    monkeypatch.setitem(on_cluster_args.LIMITS, "queue_time_target_us", (1, 1000))

    def hung(*_: object) -> None:
        raise TimeoutError("the program hung instead of failing")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises(ArgsError, match="queue_time_target_us"):
            evaluate("dev")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_stack_and_the_component_share_one_queue_time_bound():
    """One bound, so the settings layer refuses (in one line, before any resource) all the component would."""
    from triton_gke.k8s.on_cluster_args import LIMITS
    from triton_gke.settings.serving import MAX_QUEUE_TIME_TARGET_MS

    assert LIMITS["queue_time_target_us"] == (1, MAX_QUEUE_TIME_TARGET_MS * 1000)
