"""The Kubernetes side of Workload Identity (issue 44): the pack's kubernetes-principal-per-stack refuses a
ServiceAccount, or a pod template's service account, that IS another stack's principal; TritonOnCluster's default
account is its instance's own and never refused.

Workload Identity's member is serviceAccount:PROJECT.svc.id.goog[KSA_NAMESPACE/KSA_NAME], one principal for that
namespace and name in every cluster of the project
(https://cloud.google.com/kubernetes-engine/multi-cloud/docs/attached/aks/concepts/workload-identity,
https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity): whoever may create
triton/triton-prod in dev's cluster, or run a pod of dev's as it, gets what prod bound to it (its bucket reader).
What a user notices: which plans the pack lets through, and the one line it prints for each refusal.
"""

from __future__ import annotations

import copy
import runpy
from collections.abc import Callable
from typing import Any

import pulumi_kubernetes as kubernetes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, stack_settings
from tests.unit.policy.test_policies import all_violations, violations
from triton_gke.contracts.naming import DNS_LABEL
from triton_gke.contracts.workloads import TRITON_NAMESPACE
from triton_gke.k8s.engine_build import ENGINE_NAMESPACE
from triton_gke.k8s.on_cluster import TritonOnCluster
from triton_gke.offline.runtime import Plan, PlannedResource, run_under_mocks, stack_program
from triton_gke.policy import policies, principals
from triton_gke.policy.principals import (
    component_service_account,
    engine_service_account,
    principal_name,
    triton_service_account,
)
from triton_gke.settings.stack import STACK_NAME

POLICY = "kubernetes-principal-per-stack"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
MANY = settings(max_examples=200, deadline=None)
REPOSITORY = "gs://team-models/triton"

# Each principal namespace with the function that names its account for a stack (written out from the program's
# side: the namespaces from where the program creates them, the names from where it binds them).
PRINCIPALS: dict[str, Callable[[str], str]] = {
    TRITON_NAMESPACE: triton_service_account,
    ENGINE_NAMESPACE: engine_service_account,
}
# Where each kind keeps the pod spec, spelt out here from the Kubernetes API (PodSpec under template.spec, CronJob's
# under jobTemplate, a Pod's own spec, a PodTemplate's template.spec), not read from the module under test.
POD_SPECS: dict[str, tuple[str, str]] = {
    "apps/v1:Deployment": ("spec", "template.spec"),
    "apps/v1:StatefulSet": ("spec", "template.spec"),
    "apps/v1:DaemonSet": ("spec", "template.spec"),
    "apps/v1:ReplicaSet": ("spec", "template.spec"),
    "core/v1:ReplicationController": ("spec", "template.spec"),
    "batch/v1:Job": ("spec", "template.spec"),
    "batch/v1:CronJob": ("spec", "jobTemplate.spec.template.spec"),
    "core/v1:Pod": ("spec", ""),
    "core/v1:PodTemplate": ("template", "spec"),
}


