"""The three public components (issue 21): TritonOnCluster, TritonGkeRegion, TritonGkeSystem, each planned under the
mock runtime: their children, registered outputs, one-line refusal of bad Args, and (the system as the stack's
program) the aliases that keep every moved resource's identity."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi_kubernetes import Provider

from tests.support.stacks import PROJECT, stack_settings
from tests.unit.infra.test_components import cluster_args
from triton_gke.infra.region import TritonGkeRegion, TritonGkeRegionArgs
from triton_gke.infra.system import TritonGkeSystem, TritonGkeSystemArgs
from triton_gke.k8s import on_cluster
from triton_gke.k8s.common import ArgsError
from triton_gke.k8s.on_cluster import TritonOnCluster, TritonOnClusterArgs
from triton_gke.offline.runtime import CloudMocks, Plan, RecordingMonitor, run_program, run_under_mocks
from triton_gke.settings import from_stack_file
from triton_gke.settings.schema import config_schema

NEW_TYPES = ("triton-gke:index:TritonGkeSystem", "triton-gke:index:TritonGkeRegion", "triton-gke:index:TritonOnCluster")
REPOSITORY = "gs://team-models/triton"
KUBECONFIG = "apiVersion: v1\nkind: Config\n"


class WiringMonitor(RecordingMonitor):
    """The recording monitor, plus what it leaves out: each resource's aliases and each component's outputs."""

    def __init__(self) -> None:
        super().__init__(CloudMocks())
        self.aliases: dict[str, list[Any]] = {}
        self.outputs: dict[str, set[str]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        self.aliases[response.urn] = list(request.aliases)
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.outputs[request.urn] = set(request.outputs.fields) if request.HasField("outputs") else set()
        return super().RegisterResourceOutputs(request)


def plan_of(declare: Any, stack: str = "dev") -> tuple[Plan, WiringMonitor]:
    monitor = WiringMonitor()
    plan = run_under_mocks(declare, stack, stack_settings(stack), PROJECT, monitor)
    return plan, monitor


def component(plan: Plan, type_token: str) -> Any:
    (found,) = plan.of_type(type_token)
    return found


# ---- (c) TritonOnCluster --------------------------------------------------------------------------------------


def test_on_cluster_with_a_kubeconfig_uses_its_own_provider_for_every_child() -> None:
    args = TritonOnClusterArgs(model_repository=REPOSITORY, kubeconfig=KUBECONFIG, monitoring=True, load_test=True)
    plan, monitor = plan_of(lambda: TritonOnCluster("team", args))
    top = component(plan, on_cluster.TYPE_TOKEN)
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert provider.parent is top and provider.inputs["kubeconfig"] == KUBECONFIG
    k8s = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s and all(r.provider_urn == provider.urn for r in k8s)
    assert all(top in plan.ancestors(r) for r in plan.resources if r is not top), "every child has parent=self"
    inference = {"inference_key", "inference_key_header", "inference_next_key", "inference_next_key_header"}
    expected = {"namespace", "http_endpoint", "grpc_endpoint", "admin_key", "service_account_name", *inference}
    assert monitor.outputs[top.urn] == expected
    assert {r.name for r in plan.resources if r.parent is top} >= {"triton-team", "locust-team", "monitoring-team"}


def test_on_cluster_without_a_kubeconfig_uses_the_callers_provider() -> None:
    """A child takes its parent's provider for the package (providers option,
    https://www.pulumi.com/docs/iac/concepts/resources/options/providers/)."""

    def declare() -> None:
        own = Provider("teams-cluster", kubeconfig=KUBECONFIG)
        TritonOnCluster("team", {"model_repository": REPOSITORY}, pulumi.ResourceOptions(providers=[own]))

    plan, _ = plan_of(declare)
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert provider.name == "teams-cluster"
    k8s = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s and all(r.provider_urn == provider.urn for r in k8s)
    # Only Triton by default: no HPA, monitoring or Locust, a random admin key and two random inference keys.
    assert not plan.of_type("triton-gke:k8s:Monitoring") and not plan.of_type("triton-gke:k8s:LoadTest")
    passwords = {r.name for r in plan.of_type("random:index/randomPassword:RandomPassword")}
    assert passwords == {"triton-admin-key-team", "triton-inference-key-a-team", "triton-inference-key-b-team"}
    (deployment,) = plan.of_type("kubernetes:apps/v1:Deployment")
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert deployment.inputs["spec"]["replicas"] == 1


