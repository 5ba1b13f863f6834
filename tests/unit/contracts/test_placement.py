"""The node-pool value: the GKE pools' taint and label and the pods that tolerate or select them agree.

Toleration matching follows Kubernetes' rules (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/:
an empty key with operator Exists matches every taint, Exists matches any value, Equal (the default) the same value,
an empty effect every effect); GKE spells the effects NO_SCHEDULE... in its node-pool API
(https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeTaint).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.stacks import evaluate
from triton_gke.contracts.placement import (
    CPU_POOL,
    GPU_POOL,
    GPU_TAINT_EFFECT_GKE,
    GPU_TAINT_EFFECT_K8S,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    POOL_LABEL,
)
from triton_gke.infra.cluster import GKE_TAINT_EFFECTS, gke_taint
from triton_gke.k8s.common import CPU_NODES, GPU_NODES, TAINT_EFFECTS, NodePoolPlacement, NodeTaint
from triton_gke.offline.runtime import Plan, PlannedResource

NODE_POOL = "gcp:container/nodePool:NodePool"
# The label GKE puts on every node with a GPU (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus,
# "nodeSelector: cloud.google.com/gke-accelerator"): a pod confined to it runs on GPU nodes only.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
K8S_EFFECT = {gke: k8s for k8s, gke in GKE_TAINT_EFFECTS.items()}
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob")


def tolerates(toleration: dict[str, Any], taint: dict[str, str]) -> bool:
    """Kubernetes' rule: does this toleration match this taint (effect in the Kubernetes spelling)?"""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration["key"] != taint["key"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


def toleration_dict(args: Any) -> dict[str, Any]:
    return {k: v for k in ("key", "operator", "value", "effect") if (v := getattr(args, k)) is not None}


def pod_spec(resource: PlannedResource) -> dict[str, Any] | None:
    if not resource.custom or resource.type.rsplit(":", 1)[-1] not in WORKLOAD_KINDS:
        return None
    spec = resource.inputs["spec"]
    if "jobTemplate" in spec:  # CronJob
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def workloads(plan: Plan) -> list[tuple[PlannedResource, dict[str, Any]]]:
    return [(r, spec) for r in plan.resources if (spec := pod_spec(r)) is not None]


def cluster_region(plan: Plan, resource: PlannedResource) -> str:
    """The region of the cluster a resource lives in: a pool's parent cluster, or a workload's provider's."""
    owner = plan.by_urn(resource.provider_urn) or resource
    for r in [owner, *plan.ancestors(owner)]:
        if r.type == "triton-gke:infra:GkeCluster":
            return r.name.removeprefix("gke-")
    raise AssertionError(f"{resource.name} belongs to no cluster")


def pool_taints(pool: PlannedResource) -> list[dict[str, str]]:
    """The pool's taints in the Kubernetes spelling (as the nodes will carry them)."""
    return [{**t, "effect": K8S_EFFECT[t["effect"]]} for t in pool.inputs["nodeConfig"].get("taints", [])]


def confined_to_gpu_nodes(spec: dict[str, Any]) -> bool:
    """Whether the pod can only be scheduled on GPU nodes (by nodeSelector or required node affinity)."""
    selector = spec.get("nodeSelector", {})
    if ACCELERATOR_LABEL in selector or selector.get(POOL_LABEL) == GPU_POOL:
        return True
    required = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms", [])

    def gpu_term(term: dict[str, Any]) -> bool:
        return any(
            (e["key"] == ACCELERATOR_LABEL and e["operator"] in ("In", "Exists"))
            or (e["key"] == POOL_LABEL and e["operator"] == "In" and e["values"] == [GPU_POOL])
            for e in term.get("matchExpressions", [])
        )

    # Terms are ORed: every one of them must keep the pod on GPU nodes.
    return bool(terms) and all(gpu_term(t) for t in terms)


@pytest.fixture(
    scope="module",
    params=["dev", "staging", "prod", "dev-installation-disabled"],
)
def plan(request: pytest.FixtureRequest) -> Plan:
    if request.param == "dev":
        return request.getfixturevalue("dev_plan")
    if request.param == "prod":
        return request.getfixturevalue("prod_plan")
    if request.param == "staging":
        return evaluate("staging")
    # The driver installer DaemonSet only exists without GKE-managed drivers.
    return evaluate("dev", gpuDriverVersion="INSTALLATION_DISABLED")


def test_triton_pods_tolerate_their_clusters_gpu_pool_taint(plan: Plan) -> None:
    gpu_pools = {
        cluster_region(plan, p): p for p in plan.of_type(NODE_POOL) if p.inputs["nodeConfig"].get("guestAccelerators")
    }
    tritons = [(r, s) for r, s in workloads(plan) if r.parent and r.parent.type == "triton-gke:k8s:TritonServing"]
    assert tritons and {cluster_region(plan, r) for r, _ in tritons} == set(gpu_pools)
    for deployment, spec in tritons:
        taints = pool_taints(gpu_pools[cluster_region(plan, deployment)])
        assert taints == [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT_K8S}]
        for taint in taints:
            assert any(tolerates(t, taint) for t in spec.get("tolerations", [])), deployment.name


