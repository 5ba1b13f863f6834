"""The zonal NEGs in the plan: the order `pulumi destroy` deletes in (the reverse of the dependency graph:
https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/) in every shipped stack, no NEG lookup
anywhere, and what adding a zone changes."""

from __future__ import annotations

import pulumi
import pytest

from tests.support.stacks import evaluate, evaluate_component, stack_settings
from triton_gke.infra.negs import (
    CLEANUP_TIMEOUT_S,
    NODE_STARTUP_BUDGET_S,
    ZonalNegs,
    ZonalNegsArgs,
    neg_url,
)
from triton_gke.offline.plan_view import plan_records
from triton_gke.offline.runtime import Plan

PROJECT = "demo-project"


COMMAND = "command:local:Command"


BACKEND = "gcp:compute/backendService:BackendService"


CLUSTER = "gcp:container/cluster:Cluster"


SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"


NETWORK = "gcp:compute/network:Network"


SERVICE = "kubernetes:core/v1:Service"


NEG_LOOKUP = "gcp:compute/getNetworkEndpointGroup:getNetworkEndpointGroup"


# ---- the component ----------------------------------------------------------------------------------------------
def _component_plan(zones: tuple[str, ...], **waits: int) -> Plan:
    def declare() -> None:
        cluster = pulumi.ComponentResource("test:index:Cluster", "cluster")
        service = pulumi.ComponentResource("test:index:NegService", "neg-service")
        ZonalNegs(
            "negs",
            ZonalNegsArgs(
                project=PROJECT,
                region="us-central1",
                zones=zones,
                neg_names=("n-http", "n-grpc"),
                cluster=cluster,
                neg_service=pulumi.Output.from_input(service),
                **waits,
            ),
        )

    return evaluate_component(declare)


def _commands(plan: Plan) -> dict[str, dict]:
    return {r.name.removeprefix("negs-"): r.inputs for r in plan.of_type(COMMAND)}


def test_cleanup_runs_on_create_and_delete_and_does_nothing_on_update():
    plan = _component_plan(("us-central1-a", "us-central1-b"))
    (component,) = plan.of_type("triton-gke:infra:ZonalNegs")
    assert {r.parent_urn for r in plan.of_type(COMMAND)} == {component.urn}
    cleanup = _commands(plan)["cleanup"]
    assert cleanup["delete"] == (
        ".venv/bin/python -m triton_gke.infra.neg_cleanup remove --project demo-project --region us-central1"
        f" --name n-http --name n-grpc --timeout-s {CLEANUP_TIMEOUT_S}"
    )
    # On create only stale NEGs: a running stack upgraded to this component keeps its live ones.
    assert cleanup["create"] == cleanup["delete"] + " --stale-only"
    assert "neg_cleanup" not in cleanup["update"], "an update (any changed input) must never delete live NEGs"
    assert not any("us-central1-a" in str(v) for v in cleanup.values()), "no zone in its inputs"


def test_adding_a_zone_replaces_only_the_wait_never_the_cleanup():
    """pulumi-command v1.2.1: `triggers` is replaceOnChanges (provider/pkg/provider/common/inputs.go); other inputs
    update in place. The cleanup's inputs stay the same, so it is neither replaced nor updated; the wait's triggers
    (the zones) change, so it is replaced and waits again, for the new zone too."""
    before = _commands(_component_plan(("us-central1-a", "us-central1-b")))
    after = _commands(_component_plan(("us-central1-a", "us-central1-b", "us-central1-f")))
    assert after["cleanup"] == before["cleanup"]
    assert before["ready"]["triggers"] == ["us-central1-a", "us-central1-b"]
    assert after["ready"]["triggers"] == ["us-central1-a", "us-central1-b", "us-central1-f"]
    assert "--zone us-central1-f" in after["ready"]["create"]
    assert "delete" not in after["ready"]


# ---- the plan: destroy order, no lookups, an added zone -----------------------------------------------------------
@pytest.fixture(scope="module", params=["dev", "staging", "prod"])
def stack_plan(request: pytest.FixtureRequest) -> Plan:
    return evaluate(request.param)