def test_on_cluster_with_autoscaling_declares_the_hpa_and_its_own_selector() -> None:
    args = TritonOnClusterArgs(
        model_repository=REPOSITORY,
        monitoring=True,
        autoscaling=True,
        load_test=True,
        gpu_node_selector={"pool": "l4"},
        gpu_toleration_key="gpu",
        min_replicas=2,
        max_replicas=4,
        model_reader_service_account="reader@p.iam.gserviceaccount.com",
    )
    plan, _ = plan_of(lambda: TritonOnCluster("team", args))
    (hpa,) = plan.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    assert (hpa.inputs["spec"]["minReplicas"], hpa.inputs["spec"]["maxReplicas"]) == (2, 4)
    (deployment,) = [d for d in plan.of_type("kubernetes:apps/v1:Deployment") if d.name == "triton-team-deployment"]
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "l4"} and pod["tolerations"][0]["key"] == "gpu"
    assert "replicas" not in deployment.inputs["spec"]  # the HPA owns the count


def test_the_defaults_are_the_stacks_defaults() -> None:
    """k8s/ may not read settings/: its constants must equal Pulumi.yaml's defaults."""
    keys = config_schema()[1]
    assert keys["tritonImageTag"].default == on_cluster.DEFAULT_IMAGE_TAG
    assert keys["gpuAcceleratorType"].default == on_cluster.DEFAULT_ACCELERATOR
    assert keys["gpuMaxNodes"].default == on_cluster.DEFAULT_MAX_REPLICAS
    assert keys["gpuMinNodes"].default == on_cluster.DEFAULT_MIN_REPLICAS
    assert keys["tritonStartupMinutes"].default == on_cluster.DEFAULT_STARTUP_MINUTES
    assert keys["autoscaleQueueTimeMs"].default * 1000 == on_cluster.DEFAULT_QUEUE_TIME_TARGET_US
    assert on_cluster.DEFAULT_LOAD_TEST.workers == keys["locustWorkers"].default


BAD_ARGS = {
    "missing repository": ({}, "model_repository: required"),
    "not a gs url": ({"model_repository": "s3://b/m"}, "model_repository: 's3://b/m' is not a gs://"),
    "zero replicas": ({"min_replicas": 0}, "min_replicas: 0 is not valid"),
    "max below min": ({"min_replicas": 3, "max_replicas": 2}, "max_replicas: 2 is not valid; expected a whole"),
    "bool as count": ({"max_replicas": True}, "max_replicas: True is not valid"),
    "bad tag": ({"image_tag": "-latest"}, "image_tag: '-latest' is not a Triton release tag"),
    "hpa alone": ({"autoscaling": True}, "autoscaling: needs monitoring: true"),
    "monitoring alone": ({"monitoring": True}, "monitoring: needs load_test: true"),
    "misspelt field": ({"min_replica": 1}, "min_replica: unknown field; did you mean min_replicas?"),
    "empty selector": ({"gpu_node_selector": {}}, "gpu_node_selector: {} is not valid"),
    "not an email": ({"model_reader_service_account": "reader"}, "model_reader_service_account: 'reader' is not"),
    "empty kubeconfig": ({"kubeconfig": " "}, "kubeconfig: ' ' is not valid"),
    "short admin key": ({"admin_key": "a"}, "admin_key: not valid"),
    "password without grafana": ({"grafana_admin_password": "x" * 20}, "grafana_admin_password: only with monitoring"),
}


@pytest.mark.parametrize("changes,expected", BAD_ARGS.values(), ids=BAD_ARGS.keys())
def test_bad_args_are_one_line_naming_the_field_before_any_child(changes: dict, expected: str) -> None:
    args = {"model_repository": REPOSITORY} | changes
    if "model_repository" not in changes and not changes.get("model_repository", True):
        args.pop("model_repository")
    if changes == {}:
        args = {}
    monitor = WiringMonitor()
    with pytest.raises(ArgsError) as refused:
        run_under_mocks(lambda: TritonOnCluster("team", args), "dev", stack_settings("dev"), PROJECT, monitor)
    message = str(refused.value)
    assert isinstance(refused.value, pulumi.RunError)  # `pulumi up` prints it without a traceback
    assert "\n" not in message and message.startswith("TritonOnCluster 'team': ") and expected in message
    assert monitor.records == [], "nothing declared before the refusal"


