"""Issue 33: no hidden scheduling assumptions. Every pod TritonOnCluster declares (Triton, Locust, Prometheus, Grafana,
prometheus-adapter, the DCGM exporter) and the NVIDIA driver installer must be schedulable on a plain GKE cluster:
nodes that carry only the labels Kubernetes and GKE put on them, and GPU nodes with GKE's own GPU taint.

A plain GKE node, as modelled here:
- the kubelet's preset labels kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os,
  node.kubernetes.io/instance-type, topology.kubernetes.io/region and topology.kubernetes.io/zone ("Node Labels
  Populated By The Kubelet", https://kubernetes.io/docs/reference/node/node-labels/);
- GKE's cloud.google.com/gke-nodepool, the pool a node belongs to (GKE's node labels,
  https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels);
- on a GPU node also cloud.google.com/gke-accelerator=TYPE ("Run GPUs in GKE Standard node pools",
  https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, selecting a GPU type with that node label) and, where
  the cluster has non-GPU pools, the taint nvidia.com/gpu with effect NoSchedule (same page: "When you add a GPU node
  pool to an existing cluster that already runs a non-GPU node pool, GKE automatically taints the GPU nodes").

A pod fits a node when every nodeSelector pair is a label of the node, one term of a required node affinity matches
it, and it tolerates each NoSchedule/NoExecute taint of the node (https://kubernetes.io/docs/concepts/scheduling-
eviction/assign-pod-node/, https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/); a pod that
asks for nvidia.com/gpu fits GPU nodes only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, stack_settings
from triton_gke.k8s.nvidia_driver import NvidiaDriverInstaller, NvidiaDriverInstallerArgs
from triton_gke.k8s.on_cluster import TritonOnCluster, TritonOnClusterArgs
from triton_gke.offline.runtime import Plan, run_under_mocks
from triton_gke.policy.policies import POD_SPEC_PATHS  # where each workload kind keeps its pod spec

REPOSITORY = "gs://team-models/triton"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Node:
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    gpus: int = 0


def plain_node(pool: str, machine: str, **extra: str) -> dict[str, str]:
    return {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": f"gke-team-{pool}-1a2b",
        "node.kubernetes.io/instance-type": machine,
        "topology.kubernetes.io/region": "us-central1",
        "topology.kubernetes.io/zone": "us-central1-a",
        "cloud.google.com/gke-nodepool": pool,
        **extra,
    }


CPU_NODE = Node(plain_node("default-pool", "e2-standard-4"))
GPU_NODE = Node(
    plain_node("t4-pool", "n1-standard-8", **{"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}),
    taints=(("nvidia.com/gpu", "present", "NoSchedule"),),
    gpus=1,
)
PLAIN_CLUSTER = (CPU_NODE, GPU_NODE)


def _matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator in ("Gt", "Lt") and key in labels:
        number, bound = int(labels[key]), int(values[0])
        return number > bound if operator == "Gt" else number < bound
    return False


def _tolerates(tolerations: list[Mapping[str, Any]], taint: tuple[str, str, str]) -> bool:
    key, value, effect = taint
    for t in tolerations:
        if t.get("effect") and t["effect"] != effect:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == key):
            return True
        if t.get("operator", "Equal") == "Equal" and t.get("key") == key and t.get("value", "") == value:
            return True
    return False


def _gpus(pod: Mapping[str, Any]) -> int:
    return max(
        (int((c.get("resources") or {}).get("limits", {}).get(GPU_RESOURCE, 0)) for c in pod.get("containers", [])),
        default=0,
    )


def why_not(pod: Mapping[str, Any], node: Node) -> str | None:
    """None when `pod` fits `node`, else the first reason it does not."""
    for key, value in (pod.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value}"
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        terms = required.get("nodeSelectorTerms", [])
        if not any(all(_matches(e, node.labels) for e in t.get("matchExpressions", [])) for t in terms):
            return f"required node affinity {terms}"
    for taint in node.taints:
        if taint[2] in ("NoSchedule", "NoExecute") and not _tolerates(pod.get("tolerations") or [], taint):
            return f"untolerated taint {taint}"
    if _gpus(pod) > node.gpus:
        return f"{_gpus(pod)} GPUs"
    return None


@dataclass
class PodSpecs:
    specs: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, plan: Plan) -> PodSpecs:
        found = cls()
        for resource in plan.resources:
            path = POD_SPEC_PATHS.get(resource.type)
            if path is None:
                continue
            spec: Any = resource.inputs
            for step in path:
                spec = spec[step]
            found.specs[f"{resource.type.rsplit(':', 1)[1]} {resource.name}"] = spec
        return found

    def unschedulable(self, cluster: tuple[Node, ...]) -> Iterator[str]:
        for name, spec in self.specs.items():
            reasons = [why_not(spec, node) for node in cluster]
            if all(reasons):
                yield f"{name}: {'; '.join(r for r in reasons if r)}"


def plan_everything(**args: Any) -> Plan:
    everything = TritonOnClusterArgs(
        model_repository=REPOSITORY, autoscaling=True, monitoring=True, load_test=True, **args
    )

    def declare() -> None:
        TritonOnCluster("team", everything)
        NvidiaDriverInstaller("nvidia-driver", NvidiaDriverInstallerArgs(accelerator_type="nvidia-tesla-t4"))

    return run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)


@pytest.fixture(scope="module")
def default_pods() -> PodSpecs:
    return PodSpecs.of(plan_everything())


def test_every_workload_is_planned(default_pods: PodSpecs) -> None:
    """The check below covers every workload: Triton, Locust master and workers, Prometheus, Grafana, the adapter,
    the DCGM exporter and the driver installer."""
    names = " ".join(default_pods.specs)
    for workload in ("triton", "master", "worker", "prometheus", "grafana", "prometheus-adapter", "dcgm", "driver"):
        assert workload in names, (workload, names)
    assert len(default_pods.specs) == 8


def test_every_pod_schedules_on_a_plain_gke_cluster(default_pods: PodSpecs) -> None:
    assert list(default_pods.unschedulable(PLAIN_CLUSTER)) == []


def test_gpu_pods_land_on_gpu_nodes_and_cpu_pods_do_not_need_them(default_pods: PodSpecs) -> None:
    """Triton and DCGM select GKE's own GPU label; the CPU workloads need no GPU node (nor tolerate its taint)."""
    for name, spec in default_pods.specs.items():
        gpu_only = any(w in name for w in ("triton", "dcgm", "driver"))
        assert (why_not(spec, CPU_NODE) is not None) == gpu_only, name
        assert why_not(spec, GPU_NODE) is None or not gpu_only, name


