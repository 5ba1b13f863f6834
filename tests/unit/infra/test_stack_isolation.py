"""Issue 32, "dev can read prod's models": no stack's Triton can act as another stack's bucket reader.

Workload Identity Federation for GKE gives every cluster of a project one principal per namespace and Kubernetes
service account, serviceAccount:PROJECT.svc.id.goog[NAMESPACE/KSA] ("workloads running in a specific namespace share
the same IAM identity across clusters within a project",
https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity). The shipped stack
files give each stack a project of its own, and so a pool of its own; these tests plan dev, staging and prod in ONE
project (dev's), as a user who shares one does (the settings warn then: settings/shared_project.py), since there a
stack is isolated from another only if the principal its Triton runs as is not one that may act as the other's
reader. Each plan is read as the cloud would see it: the readers are the Google service accounts the stack's bucket
grants to, the principals that may act as a reader are the members of its IAM bindings, and Triton's principal is
the workload pool of the stack's clusters with the namespace and service account of its pods.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, stack_settings
from triton_gke.infra import system
from triton_gke.offline.plan_view import render_text
from triton_gke.offline.runtime import Plan

STACKS = ("dev", "staging", "prod")
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
SA_IAM = ("gcp:serviceaccount/iAMMember:IAMMember", "gcp:serviceaccount/iAMBinding:IAMBinding")
# The roles on a service account that let a principal act as it (mint its tokens): Workload Identity's own, and the
# two that allow impersonation (https://cloud.google.com/iam/docs/service-account-permissions).
ACTS_AS = {"roles/iam.workloadIdentityUser", "roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountUser"}
CLUSTER = "gcp:container/cluster:Cluster"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:"
SHARED_PROJECT = stack_settings("dev")["gcp:project"]  # the one project every stack is planned in here
SHARED_POOL = f"serviceAccount:{SHARED_PROJECT}.svc.id.goog"


def in_the_shared_project(stack: str) -> Plan:
    return evaluate(stack, **{"gcp:project": SHARED_PROJECT})


@dataclass(frozen=True)
class Identity:
    """What one stack's plan says about who reads its models."""

    stack: str
    readers: frozenset[str]  # Google service accounts granted on the stack's bucket
    may_act_as_reader: frozenset[str]  # principals that may act as one of them
    runs_triton_as: frozenset[str]  # the principal of every Triton pod, in every cluster of the stack
    service_accounts: frozenset[str]  # the Kubernetes service accounts those pods run as


def identity_of(plan: Plan) -> Identity:
    readers = {
        str(g.inputs["member"]).removeprefix("serviceAccount:")
        for g in plan.of_type(BUCKET_IAM)
        if str(g.inputs["member"]).startswith("serviceAccount:")
    }
    acting: set[str] = set()
    for resource in plan.resources:
        if resource.type not in SA_IAM or resource.inputs.get("role") not in ACTS_AS:
            continue
        if str(resource.inputs["serviceAccountId"]).rsplit("/", 1)[-1] in readers:
            inputs = resource.inputs
            acting |= {inputs["member"]} if "member" in inputs else set(inputs["members"])
    pools = {c.inputs["workloadIdentityConfig"]["workloadPool"] for c in plan.of_type(CLUSTER)}
    triton = [
        d
        for d in plan.of_type(DEPLOYMENT)
        if any(c["image"].startswith(TRITON_IMAGE) for c in d.inputs["spec"]["template"]["spec"]["containers"])
    ]
    accounts = {
        (d.inputs["metadata"]["namespace"], d.inputs["spec"]["template"]["spec"]["serviceAccountName"]) for d in triton
    }
    return Identity(
        stack=plan.stack,
        readers=frozenset(readers),
        may_act_as_reader=frozenset(acting),
        runs_triton_as=frozenset(f"serviceAccount:{pool}[{ns}/{ksa}]" for pool in pools for ns, ksa in accounts),
        service_accounts=frozenset(ksa for _, ksa in accounts),
    )


def leaks(identities: dict[str, Identity]) -> list[str]:
    """Every (stack, other stack) whose Triton principal may act as the other's reader."""
    return [
        f"{one}'s Triton ({principal}) may act as {other}'s reader"
        for one, other in itertools.permutations(identities, 2)
        for principal in identities[one].runs_triton_as & identities[other].may_act_as_reader
    ]