# Kubernetes label syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/).
LABEL_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
LABEL_KEY = st.tuples(st.sampled_from(["", "example.com/"]), LABEL_NAME).map("".join)
GOOD = st.fixed_dictionaries(
    {"model_repository": st.sampled_from([REPOSITORY, "gs://abc/x/y", "gs://a_b.c"])},
    optional={
        "min_replicas": st.integers(1, 5),
        "max_replicas": st.integers(5, 20),
        "image_tag": st.sampled_from(["25.06-py3", "24.12-py3", "23.05-py3", "21.08-py3"]),
        "gpu_toleration_key": LABEL_KEY,
        "gpu_node_selector": st.dictionaries(LABEL_KEY, LABEL_NAME | st.just(""), min_size=1, max_size=3),
        "monitoring": st.booleans(),
        "load_test": st.booleans(),
        "gpus_per_pod": st.sampled_from([1, 2, 4]),
    },
).filter(lambda a: not a.get("monitoring") or a.get("load_test"))  # monitoring needs the load test's namespace
ANY_VALUE = (
    st.none() | st.booleans() | st.integers(-5, 2000) | st.text(max_size=8) | st.lists(st.integers(), max_size=2)
)


@settings(max_examples=200, deadline=None)
@given(args=GOOD)
def test_generated_good_args_pass_the_checks(args: dict) -> None:
    on_cluster.check_args("team", args)


@settings(max_examples=300, deadline=None)
@given(args=GOOD, field=st.sampled_from(sorted(TritonOnClusterArgs.__annotations__)), value=ANY_VALUE)
def test_generated_args_are_accepted_or_refused_in_one_line_naming_a_field(args: dict, field: str, value: Any) -> None:
    args = args | {field: value}
    try:
        on_cluster.check_args("team", args)
    except ArgsError as err:
        message = str(err)
        assert "\n" not in message
        named = re.match(r"TritonOnCluster 'team': (\w+): ", message)
        assert named and named.group(1) in TritonOnClusterArgs.__annotations__, message
        return
    # Accepted: every checked field holds a value of its kind.
    if field in ("min_replicas", "max_replicas", "gpus_per_pod", "startup_minutes", "queue_time_target_us"):
        assert value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
    if field in ("autoscaling", "monitoring", "load_test"):
        assert value is None or isinstance(value, bool)


# ---- (b) TritonGkeRegion --------------------------------------------------------------------------------------


def region_args(**serving: Any) -> TritonGkeRegionArgs:
    return TritonGkeRegionArgs(
        project="demo-project",
        cluster=cluster_args(),
        serving=TritonOnClusterArgs(model_repository=REPOSITORY, **serving),
        python="/opt/venv/bin/python",
    )


def test_a_region_is_its_cluster_negs_and_triton_on_the_clusters_provider() -> None:
    plan, monitor = plan_of(lambda: TritonGkeRegion("us-central1", region_args(load_test=True)))
    top = component(plan, "triton-gke:index:TritonGkeRegion")
    assert {(r.type, r.name) for r in plan.resources if r.parent is top} == {
        ("triton-gke:infra:GkeCluster", "gke-us-central1"),
        ("triton-gke:infra:ZonalNegs", "negs-us-central1"),
        ("triton-gke:index:TritonOnCluster", "us-central1"),
    }
    (provider,) = plan.of_type("pulumi:providers:kubernetes")
    assert all(r.provider_urn == provider.urn for r in plan.resources if r.type.startswith("kubernetes:"))
    assert monitor.outputs[top.urn] == {"cluster_name", "endpoint", "kubeconfig"}
    commands = plan.of_type("command:local:Command")
    assert commands and all(c.inputs["create"].startswith("/opt/venv/bin/python -m triton_gke.") for c in commands)


@pytest.mark.parametrize(
    "args,expected",
    [
        (lambda: region_args() | {"project": ""}, "project: expected"),
        (lambda: region_args(kubeconfig=KUBECONFIG), "serving.kubeconfig: leave it out"),
        (lambda: region_args(min_replicas=0), "serving: min_replicas: 0 is not valid"),
        (lambda: region_args() | {"cluster": {}}, "cluster: expected GkeClusterArgs"),
    ],
)
def test_a_region_refuses_bad_args_in_one_line(args: Any, expected: str) -> None:
    with pytest.raises(ArgsError, match=f"^TritonGkeRegion 'us-central1': {re.escape(expected)}"):
        run_under_mocks(lambda: TritonGkeRegion("us-central1", args()), "dev", stack_settings("dev"), PROJECT)


# ---- (a) TritonGkeSystem and the program --------------------------------------------------------------------


