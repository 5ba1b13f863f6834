"""Autoscaling (k8s/autoscaling.py): the Triton HPA and the metrics adapter it reads, one component per cluster."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, evaluate_component, stack_settings
from triton_gke.k8s.autoscaling import INT32_MAX, QUEUE_TIME_METRIC, Autoscaling, AutoscalingArgs
from triton_gke.offline.runtime import CloudMocks, Plan, PlannedResource, RecordingMonitor, run_program, run_under_mocks

AUTOSCALING = "triton-gke:k8s:Autoscaling"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
API_SERVICE = "kubernetes:apiregistration.k8s.io/v1:APIService"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
PROD_REGIONS = {"us-central1", "europe-west4", "asia-east1"}
# The URNs these objects had in a dev stack before they moved here (TritonServing's HPA, Monitoring's adapter):
# what an existing stack's state holds, and what each moved object's alias must name.
DEV_URNS_BEFORE = {
    "urn:pulumi:dev::triton-gke::triton-gke:k8s:TritonServing$kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
    "::triton-us-central1-hpa",
    *(
        f"urn:pulumi:dev::triton-gke::triton-gke:k8s:Monitoring${type_}::monitoring-us-central1-{name}"
        for type_, name in [
            ("kubernetes:apiregistration.k8s.io/v1:APIService", "custom-metrics-api"),
            ("kubernetes:apps/v1:Deployment", "prometheus-adapter"),
            ("kubernetes:core/v1:ConfigMap", "adapter-config"),
            ("kubernetes:core/v1:Service", "prometheus-adapter-svc"),
            ("kubernetes:core/v1:ServiceAccount", "adapter-sa"),
            ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "adapter-reader"),
            ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "adapter-auth-delegator"),
            ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "adapter-reader"),
            ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "adapter-auth-reader"),
        ]
    ),
}


class AliasRecorder(RecordingMonitor):
    """The mock monitor, also keeping the aliases each resource registers with (by its URN)."""

    def __init__(self) -> None:
        super().__init__(CloudMocks())
        self.aliases: dict[str, list[Any]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (the gRPC method's name)
        response = super().RegisterResource(request)
        self.aliases[response.urn] = list(request.aliases)
        return response


def aliased_urn(resource: PlannedResource, alias: Any, stack: str) -> str:
    """The URN an alias names, by the rule the engine (and the mock monitor) makes URNs with: the parent's type,
    then the resource's type and name (https://www.pulumi.com/docs/iac/concepts/resources/names/#urns)."""
    if alias.WhichOneof("alias") == "urn":
        return alias.urn
    spec = alias.spec
    parent = "" if spec.noParent else (spec.parentUrn or resource.parent_urn)
    type_ = spec.type or resource.type
    qualified = f"{parent.split('::')[2].split('$')[-1]}${type_}" if parent else type_
    return f"urn:pulumi:{spec.stack or stack}::{spec.project or PROJECT}::{qualified}::{spec.name or resource.name}"


def inside(plan: Plan, resource: PlannedResource, component_type: str) -> bool:
    return any(a.type == component_type for a in plan.ancestors(resource))


def test_an_existing_stack_moves_the_hpa_and_the_adapter_into_the_component_without_replacing_them():
    """Every object that moved keeps its name and carries an alias naming the URN it had before, so `pulumi up` on
    a stack deployed before the move updates its state in place (https://www.pulumi.com/docs/iac/concepts/
    resources/options/aliases/) instead of deleting the HPA and the adapter and creating them again."""
    monitor = AliasRecorder()
    plan = run_program("dev", stack_settings("dev"), PROJECT, monitor)
    moved = [r for r in plan.resources if inside(plan, r, AUTOSCALING)]
    covered = {}
    for resource in moved:
        urns = {aliased_urn(resource, alias, "dev") for alias in monitor.aliases[resource.urn]}
        old = urns & DEV_URNS_BEFORE
        assert len(old) == 1, f"{resource.name}: aliases {urns} name none of the URNs before the move"
        covered.update(dict.fromkeys(old, resource.name))
    assert set(covered) == DEV_URNS_BEFORE
    assert all(r.urn not in DEV_URNS_BEFORE for r in plan.resources), "nothing else took an old URN"


def test_each_autoscaled_cluster_has_one_component_with_the_hpa_and_its_metric_source(prod_plan):
    components = prod_plan.of_type(AUTOSCALING)
    assert {c.name for c in components} == {f"autoscaling-{r}" for r in PROD_REGIONS}
    for component in components:
        children = [r for r in prod_plan.resources if r.parent is component]
        (hpa,) = [r for r in children if r.type == HPA]
        (api_service,) = [r for r in children if r.type == API_SERVICE]
        (adapter,) = [r for r in children if r.type == DEPLOYMENT]
        assert {hpa.provider_urn, api_service.provider_urn, adapter.provider_urn} == {hpa.provider_urn}
        assert hpa.inputs["spec"]["metrics"][0]["pods"]["metric"]["name"] == QUEUE_TIME_METRIC
        assert api_service.inputs["spec"]["group"] == "custom.metrics.k8s.io"
        assert adapter.inputs["metadata"]["namespace"] == "monitoring"
        # It scales the Triton Deployment of its own cluster, and waits for it.
        (triton,) = [
            d
            for d in prod_plan.of_type(DEPLOYMENT)
            if d.provider_urn == hpa.provider_urn and inside(prod_plan, d, "triton-gke:k8s:TritonServing")
        ]
        assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == triton.inputs["metadata"]["name"]
        assert triton.urn in hpa.dependencies
    assert not [r for r in prod_plan.of_type(HPA) if not inside(prod_plan, r, AUTOSCALING)]