@pytest.fixture(scope="module")
def plans(dev_plan: Plan, prod_plan: Plan) -> dict[str, Plan]:
    return {"dev": dev_plan, "staging": in_the_shared_project("staging"), "prod": in_the_shared_project("prod")}


@pytest.fixture(scope="module")
def identities(plans: dict[str, Plan]) -> dict[str, Identity]:
    return {stack: identity_of(plan) for stack, plan in plans.items()}


def test_the_stacks_planned_here_share_one_pool_which_is_why_names_must_differ(identities: dict[str, Identity]) -> None:
    pools = {p.split("[", 1)[0] for i in identities.values() for p in i.runs_triton_as}
    assert pools == {SHARED_POOL}


def test_the_shipped_stacks_each_have_a_project_and_so_a_pool_of_their_own(dev_plan: Plan, prod_plan: Plan) -> None:
    projects = {stack: stack_settings(stack)["gcp:project"] for stack in STACKS}
    assert len(set(projects.values())) == len(STACKS), projects
    for stack, plan in {"dev": dev_plan, "prod": prod_plan}.items():
        pools = {p.split("[", 1)[0] for p in identity_of(plan).runs_triton_as}
        assert pools == {f"serviceAccount:{projects[stack]}.svc.id.goog"}, stack


def test_every_stack_can_read_its_own_models(identities: dict[str, Identity]) -> None:
    """Not a vacuous pass: each stack has a reader, and its Triton, in every cluster, may act as it."""
    for stack, identity in identities.items():
        assert identity.readers and identity.runs_triton_as, stack
        assert identity.runs_triton_as <= identity.may_act_as_reader, stack
        assert identity.service_accounts == {f"triton-{stack}"}, stack


@pytest.mark.parametrize(("one", "other"), list(itertools.permutations(STACKS, 2)))
def test_no_stacks_triton_may_act_as_another_stacks_reader(
    identities: dict[str, Identity], one: str, other: str
) -> None:
    assert not identities[one].runs_triton_as & identities[other].may_act_as_reader
    assert not identities[one].readers & identities[other].readers, "each stack has its own reader"


def test_the_text_plan_shows_each_stacks_own_principal(plans: dict[str, Plan]) -> None:
    """`triton-gke plan --stack STACK` names the principal that may act as the stack's reader and the one each Triton
    Deployment runs as, each on a line of its own; no other stack's principal appears."""
    for stack, plan in plans.items():
        text = render_text(plan, [])
        principal = f"{SHARED_POOL}[triton/triton-{stack}]"
        reader = f"{stack}-triton-reader@{SHARED_PROJECT}.iam.gserviceaccount.com"
        assert f"\n  {principal} -> {reader}  (models-workload-identity)\n" in text
        regions = [c.inputs["location"] for c in plan.of_type(CLUSTER)]
        for region in regions:
            assert f"\n  Triton runs as triton/triton-{stack}  (triton-{region}-deployment)" in text
        assert text.count("Triton runs as ") == len(regions)
        others = [s for s in STACKS if s != stack]
        assert not any(f"[triton/triton-{other}]" in text or f"triton/triton-{other} " in text for other in others)


def test_the_security_page_shows_the_dev_plans_lines(plans: dict[str, Plan]) -> None:
    page = (PROJECT_DIR / "docs" / "security.md").read_text()
    shown = page.split("Workload Identity (a pod running as", 1)[1].split("```", 1)[0].splitlines()[1:]
    text = render_text(plans["dev"], [])
    assert shown and all(line in text.splitlines() for line in shown), shown


def test_with_one_shared_service_account_dev_could_read_prods_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check finds the leak issue 32 reported: the same name in every stack (the state before the fix), in one
    project; in projects of their own (the shipped stack files) the same name is two principals of two pools."""
    monkeypatch.setattr(system, "triton_service_account", lambda stack: "triton")
    found = leaks({stack: identity_of(in_the_shared_project(stack)) for stack in ("dev", "prod")})
    principal = f"{SHARED_POOL}[triton/triton]"
    assert found == [
        f"dev's Triton ({principal}) may act as prod's reader",
        f"prod's Triton ({principal}) may act as dev's reader",
    ]
    assert leaks({stack: identity_of(evaluate(stack)) for stack in ("dev", "prod")}) == []