def test_the_system_from_one_settings_object_registers_the_programs_outputs() -> None:
    settings_ = from_stack_file("dev")
    plan, monitor = plan_of(lambda: TritonGkeSystem("sys", TritonGkeSystemArgs(settings=settings_)))
    top = component(plan, "triton-gke:index:TritonGkeSystem")
    assert monitor.outputs[top.urn] == {
        "clusters",
        "endpoints",
        "kubeconfigs",
        "access",
        "modelRepository",
        "tritonAdminKey",
        "grafanaAdminPassword",
        "estimatedCost",
        *("inferenceKey", "inferenceKeyHeader", "inferenceNextKey", "inferenceNextKeyHeader"),
    }
    assert all(top in plan.ancestors(r) for r in plan.resources if r is not top)
    assert [r.name for r in plan.of_type("triton-gke:index:TritonGkeRegion")] == ["us-central1"]


@pytest.mark.parametrize(
    "args,expected",
    [
        ({}, "settings: expected StackSettings"),
        ({"settings": {"regions": []}}, "settings: expected StackSettings"),
        ({"settings": None, "pyhton": "x"}, "pyhton: unknown field"),
    ],
)
def test_the_system_refuses_bad_args_in_one_line(args: dict, expected: str) -> None:
    monitor = WiringMonitor()
    with pytest.raises(ArgsError, match=f"^TritonGkeSystem 'sys': {re.escape(expected)}"):
        run_under_mocks(lambda: TritonGkeSystem("sys", args), "dev", stack_settings("dev"), PROJECT, monitor)
    assert monitor.records == []


def engine_urn(stack: str, chain: list[Any]) -> str:
    """A URN as the engine writes it: the types of the resource's ancestors, outermost first, then its own
    (https://www.pulumi.com/docs/iac/concepts/resources/names/#urns). The mock monitor keeps only the parent's
    type (pulumi/runtime/mocks.py make_urn), so the URNs are computed here from the recorded tree."""
    return f"urn:pulumi:{stack}::{PROJECT}::{'$'.join(r.type for r in chain)}::{chain[-1].name}"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_moved_resource_keeps_its_old_urn_through_an_alias(stack: str) -> None:
    """Wrapping resources in a component changes their URNs; `Alias(parent=ROOT_STACK_RESOURCE)` on each direct child
    that moved maps the old one (https://www.pulumi.com/docs/iac/operations/stack-management/refactoring-with-aliases/,
    "Wrapping resources in a component"), and the engine derives every descendant's alias from its parent's
    ("the engine combines a parent's aliases with each child's own name and type",
    https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/). Emulated here: the nearest ancestor (or the
    resource itself) aliased to the root gives the old URN, which must be the URN before the change."""
    monitor = WiringMonitor()
    plan = run_program(stack, stack_settings(stack), PROJECT, monitor)
    moved = 0
    for resource in plan.resources:
        if resource.type in NEW_TYPES or resource.type.startswith("pulumi:providers:") and resource.parent is None:
            continue
        lineage = [resource, *plan.ancestors(resource)]
        if not any(r.type in NEW_TYPES for r in lineage):
            continue  # not under a new component: its URN did not change
        aliased = next((i for i, r in enumerate(lineage) if _to_root(monitor.aliases[r.urn])), None)
        assert aliased is not None, f"{resource.urn}: no alias to its old URN"
        assert lineage[aliased].parent.type in NEW_TYPES, f"{lineage[aliased].urn}: aliased but did not move"
        # The URN by the alias (the aliased ancestor at the root, the chain below it kept) is the URN it had before:
        # its chain without the new components.
        by_alias = engine_urn(stack, list(reversed(lineage[: aliased + 1])))
        before = engine_urn(stack, [r for r in reversed(lineage) if r.type not in NEW_TYPES])
        assert by_alias == before, resource.urn
        moved += 1
    assert moved > 0


def _to_root(aliases: list[Any]) -> bool:
    """An alias spec saying: same name and type, formerly a child of the root stack."""
    return any(a.HasField("spec") and a.spec.noParent and not a.spec.name and not a.spec.type for a in aliases)


def test_the_program_exports_the_same_outputs() -> None:
    plan = run_program("prod", stack_settings("prod"), PROJECT)
    assert set(plan.outputs) == {
        "clusters",
        "endpoints",
        "kubeconfigs",
        "access",
        "modelRepository",
        "tritonAdminKey",
        "grafanaAdminPassword",
        "estimatedCost",
        *("inferenceKey", "inferenceKeyHeader", "inferenceNextKey", "inferenceNextKeyHeader"),
        *(["lbAddress", "httpEndpoint"] if "lbAddress" in plan.outputs else []),
        *(["grpcEndpoint"] if "grpcEndpoint" in plan.outputs else []),
    }
