"""Issue 33: namespaces and cluster-scoped names are inputs of TritonOnCluster, so a team can put the components where
its cluster wants them, and a second instance beside the first.

Kubernetes names a namespaced object by (kind, namespace, name) and a cluster-scoped one by (kind, name): two objects
with the same key are the same object, and a second `create` of it fails with AlreadyExists
(https://kubernetes.io/docs/concepts/overview/working-with-objects/names/). Namespaces themselves, ClusterRoles,
ClusterRoleBindings and APIServices are cluster-scoped
(https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#not-all-objects-are-in-a-namespace).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import PROJECT, stack_settings
from triton_gke.contracts.naming import DNS_LABEL
from triton_gke.contracts.workloads import (
    ADAPTER_NAME,
    ADAPTER_NAME_MAX,
    DEFAULT_NAMESPACES,
    NAMESPACE_ROLES,
    namespaces_problem,
)
from triton_gke.k8s.common import ArgsError
from triton_gke.k8s.on_cluster import TritonOnCluster, TritonOnClusterArgs
from triton_gke.offline.runtime import Plan, PlannedResource, run_under_mocks

REPOSITORY = "gs://team-models/triton"
TEAM = {"triton": "ml-serving", "load_test": "ml-load", "monitoring": "ml-observability", "gpu_metrics": "ml-gpu"}
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding", "APIService")


def plan(*instances: tuple[str, dict[str, Any]]) -> Plan:
    def declare() -> None:
        for name, extra in instances:
            TritonOnCluster(name, TritonOnClusterArgs(model_repository=REPOSITORY, **extra))

    return run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)


def everything(**extra: Any) -> dict[str, Any]:
    return {"autoscaling": True, "monitoring": True, "load_test": True, **extra}


def kind(resource: PlannedResource) -> str:
    return resource.type.rsplit(":", 1)[1]


def kubernetes_objects(p: Plan) -> list[PlannedResource]:
    return [r for r in p.resources if r.type.startswith("kubernetes:") and "metadata" in r.inputs]


def key(resource: PlannedResource) -> tuple[str, str, str]:
    meta = resource.inputs["metadata"]
    namespace = "" if kind(resource) in CLUSTER_SCOPED else meta.get("namespace", "")
    return kind(resource), namespace, meta["name"]


@pytest.fixture(scope="module")
def team_plan() -> Plan:
    return plan(("team", everything(namespaces=TEAM, adapter_name="ml-adapter")))


def test_every_namespaced_object_is_in_a_namespace_the_team_named(team_plan: Plan) -> None:
    created = {r.inputs["metadata"]["name"] for r in kubernetes_objects(team_plan) if kind(r) == "Namespace"}
    assert created == set(TEAM.values())
    for resource in kubernetes_objects(team_plan):
        _, namespace, name = key(resource)
        # The adapter's RoleBinding to extension-apiserver-authentication-reader must be in kube-system (the Role is).
        assert namespace in ("", *TEAM.values()) or (namespace, name) == ("kube-system", "ml-adapter-auth-reader"), (
            resource.name,
            namespace,
        )


def test_the_workloads_find_each_other_in_the_team_s_namespaces(team_plan: Plan) -> None:
    text = {r.name: yaml.safe_dump(r.inputs) for r in kubernetes_objects(team_plan)}
    everything_said = "\n".join(text.values())
    # Locust reaches Triton, its workers reach the master, Grafana and the adapter reach Prometheus.
    assert "triton.ml-serving.svc.cluster.local:8000" in everything_said
    assert "--master-host=locust-master.ml-load" in everything_said
    assert everything_said.count("http://prometheus.ml-observability.svc:9090") >= 2
    for default in (DEFAULT_NAMESPACES.triton_host(), DEFAULT_NAMESPACES.prometheus_url(), "locust-master.load"):
        assert default not in everything_said
    # Prometheus discovers pods in the team's namespaces and may read pods there only.
    config = next(r for r in kubernetes_objects(team_plan) if r.inputs["metadata"]["name"] == "prometheus-config")
    jobs = yaml.safe_load(config.inputs["data"]["prometheus.yml"])["scrape_configs"]
    discovered = {n for job in jobs for sd in job.get("kubernetes_sd_configs", []) for n in sd["namespaces"]["names"]}
    assert discovered == {TEAM["triton"], TEAM["load_test"], TEAM["gpu_metrics"]}
    readers = {key(r)[1] for r in kubernetes_objects(team_plan) if key(r)[2] == "prometheus-read-pods"}
    assert readers == discovered
    subjects = [s["namespace"] for r in kubernetes_objects(team_plan) for s in r.inputs.get("subjects", [])]
    assert set(subjects) == {TEAM["monitoring"]}


def test_the_adapter_s_cluster_wide_objects_carry_the_given_name(team_plan: Plan) -> None:
    rbac = [key(r)[2] for r in kubernetes_objects(team_plan) if kind(r) in ("ClusterRole", "ClusterRoleBinding")]
    assert rbac and all(name.startswith("ml-adapter-") for name in rbac), rbac
    service = next(r for r in kubernetes_objects(team_plan) if kind(r) == "APIService").inputs["spec"]["service"]
    assert service["namespace"] == TEAM["monitoring"]


def test_a_second_instance_in_its_own_namespaces_shares_no_object_with_the_first() -> None:
    """The team's instance beside the defaults' on one cluster: one custom metrics adapter per cluster, so only one
    autoscales (the other's queue time still reaches its own Prometheus)."""
    both = plan(
        ("first", everything()),
        ("second", {"monitoring": True, "load_test": True, "namespaces": TEAM}),
    )
    keys = Counter(key(r) for r in kubernetes_objects(both))
    assert [k for k, n in keys.items() if n > 1] == []


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        # Both in the default namespaces: the second would create triton, load, ... again.
        (everything(), {}, "namespaces: 'triton' is also created by TritonOnCluster 'first'"),
        # One namespace of the first among the second's own.
        (everything(), {"namespaces": {"triton": "ml-t"}, "load_test": True}, "namespaces: 'load' is also created"),
        # A second custom metrics adapter: custom.metrics.k8s.io has one APIService per cluster.
        (everything(), everything(namespaces=TEAM, adapter_name="ml-adapter"), "autoscaling: TritonOnCluster 'first'"),
    ],
)
def test_a_second_instance_that_would_take_the_first_s_names_is_refused_in_one_line(
    first: dict[str, Any], second: dict[str, Any], expected: str
) -> None:
    said: list[str] = []

    def declare() -> None:
        TritonOnCluster("first", TritonOnClusterArgs(model_repository=REPOSITORY, **first))
        try:
            TritonOnCluster("second", TritonOnClusterArgs(model_repository=REPOSITORY, **second))
        except ArgsError as err:
            said.append(str(err))

    p = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
    assert len(said) == 1 and said[0].startswith("TritonOnCluster 'second'") and expected in said[0], said
    assert "\n" not in said[0]
    assert not [r for r in p.resources if "second" in r.name], "nothing of the refused one declared"