def _nested(first: str, rest: str, leaf: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = leaf
    for part in reversed([first, *filter(None, rest.split("."))]):
        node = {part: node}
    return node


def _resource(type_token: str, name: str, stack: str, inputs: dict[str, Any]) -> PlannedResource:
    urn = f"urn:pulumi:{stack}::triton-gke::{type_token}::{name}"
    return PlannedResource(type_token, name, urn, True, "", "", [], inputs)


def service_account(stack: str, namespace: str | None, name: str | None, resource: str = "extra") -> PlannedResource:
    metadata = {k: v for k, v in (("namespace", namespace), ("name", name)) if v is not None}
    return _resource(SERVICE_ACCOUNT, resource, stack, {"metadata": metadata})


def workload(kind: str, stack: str, namespace: str | None, field: str, account: str) -> PlannedResource:
    first, rest = POD_SPECS[kind.removesuffix("Patch")]
    inputs = _nested(first, rest, {field: account, "containers": [{"name": "c", "image": "busybox:1.36"}]})
    inputs["metadata"] = {"name": "extra", **({"namespace": namespace} if namespace is not None else {})}
    return _resource(f"kubernetes:{kind}", "extra", stack, inputs)


# ---------------------------------------------------------------- generated stacks, namespaces and kinds
_STACK = st.from_regex(STACK_NAME, fullmatch=True)
_DEPLOYABLE = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
_OTHER_NAMESPACE = st.from_regex(DNS_LABEL, fullmatch=True).filter(lambda ns: ns not in PRINCIPALS)
_KIND = st.sampled_from(sorted(POD_SPECS)).flatmap(lambda k: st.sampled_from([k, k + "Patch"]))
_FIELD = st.sampled_from(["serviceAccountName", "serviceAccount"])


@MANY
@given(own=_STACK, other=_STACK, namespace=st.sampled_from(sorted(PRINCIPALS)))
def test_another_stacks_principal_is_refused_in_one_line_naming_the_resource(
    own: str, other: str, namespace: str
) -> None:
    name = PRINCIPALS[namespace](other)
    found = violations(service_account(own, namespace, name), POLICY)
    if name == PRINCIPALS[namespace](own):
        assert found == []
        return
    (line,) = found
    assert "\n" not in line and line.startswith(f"ServiceAccount 'extra' creates service account {name!r}"), line
    assert f"{namespace}/{name}" in line and f"stack {own!r} runs as" in line, line


@MANY
@given(own=_STACK, other=_STACK, kind=_KIND, field=_FIELD, namespace=st.sampled_from(sorted(PRINCIPALS)))
def test_a_pod_template_of_any_kind_running_as_another_stacks_principal_is_refused(
    own: str, other: str, kind: str, field: str, namespace: str
) -> None:
    name = PRINCIPALS[namespace](other)
    found = violations(workload(kind, own, namespace, field, name), POLICY)
    assert len(found) == (name != PRINCIPALS[namespace](own)), (kind, field, found)
    if found:
        assert found[0].startswith(f"{kind.rsplit(':', 1)[1]} 'extra' runs its pods as service account {name!r}")


@MANY
@given(own=_STACK, other=_STACK, namespace=_OTHER_NAMESPACE, kind=_KIND)
def test_the_same_names_in_any_other_namespace_are_other_principals_and_pass(
    own: str, other: str, namespace: str, kind: str
) -> None:
    """triton-prod in namespace `default` is PROJECT.svc.id.goog[default/triton-prod], which no stack binds."""
    for name in (triton_service_account(other), engine_service_account(other), "triton"):
        assert violations(service_account(own, namespace, name), POLICY) == []
        assert violations(workload(kind, own, namespace, "serviceAccountName", name), POLICY) == []


@MANY
@given(own=_STACK, other=_STACK)
def test_an_unset_namespace_is_judged_as_each_principal_namespace(own: str, other: str) -> None:
    """Without metadata.namespace the object lands in the provider's or the kubeconfig context's namespace
    (pulumi/pulumi-kubernetes#1896), which the pack cannot see: fail closed, except for the stack's own names."""
    for name_of in PRINCIPALS.values():
        found = violations(service_account(own, None, name_of(other)), POLICY)
        assert len(found) == (other != own), found
        if found:
            assert "in the namespace the provider or kubeconfig picks" in found[0]
        assert violations(service_account(own, None, name_of(own)), POLICY) == []


@MANY
@given(own=_STACK, tail=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True))
def test_every_name_of_the_shape_is_some_stacks_and_refused_unless_it_is_the_own(own: str, tail: str) -> None:
    """The pack knows one stack's name only: triton-X is stack X's principal for every X (principals.py keeps a name
    that fits as it is), so all of them are refused but the stack's own; the digest forms are among them."""
    for namespace, name_of in PRINCIPALS.items():
        account = name_of("x").removesuffix("-x")
        name = f"{account}-{tail}"
        assert principal_name(account, tail) == name  # it IS stack `tail`'s
        assert len(violations(service_account(own, namespace, name), POLICY)) == (name != name_of(own))


@MANY
@given(stack=_STACK)
def test_every_stacks_principals_have_the_shape_the_pack_refuses(stack: str) -> None:
    """The rule's soundness: whatever a stack is called, its names have the shape (none escapes as no stack's)."""
    assert principals.is_stack_principal(principals.TRITON_ACCOUNT, triton_service_account(stack))
    assert principals.is_stack_principal(principals.ENGINE_ACCOUNT, engine_service_account(stack))


def test_the_shared_triton_triton_is_refused_and_an_auto_named_account_is_judged_by_its_prefix() -> None:
    (shared,) = violations(service_account("dev", TRITON_NAMESPACE, "triton"), POLICY)
    assert "triton/triton, the principal every stack's Triton shared" in shared
    # No metadata.name: Pulumi names it after the resource with a random suffix.
    (auto,) = violations(service_account("dev", TRITON_NAMESPACE, None, resource="triton-prod"), POLICY)
    assert "'triton-prod-*'" in auto
    assert violations(service_account("dev", TRITON_NAMESPACE, None, resource="reader"), POLICY) == []


def test_values_unknown_at_preview_are_judged_on_up_or_fail_closed() -> None:
    """A name unknown at preview is judged on `up`; an unknown namespace counts as each principal namespace."""
    from pulumi.runtime.rpc import UNKNOWN

    assert violations(service_account("dev", TRITON_NAMESPACE, UNKNOWN), POLICY) == []
    assert len(violations(service_account("dev", UNKNOWN, "triton-prod"), POLICY)) == 1


# ---------------------------------------------------------------- the component's default principal
_PROJECT = st.from_regex(r"[A-Za-z0-9_.-]{1,40}", fullmatch=True)
_COMPONENT = st.from_regex(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)