# ---- the component alone, and its arguments ---------------------------------------------------------------------


def args(**overrides: Any) -> AutoscalingArgs:
    values: dict[str, Any] = {
        "deployment": "triton",
        "namespace": "triton",
        "min_replicas": 1,
        "max_replicas": 4,
        "queue_time_target_us": 30000,
        "prometheus_url": "http://prometheus.monitoring.svc:9090",
        "adapter_namespace": "monitoring",
    }
    return AutoscalingArgs(**(values | overrides))


@settings(max_examples=25, deadline=None)
@given(
    low=st.integers(1, INT32_MAX),
    spread=st.integers(0, 1000),
    target=st.integers(1, INT32_MAX),
)
def test_the_hpa_scales_within_the_given_bounds_on_the_given_target(low, spread, target):
    high = min(low + spread, INT32_MAX)
    plan = evaluate_component(
        lambda: Autoscaling("scale", args(min_replicas=low, max_replicas=high, queue_time_target_us=target))
    )
    (hpa,) = plan.of_type(HPA)
    spec = hpa.inputs["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (low, high)
    assert spec["metrics"][0]["pods"]["target"] == {"type": "AverageValue", "averageValue": str(target)}
    assert all(r.parent is not None and r.parent.type == AUTOSCALING for r in plan.resources if r.custom)
    assert hpa.name == "scale-hpa" and {r.name for r in plan.of_type(API_SERVICE)} == {"scale-custom-metrics-api"}


def test_names_and_aliases_given_for_a_refactoring_reach_the_children():
    monitor = AliasRecorder()

    def declare() -> None:
        old = pulumi.ComponentResource("triton-gke:k8s:TritonServing", "triton-x")
        Autoscaling("scale", args(hpa_name_prefix="triton-x", hpa_aliases=[pulumi.Alias(parent=old)]))

    plan = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT, monitor)
    (hpa,) = plan.of_type(HPA)
    assert hpa.name == "triton-x-hpa"
    # pulumi-kubernetes adds its own aliases for older API versions of a type; ours is the one naming a parent.
    (alias,) = [a for a in monitor.aliases[hpa.urn] if a.spec.parentUrn]
    assert aliased_urn(hpa, alias, "dev").endswith("::triton-gke:k8s:TritonServing$" + HPA + "::triton-x-hpa")
    (adapter,) = plan.of_type(DEPLOYMENT)
    assert adapter.name == "scale-prometheus-adapter"
    assert [a for a in monitor.aliases[adapter.urn] if a.spec.parentUrn or a.spec.name] == []


BAD_ARGS: dict[str, tuple[dict[str, Any], str]] = {
    "no replica": ({"min_replicas": 0}, "min_replicas: 0 is not within 1.."),
    "bounds reversed": ({"min_replicas": 3, "max_replicas": 2}, "max_replicas: 2 is less than min_replicas 3"),
    "beyond int32": ({"max_replicas": INT32_MAX + 1}, f"max_replicas: {INT32_MAX + 1} is not within"),
    "a fraction": ({"min_replicas": 1.5}, "min_replicas: 1.5 is not a whole number"),
    "a zero target": ({"queue_time_target_us": 0}, "queue_time_target_us: 0 is not within"),
    "a url without a scheme": ({"prometheus_url": "prometheus:9090"}, "prometheus_url: 'prometheus:9090' is not"),
    "an upper-case namespace": ({"adapter_namespace": "Monitoring"}, "adapter_namespace: 'Monitoring' is not"),
    "an empty prefix": ({"hpa_name_prefix": " "}, "hpa_name_prefix: ' ' is not a resource name prefix"),
}


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_arguments_are_refused_in_one_line_naming_the_field(case):
    overrides, message = BAD_ARGS[case]
    with pytest.raises(ValueError) as raised:
        args(**overrides)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@settings(max_examples=50, deadline=None)
@given(
    low=st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3)),
    high=st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3)),
    target=st.one_of(st.integers(), st.booleans()),
    url=st.text(max_size=30) | st.from_regex(r"https?://[a-z.]{1,12}(:[0-9]{2,5})?", fullmatch=True),
)
def test_any_arguments_are_accepted_exactly_when_the_hpa_api_would_accept_them(low, high, target, url):
    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= INT32_MAX

    valid = whole(low) and whole(high) and high >= low and whole(target) and url.startswith(("http://", "https://"))
    try:
        made = args(min_replicas=low, max_replicas=high, queue_time_target_us=target, prometheus_url=url)
    except ValueError as err:
        assert not valid or "prometheus_url" in str(err), err
        assert "\n" not in str(err)
        field = str(err).split(":", 1)[0]
        assert field in {"min_replicas", "max_replicas", "queue_time_target_us", "prometheus_url"}
    else:
        assert valid and (made.min_replicas, made.max_replicas) == (low, high)