def test_two_clusters_may_use_the_same_names() -> None:
    """Each with a kubeconfig of its own: two clusters, so the default namespaces and adapters do not meet."""
    kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n# {}\n"
    both = plan(
        ("east", everything(kubeconfig=kubeconfig.format("east"))),
        ("west", everything(kubeconfig=kubeconfig.format("west"))),
    )
    assert len([r for r in both.resources if kind(r) == "APIService"]) == 2


def test_names_whose_children_would_share_a_urn_are_refused() -> None:
    """`team` monitored names its GPU-metrics namespace monitoring-team-gpu-ns, `team-gpu` its monitoring one too."""
    said: list[str] = []

    def declare() -> None:
        TritonOnCluster("team", TritonOnClusterArgs(model_repository=REPOSITORY, monitoring=True, load_test=True))
        try:
            TritonOnCluster("team-gpu", TritonOnClusterArgs(model_repository=REPOSITORY, monitoring=True,
                            load_test=True, namespaces=TEAM))  # fmt: skip
        except ArgsError as err:
            said.append(str(err))

    run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
    assert said == [
        "TritonOnCluster 'team-gpu': name: 'team-gpu' and 'team', both monitored, give two children one name"
    ]


def test_the_defaults_are_the_stack_s_namespaces() -> None:
    """What the shipped stacks and every deployed cluster use: left out, nothing moves."""
    default = plan(("team", everything()))
    created = {r.inputs["metadata"]["name"] for r in kubernetes_objects(default) if kind(r) == "Namespace"}
    assert created == {"triton", "load", "monitoring", "gpu-metrics"}
    rbac = {key(r)[2] for r in kubernetes_objects(default) if kind(r) in ("ClusterRole", "ClusterRoleBinding")}
    assert rbac and all(name.startswith(f"{ADAPTER_NAME}-") for name in rbac)