def _waits_for(records: dict[str, dict], urn: str) -> set[str]:
    """What `urn` transitively depends on (dependsOn of `make plan --json`): the engine deletes it before all of them,
    as it deletes in the reverse order of creation (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/
    ; a destroy plans every delete in reverse dependency order, https://www.pulumi.com/docs/iac/cli/commands/pulumi_destroy/)."""
    seen: set[str] = set()
    todo = list(records[urn]["dependsOn"])
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(records.get(dep, {}).get("dependsOn", []))
    return seen


def test_destroy_removes_the_negs_users_then_the_negs_then_the_cluster_and_network(stack_plan):
    """Per region: the NEG Service and both backend services are deleted before the cleanup command runs its delete,
    and that before the cluster, its subnetwork and the network: so nothing uses a NEG when it is deleted, and no NEG
    outlives the subnet and VPC (GKE: "Prevent leaked NEGs", https://cloud.google.com/kubernetes-engine/docs/how-to/standalone-neg)."""
    records = {r["urn"]: r for r in plan_records(stack_plan)}
    by_name = {(r["type"], r["name"]): r["urn"] for r in records.values()}
    regions = [c.inputs["location"] for c in stack_plan.of_type(CLUSTER)]
    assert regions
    backends = [r.urn for r in stack_plan.of_type(BACKEND)]
    assert len(backends) in (0, 2)
    (network,) = [r.urn for r in stack_plan.of_type(NETWORK)]
    for region in regions:
        cleanup = by_name[(COMMAND, f"negs-{region}-cleanup")]
        neg_service = by_name[(SERVICE, f"triton-{region}-triton-neg-svc")]
        (cluster,) = [c.urn for c in stack_plan.of_type(CLUSTER) if c.inputs["location"] == region]
        (subnet,) = [s.urn for s in stack_plan.of_type(SUBNETWORK) if s.inputs["region"] == region]
        for user in [neg_service, *backends]:
            assert cleanup in _waits_for(records, user), f"{user} must be deleted before {cleanup} runs"
        for infrastructure in (cluster, subnet, network):
            assert infrastructure in _waits_for(records, cleanup), f"{cleanup} must run before {infrastructure} goes"


def test_no_plan_looks_a_neg_up(stack_plan):
    assert not [call for _, call in stack_plan.invokes if call.token == NEG_LOOKUP]


def test_an_added_zone_gets_its_backends_without_a_lookup():
    zones = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]
    plan = evaluate("prod", zones=zones)
    assert not [call for _, call in plan.invokes if call.token == NEG_LOOKUP]
    for backend in plan.of_type(BACKEND):
        port = backend.name.removeprefix("global-")
        groups = {b["group"] for b in backend.inputs["backends"]}
        project = stack_settings("prod")["gcp:project"]
        assert neg_url(project, "us-central1-f", f"triton-prod-us-central1-{port}") in groups
    ready = {r.name: r for r in plan.of_type(COMMAND)}["negs-us-central1-ready"]
    assert ready.inputs["triggers"] == zones
    for backend in plan.of_type(BACKEND):
        assert ready.urn in backend.dependencies, "the backends wait until the new zone's NEGs exist"


# ---- the wait covers the node start-up budget ---------------------------------------------------------------------
def _wait_timeout_s(ready: dict) -> int:
    words = ready["create"].split()
    return int(words[words.index("--timeout-s") + 1])


def test_the_node_start_up_budget_is_a_node_and_the_neg_controller_at_their_cited_bounds():
    """infra/negs.py: a node ready within the cluster autoscaler's max-node-provision-time (15 min, cluster-autoscaler
    FAQ), then the NEG controller within its resync period (10 min, ingress-gce --sync-period)."""
    assert NODE_STARTUP_BUDGET_S >= 15 * 60 + 10 * 60


def test_the_neg_wait_of_every_region_is_at_least_the_node_start_up_budget(stack_plan):
    """A wait shorter than a new zone's first node plus the NEG controller fails `pulumi up` on a healthy cluster."""
    readies = [r.inputs for r in stack_plan.of_type(COMMAND) if r.name.endswith("-ready")]
    assert readies
    for ready in readies:
        assert _wait_timeout_s(ready) >= NODE_STARTUP_BUDGET_S, ready["create"]


def test_a_60_s_wait_is_below_the_budget():
    """The check is not vacuous: the component given a 60 s wait fails it."""
    ready = _commands(_component_plan(("us-central1-a",), ready_timeout_s=60))["ready"]
    assert _wait_timeout_s(ready) == 60 < NODE_STARTUP_BUDGET_S