def test_no_workload_off_the_gpu_nodes_tolerates_the_gpu_taint(plan: Plan) -> None:
    taint = {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT_K8S}
    tolerating = []
    for resource, spec in workloads(plan):
        if any(tolerates(t, taint) for t in spec.get("tolerations", [])):
            tolerating.append(resource.name)
            assert confined_to_gpu_nodes(spec), f"{resource.name} tolerates the GPU taint but may run off GPU nodes"
    assert any(name.startswith("triton-") for name in tolerating)
    # The driver installer tolerates every taint (as NVIDIA's manifest does): its affinity must keep it on GPU nodes.
    installers = [
        d.name
        for d in plan.of_type("kubernetes:apps/v1:DaemonSet")
        if d.inputs["metadata"]["name"] == "nvidia-driver-installer"
    ]
    assert set(installers) <= set(tolerating)


def test_pool_selectors_name_a_pool_of_their_own_cluster(plan: Plan) -> None:
    labels: dict[str, set[str]] = {}
    for pool in plan.of_type(NODE_POOL):
        labels.setdefault(cluster_region(plan, pool), set()).add(pool.inputs["nodeConfig"]["labels"][POOL_LABEL])
    assert labels and all(v == {CPU_POOL, GPU_POOL} for v in labels.values())
    on_cpu_pool = 0
    for resource, spec in workloads(plan):
        wanted = spec.get("nodeSelector", {}).get(POOL_LABEL)
        if wanted is not None:
            assert wanted in labels[cluster_region(plan, resource)], resource.name
            on_cpu_pool += wanted == CPU_POOL
    assert on_cpu_pool > 0, "no workload selects the CPU pool"


def test_the_node_pool_values_are_built_from_the_placement_contract() -> None:
    assert gke_taint(GPU_NODES).effect == GPU_TAINT_EFFECT_GKE
    assert (gke_taint(GPU_NODES).key, gke_taint(GPU_NODES).value) == (GPU_TAINT_KEY, GPU_TAINT_VALUE)
    assert CPU_NODES.taint is None and CPU_NODES.node_selector == {POOL_LABEL: CPU_POOL}
    assert GPU_NODES.node_labels == {POOL_LABEL: GPU_POOL}


# ---------------------------------------------------------------- the value itself, over generated taints

LABEL_KEYS = st.from_regex(
    r"([a-z0-9]([a-z0-9.-]{0,15}[a-z0-9])?/)?[a-z0-9]([a-z0-9_.-]{0,20}[a-z0-9])?", fullmatch=True
)
LABEL_VALUES = st.from_regex(r"([a-z0-9]([a-z0-9_.-]{0,20}[a-z0-9])?)?", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(key=LABEL_KEYS, value=LABEL_VALUES, effect=st.sampled_from(TAINT_EFFECTS), pool=LABEL_VALUES.filter(bool))
def test_a_pools_toleration_matches_its_taint_and_no_other(key: str, value: str, effect: str, pool: str) -> None:
    placement = NodePoolPlacement(pool, NodeTaint(key, value, effect))
    toleration = toleration_dict(placement.toleration)
    assert tolerates(toleration, {"key": key, "value": value, "effect": effect})
    assert not tolerates(toleration, {"key": key + "x", "value": value, "effect": effect})
    for other in set(TAINT_EFFECTS) - {effect}:
        assert not tolerates(toleration, {"key": key, "value": value, "effect": other})
    gke = gke_taint(placement)
    assert (gke.key, gke.value, K8S_EFFECT[gke.effect]) == (key, value, effect)
    assert placement.node_selector == placement.node_labels == {POOL_LABEL: pool}


@settings(max_examples=40, deadline=None)
@given(effect=st.text(max_size=20).filter(lambda e: e not in TAINT_EFFECTS))
@example(effect=GPU_TAINT_EFFECT_GKE)
@example(effect="noschedule")
def test_an_effect_kubernetes_does_not_spell_is_refused_in_one_line(effect: str) -> None:
    with pytest.raises(ValueError) as refused:
        NodeTaint(GPU_TAINT_KEY, GPU_TAINT_VALUE, effect)
    message = str(refused.value)
    assert message.startswith("taint effect: ") and "NoSchedule" in message and "\n" not in message


def test_an_untainted_pool_has_nothing_to_tolerate_and_no_gke_taint() -> None:
    with pytest.raises(ValueError, match="'cpu' has no taint"):
        _ = CPU_NODES.toleration
    with pytest.raises(ValueError, match="'cpu' has no taint"):
        gke_taint(CPU_NODES)
    with pytest.raises(ValueError, match=POOL_LABEL):
        NodePoolPlacement("")


def test_both_apis_spell_the_same_three_effects() -> None:
    assert set(GKE_TAINT_EFFECTS) == set(TAINT_EFFECTS)
    assert sorted(GKE_TAINT_EFFECTS.values()) == ["NO_EXECUTE", "NO_SCHEDULE", "PREFER_NO_SCHEDULE"]
    assert GKE_TAINT_EFFECTS[GPU_TAINT_EFFECT_K8S] == GPU_TAINT_EFFECT_GKE
