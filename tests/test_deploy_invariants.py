"""Deploy invariants: behaviour of the real Google Cloud, GKE, Kubernetes and Pulumi APIs that the mock runtime
cannot refuse, checked on the plan of every stack.

The mocks accept anything, so a program that races an API or outwaits the engine still "plans". Each test below
encodes ONE rule the real APIs enforce, with its source in the docstring, and is evaluated on the plan of every
stack in STACKS (dev, staging, prod, and prod in operator monitoring mode). Reverting the fix a rule guards makes
that rule fail.

How to add a rule: one test function `test_<what the real API does>(plan)`; the docstring says what the real API
does, what goes wrong otherwise and cites the source (docs URL or public issue); use the graph helpers below
(`waits_for`, `triton`, `of_kind`...) rather than re-deriving the graph. `plan` is parametrized over STACKS and
module-scoped (each stack is evaluated once for the whole module). A rule that applies to some stacks only says
so in its body (e.g. `if not plan.of_type(BACKEND): pytest.skip(...)`), never by listing stack names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import evaluate

from offline.runtime import Plan, PlannedResource

# name -> (stack file, overrides): every shipped stack, and operator monitoring mode on the largest one.
STACKS: dict[str, tuple[str, dict[str, Any]]] = {
    "dev": ("dev", {}),
    "staging": ("staging", {}),
    "prod": ("prod", {}),
    "prod-operator": ("prod", {"monitoringMode": "operator"}),
}

CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
GCP_SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
BACKEND = "gcp:compute/backendService:BackendService"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
TRITON_SERVING = "triton-gke:k8s:TritonServing"


@pytest.fixture(scope="module", params=list(STACKS))
def plan(request: pytest.FixtureRequest) -> Plan:
    stack, overrides = STACKS[request.param]
    return evaluate(stack, **overrides)


# ---- graph helpers ------------------------------------------------------------------------------------------------


def waits_for(plan: Plan, resource: PlannedResource) -> set[str]:
    """URNs `resource` transitively depends on: the engine creates it after all of them and deletes it before any.

    Pulumi orders creation by dependencies (explicit dependsOn and those implied by Outputs used as inputs) and
    deletes in the reverse order: https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/
    """
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            found = plan.by_urn(urn)
            todo.extend(found.dependencies if found else [])
    return seen


def under(plan: Plan, component_type: str) -> Iterator[tuple[PlannedResource, PlannedResource]]:
    """(component, custom resource) for every custom resource inside a component of `component_type`."""
    for resource in plan.resources:
        owner = next((a for a in plan.ancestors(resource) if a.type == component_type), None)
        if owner is not None and resource.custom:
            yield owner, resource


def of_kind(plan: Plan, component_type: str, type_token: str) -> list[tuple[PlannedResource, PlannedResource]]:
    return [(owner, r) for owner, r in under(plan, component_type) if r.type == type_token]


def triton_deployments(plan: Plan) -> list[PlannedResource]:
    deployments = [r for _, r in of_kind(plan, TRITON_SERVING, DEPLOYMENT)]
    assert deployments, "every stack serves Triton"
    return deployments


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


def references(resource: PlannedResource, needle: str) -> bool:
    return any(needle in text for text in strings_in(resource.inputs))


# ---- rules --------------------------------------------------------------------------------------------------------


def test_load_balancer_backends_wait_for_the_services_whose_negs_they_use(plan):
    """GKE's NEG controller creates a Service's zonal NEGs asynchronously and deletes them with the Service, and a
    NEG in use by a backend service cannot be deleted. So each backend must be created after, and deleted before,
    the Service that owns its NEGs. https://cloud.google.com/kubernetes-engine/docs/how-to/standalone-neg
    """
    backends = plan.of_type(BACKEND)
    if not backends:
        pytest.skip("no global load balancer in this stack")
    neg_services = {
        neg: service for _, service in of_kind(plan, TRITON_SERVING, SERVICE) for neg in _neg_names(service)
    }
    for backend in backends:
        used = [neg for neg in neg_services if references(backend, f"networkEndpointGroups/{neg}")]
        assert used, f"{backend.name} uses no Triton NEG"
        for neg in used:
            assert neg_services[neg].urn in waits_for(plan, backend), f"{backend.name} does not wait for {neg}"


def _neg_names(service: PlannedResource) -> list[str]:
    annotation = service.inputs["metadata"].get("annotations", {}).get("cloud.google.com/neg")
    if not annotation:
        return []
    return [port["name"] for port in json.loads(annotation)["exposed_ports"].values()]


def test_destroy_deletes_whatever_references_a_bucket_or_service_account_first(plan):
    """`pulumi destroy` deletes in reverse dependency order
    (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/): anything that names a bucket or a
    Google service account in its inputs (IAM members, node pools, firewall rules, Triton's Kubernetes service
    account and pods) must depend on it; otherwise nothing stops the engine from deleting the bucket or account
    while its users still exist (Pulumi runs independent deletes in parallel). Dependencies are read from the same
    graph `make plan --json` prints.
    """
    targets = [(b, b.inputs["name"]) for b in plan.of_type(BUCKET)]
    targets += [(a, a.inputs["accountId"] + "@") for a in plan.of_type(GCP_SERVICE_ACCOUNT)]
    assert targets
    for target, needle in targets:
        referrers = [r for r in plan.resources if r.custom and r is not target and references(r, needle)]
        assert referrers, f"nothing references {target.name}"
        for referrer in referrers:
            assert target.urn in waits_for(plan, referrer), (
                f"{referrer.name} references {target.name} but does not depend on it"
            )