def test_the_old_pool_label_default_would_stay_pending() -> None:
    """The check catches what issue 33 found: the CPU workloads selecting this project's own pool label
    (triton-gke/pool=cpu, today only the stack's default and only on its own pools) have no node to run on."""
    stuck = list(
        PodSpecs.of(plan_everything(cpu_node_selector={"triton-gke/pool": "cpu"})).unschedulable(PLAIN_CLUSTER)
    )
    assert len(stuck) == 5 and all("nodeSelector triton-gke/pool=cpu" in s for s in stuck), stuck


def test_a_users_own_pools_are_passed_through() -> None:
    """A cluster whose CPU pool is tainted and labelled: the CPU workloads select and tolerate it, the GPU ones a
    GPU taint of another key."""
    own_cpu = Node({**CPU_NODE.labels, "team/pool": "system"}, taints=(("dedicated", "system", "NoSchedule"),))
    own_gpu = Node({**GPU_NODE.labels, "team/gpu": "t4"}, taints=(("team/gpu", "yes", "NoSchedule"),), gpus=1)
    plan = plan_everything(
        cpu_node_selector={"team/pool": "system"},
        cpu_tolerations=[{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
        gpu_node_selector={"team/gpu": "t4"},
        gpu_toleration_key="team/gpu",
    )
    pods = PodSpecs.of(plan)
    driver = {k: v for k, v in pods.specs.items() if "driver" in k}  # tolerates everything, GKE labels only
    assert (
        list(PodSpecs({k: v for k, v in pods.specs.items() if k not in driver}).unschedulable((own_cpu, own_gpu))) == []
    )
    assert list(pods.unschedulable(PLAIN_CLUSTER)) != []  # the selectors are really in the specs


# ---- the checker itself, on generated pod specs ----------------------------------------------------------------

LABEL = st.sampled_from(["kubernetes.io/os", "cloud.google.com/gke-accelerator", "triton-gke/pool", "team/x"])


@settings(max_examples=200, deadline=None)
@given(selector=st.dictionaries(LABEL, st.sampled_from(["linux", "nvidia-tesla-t4", "cpu"]), max_size=3))
def test_a_selector_fits_a_node_exactly_when_the_node_has_every_pair(selector: dict[str, str]) -> None:
    pod = {"nodeSelector": selector, "tolerations": [{"operator": "Exists"}]}
    for node in PLAIN_CLUSTER:
        assert (why_not(pod, node) is None) == all(node.labels.get(k) == v for k, v in selector.items())


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(["", "nvidia.com/gpu", "other"]),
    operator=st.sampled_from(["Exists", "Equal"]),
    value=st.sampled_from(["", "present", "x"]),
    effect=st.sampled_from(["", "NoSchedule", "NoExecute"]),
)
def test_a_toleration_lets_a_pod_on_the_gpu_node_as_kubernetes_matches_it(
    key: str, operator: str, value: str, effect: str
) -> None:
    toleration = {k: v for k, v in {"key": key, "operator": operator, "value": value, "effect": effect}.items() if v}
    fits = why_not({"tolerations": [toleration]}, GPU_NODE) is None
    key_ok = (operator == "Exists" and key in ("", "nvidia.com/gpu")) or (
        operator == "Equal" and key == "nvidia.com/gpu" and value == "present"
    )
    assert fits == (key_ok and effect in ("", "NoSchedule"))


# ---- the new inputs' boundaries: accepted as Kubernetes takes them, else one line naming the field --------------

NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
KEY = st.tuples(st.sampled_from(["", "example.com/"]), NAME).map("".join)
EFFECT = st.sampled_from(["", "NoSchedule", "PreferNoSchedule", "NoExecute"])
GOOD_TOLERATION = st.one_of(
    st.fixed_dictionaries(
        {"key": KEY, "operator": st.just("Equal"), "value": NAME | st.just("")}, optional={"effect": EFFECT}
    ),
    st.fixed_dictionaries({"key": KEY | st.just(""), "operator": st.just("Exists")}, optional={"effect": EFFECT}),
    st.fixed_dictionaries({"key": KEY, "value": NAME}),  # operator left out: Equal
)
BAD_TOLERATION = st.one_of(
    GOOD_TOLERATION.map(lambda t: t | {"operator": "In"}),
    GOOD_TOLERATION.map(lambda t: t | {"effect": "NoScheduleEver"}),
    GOOD_TOLERATION.map(lambda t: t | {"tolerationSecond": "1"}),
    st.fixed_dictionaries({"key": KEY, "operator": st.just("Exists"), "value": NAME}),
    st.fixed_dictionaries({"operator": st.just("Equal"), "value": NAME}),
    st.fixed_dictionaries({"key": st.just("bad key!")}),
    st.just("NoSchedule"),
)


def refusal(**args: Any) -> str | None:
    from triton_gke.k8s.common import ArgsError
    from triton_gke.k8s.on_cluster import check_args

    try:
        check_args("team", {"model_repository": REPOSITORY, **args})
    except ArgsError as err:
        return str(err)
    return None


@settings(max_examples=200, deadline=None)
@given(
    selector=st.dictionaries(KEY, NAME | st.just(""), max_size=3),
    tolerations=st.lists(GOOD_TOLERATION, max_size=3),
)
def test_good_cpu_placement_is_accepted(selector: dict, tolerations: list) -> None:
    assert refusal(cpu_node_selector=selector, cpu_tolerations=tolerations) is None


@settings(max_examples=200, deadline=None)
@given(good=st.lists(GOOD_TOLERATION, max_size=2), bad=BAD_TOLERATION)
def test_a_bad_toleration_is_one_line_naming_cpu_tolerations(good: list, bad: Any) -> None:
    message = refusal(cpu_tolerations=[*good, bad])
    assert message is not None and "\n" not in message
    assert message.startswith(f"TritonOnCluster 'team': cpu_tolerations: toleration {len(good) + 1} "), message


@pytest.mark.parametrize(
    "args,expected",
    [
        ({"cpu_node_selector": {"bad key!": "x"}}, "cpu_node_selector: 'bad key!' is not a Kubernetes label key"),
        ({"cpu_node_selector": {"pool": "not valid"}}, "cpu_node_selector: pool: 'not valid' is not a Kubernetes"),
        ({"cpu_node_selector": ["pool"]}, "cpu_node_selector: ['pool'] is not valid; expected a map"),
        ({"cpu_tolerations": {"key": "a"}}, "cpu_tolerations: {'key': 'a'} is not valid; expected a list"),
    ],
)
def test_bad_cpu_placement_is_one_line_naming_the_field(args: dict, expected: str) -> None:
    message = refusal(**args)
    assert message is not None and "\n" not in message and expected in message, message