@MANY
@given(project=_PROJECT, stack=_STACK, name=_COMPONENT)
def test_the_components_default_is_a_label_of_its_own_that_the_pack_never_refuses(
    project: str, stack: str, name: str
) -> None:
    account = component_service_account(project, stack, name)
    assert DNS_LABEL.fullmatch(account) and len(account) <= 63, account
    assert violations(service_account(stack, TRITON_NAMESPACE, account), POLICY) == []
    assert violations(service_account(stack, None, account), POLICY) == []


@MANY
@given(one=st.tuples(_PROJECT, _STACK, _COMPONENT), other=st.tuples(_PROJECT, _STACK, _COMPONENT))
def test_distinct_instances_get_distinct_default_accounts(
    one: tuple[str, str, str], other: tuple[str, str, str]
) -> None:
    """Distinct (project, stack, name): distinct names, up to the digest's 2^-32 per pair (principals.DIGEST_HEX)."""
    if one != other:
        assert component_service_account(*one) != component_service_account(*other)


# ---------------------------------------------------------------- must show: a dev plan naming triton-prod
def _dev_program_with(extra: Callable[[], None]) -> Plan:
    """The dev stack as `triton-gke plan` evaluates it (its __main__.py), with `extra` declared beside the system, the
    way a user adds a workload to the program."""

    def declare() -> None:
        runpy.run_path(str(stack_program()), run_name="__main__")
        extra()

    return run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)


def _batch_job_as_prod() -> None:
    """A Deployment in Triton's namespace running as triton-prod (an account someone created with kubectl)."""
    kubernetes.apps.v1.Deployment(
        "batch-scorer",
        metadata={"name": "batch-scorer", "namespace": TRITON_NAMESPACE},
        spec={
            "selector": {"matchLabels": {"app": "batch-scorer"}},
            "template": {
                "metadata": {"labels": {"app": "batch-scorer"}},
                "spec": {
                    "serviceAccountName": "triton-prod",
                    "containers": [{"name": "scorer", "image": "python:3.12-slim"}],
                },
            },
        },
    )


@pytest.fixture(scope="module")
def dev_with_prods_principal() -> Plan:
    return _dev_program_with(_batch_job_as_prod)


def deployment_as_prod(plan: Plan) -> PlannedResource:
    return next(r for r in plan.of_type(DEPLOYMENT) if r.name == "batch-scorer")


def test_a_dev_plan_with_service_account_name_triton_prod_is_refused_in_one_line(
    dev_with_prods_principal: Plan,
) -> None:
    """Must show (issue 44): the whole dev plan through every policy of the pack: one line, this one."""
    assert all_violations(dev_with_prods_principal) == [
        f"{POLICY} on {DEPLOYMENT} batch-scorer: Deployment 'batch-scorer' runs its pods as service account "
        "'triton-prod' in triton: that is triton/triton-prod, the Workload Identity principal of stack 'prod', one "
        "principal in every cluster of the project, so these pods would get what it was granted; stack 'dev' runs "
        "as triton/triton-dev or triton-engines/engine-builder-dev"
    ]
    triton = next(r for r in dev_with_prods_principal.of_type(DEPLOYMENT) if r.name == "triton-us-central1-deployment")
    assert triton.inputs["spec"]["template"]["spec"]["serviceAccountName"] == "triton-dev"  # inspected, and passes


def test_a_component_beside_dev_running_as_triton_prod_is_refused_for_both_objects() -> None:
    """A TritonOnCluster in dev's program told service_account_name='triton-prod': its ServiceAccount and its
    Deployment, one line each; left to its default, the same component passes."""

    def component(**extra: Any) -> Callable[[], None]:
        return lambda: TritonOnCluster("side", {"model_repository": REPOSITORY, **extra})  # type: ignore[typeddict-item]

    lines = all_violations(_dev_program_with(component(service_account_name="triton-prod")))
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{POLICY} on {SERVICE_ACCOUNT} triton-side-sa",
        f"{POLICY} on {DEPLOYMENT} triton-side-deployment",
    ], lines
    assert all_violations(_dev_program_with(component())) == []


def test_the_rule_inspects_every_account_the_shipped_plans_create(dev_plan: Plan) -> None:
    """Not a vacuous pass: dev's ServiceAccounts and pod templates are read, and each is dev's own or no stack's."""
    accounts = {a.inputs["metadata"]["name"] for a in dev_plan.of_type(SERVICE_ACCOUNT)}
    assert "triton-dev" in accounts
    for resource in dev_plan.resources:
        assert violations(resource, POLICY) == []
        crafted = copy.deepcopy(resource)
        if resource.type == SERVICE_ACCOUNT and resource.inputs["metadata"]["name"] == "triton-dev":
            crafted.inputs["metadata"]["name"] = "triton-staging"
            assert len(violations(crafted, POLICY)) == 1


def test_the_pack_judges_the_names_and_namespaces_of_the_one_naming_module() -> None:
    assert policies.PRINCIPAL_ACCOUNTS == {
        TRITON_NAMESPACE: principals.TRITON_ACCOUNT,
        ENGINE_NAMESPACE: principals.ENGINE_ACCOUNT,
    }
    assert policies.is_stack_principal is principals.is_stack_principal