# ---- bad input: one line naming the field, nothing declared --------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"namespaces": {"triton": "load"}}, "namespaces: triton: 'load' is also the namespace of load_test"),
        ({"namespaces": {"serving": "x"}}, "namespaces: 'serving' is not a namespace the components use"),
        ({"namespaces": {"monitoring": "kube-system"}}, "namespaces: monitoring: 'kube-system' is a namespace"),
        ({"namespaces": {"monitoring": "gmp-system"}}, "namespaces: monitoring: 'gmp-system' is a namespace"),
        ({"namespaces": {"t" * 100_000: "x"}}, "namespaces: 'tttttttt"),
        ({"namespaces": {"triton": "ML"}}, "namespaces: triton: 'ML' is not a namespace name"),
        ({"namespaces": ["triton"]}, "namespaces: expected a mapping"),
        ({"adapter_name": "x"}, "adapter_name: only with autoscaling: true"),
        ({"autoscaling": True, "monitoring": True, "load_test": True, "adapter_name": "a" * 48}, "adapter_name: 'aaa"),
    ],
)
def test_bad_names_are_refused_in_one_line_before_any_child(extra: dict[str, Any], expected: str) -> None:
    declared: list[str] = []

    def declare() -> None:
        try:
            TritonOnCluster("team", TritonOnClusterArgs(model_repository=REPOSITORY, **extra))
        except ArgsError as err:
            declared.append(str(err))

    refused = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
    assert len(declared) == 1 and expected in declared[0] and "\n" not in declared[0], declared
    assert refused.resources == []


ROLE = st.sampled_from(NAMESPACE_ROLES)
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=70)
LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@settings(max_examples=300)
@given(st.dictionaries(st.one_of(ROLE, ANY_TEXT), st.one_of(LABEL, ANY_TEXT), max_size=5))
def test_any_namespaces_mapping_is_valid_exactly_when_kubernetes_would_take_it(given_names: dict[str, str]) -> None:
    chosen = {role: getattr(DEFAULT_NAMESPACES, role) for role in NAMESPACE_ROLES} | given_names
    valid = (
        set(given_names) <= set(NAMESPACE_ROLES)
        and all(DNS_LABEL.fullmatch(n) and len(n) <= 63 for n in given_names.values())
        and not any(n == "default" or n.startswith(("kube-", "gke-", "gmp-")) for n in given_names.values())
        and len(set(chosen.values())) == len(chosen)
    )
    problem = namespaces_problem(given_names)
    assert (problem is None) == valid, (given_names, problem)
    assert problem is None or ("\n" not in problem and "\r" not in problem and len(problem) < 400)


@settings(max_examples=200)
@given(st.one_of(LABEL, ANY_TEXT))
def test_any_adapter_name_is_taken_exactly_when_its_longest_object_name_is_a_label(name: str) -> None:
    from triton_gke.k8s.on_cluster_args import adapter_name_problem

    problem = adapter_name_problem(name, {"autoscaling": True})
    longest = f"{name}-resource-reader"
    assert (problem is None) == bool(DNS_LABEL.fullmatch(longest) and len(longest) <= 63), (name, problem)
    assert len(ADAPTER_NAME) <= ADAPTER_NAME_MAX


def test_the_library_page_s_namespaces_example_plans_as_pasted() -> None:
    """docs/library.md shows the input in a Python block: run it, as a user would paste it, under the mock runtime."""
    page = (PROJECT_DIR / "docs" / "library.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    example = next(b for b in blocks if "namespaces=" in b)

    def declare() -> None:
        exec(example, {"TritonOnCluster": TritonOnCluster, "TritonOnClusterArgs": TritonOnClusterArgs})

    pasted = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
    created = {r.inputs["metadata"]["name"] for r in kubernetes_objects(pasted) if kind(r) == "Namespace"}
    assert created == {"ml-serving", "ml-load", "ml-obs", "ml-gpu"}


def test_autoscaling_with_operator_mode_monitoring_is_refused_in_one_line() -> None:
    """Operator mode makes no adapter (k8s/autoscaling.py serves_custom_metrics): an HPA there would never scale, and
    the component used to take the flag and ignore it (red team of the namespaces change)."""
    from triton_gke.k8s.monitoring import MonitoringArgs
    from triton_gke.k8s.on_cluster import ClusterWiring
    from triton_gke.observability.settings import SloSettings

    operator = MonitoringArgs("r", "dev", SloSettings(), "operator", "15d", 20, "", {})
    said: list[str] = []

    def declare() -> None:
        try:
            TritonOnCluster("team", TritonOnClusterArgs(model_repository=REPOSITORY, **everything()),
                            wiring=ClusterWiring(monitoring=operator))  # fmt: skip
        except ArgsError as err:
            said.append(str(err))

    refused = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
    assert said == [
        "TritonOnCluster 'team': autoscaling: needs the builtin monitoring mode (in operator mode no adapter serves the"
        " HPA's metric)"
    ]
    assert refused.resources == []
