"""A stack's Workload Identity principals (policy/principals.py): one formula for the program and the policy pack.

Under Workload Identity Federation for GKE a Kubernetes service account is the principal
serviceAccount:PROJECT.svc.id.goog[NAMESPACE/KSA], the same in every cluster of the project
(https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity), so two stacks of
one project that get the same account name share what either binds to it (issue 43, item 3: `engine-builder-STACK`
cut at 63 characters gave every stack whose names share 48 characters one member, and an invalid one where the 48th
character is '-'). What a user would notice: the names each plan binds, and which plans the pack lets through.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, stack_settings
from tests.unit.policy.test_policies import all_violations, violations
from triton_gke.offline.runtime import Plan, PlannedResource, run_under_mocks
from triton_gke.policy import policies, principals
from triton_gke.policy.principals import engine_service_account, triton_service_account
from triton_gke.settings.stack import STACK_NAME

# A DNS-1123 label (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names), written
# out here rather than taken from the module under test.
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_MAX = 63
WI = "workload-identity-per-stack"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
JOB = "kubernetes:batch/v1:Job"
POOL = f"serviceAccount:{stack_settings('dev')['gcp:project']}.svc.id.goog"  # the long stacks plan dev's config
MANY = settings(max_examples=300, deadline=None)

# Two deployable stack names of 55 characters that share their first 48; the 48th is '-'.
SHARED_PREFIX = "inference-platform-team-europe-west4-production-"
LONG_STACKS = (SHARED_PREFIX + "canary1", SHARED_PREFIX + "stable1")


def _is_label(name: str) -> bool:
    return len(name) <= LABEL_MAX and LABEL.fullmatch(name) is not None


def _before_issue_43_engine_name(stack: str) -> str:
    """k8s/engine_build.py engine_service_account as released before this fix: cut, no digest."""
    return f"engine-builder-{stack}"[:63]


# ---------------------------------------------------------------- generated stack names
# Any Pulumi stack name (settings/stack.py STACK_NAME: letters, digits, '-', '_', '.', at most 100 characters).
_ANY_STACK = st.from_regex(STACK_NAME, fullmatch=True)
_LOWER = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
# Names built to stress the cut: a shared 48-character prefix (its last character often '-'), then short tails that
# differ in case, '_' or '.', or by a trailing '-'.
_PREFIX_48 = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=47, max_size=47).map(
    lambda head: "a" + head
) | st.just(SHARED_PREFIX)
_TAIL = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", max_size=52)


@st.composite
def _sibling_stacks(draw: st.DrawFn) -> tuple[str, str]:
    """Two stack names with one 48-character prefix (up to 100 characters, Pulumi's limit)."""
    prefix = draw(_PREFIX_48)
    return prefix + draw(_TAIL), prefix + draw(_TAIL)


_STACKS = _ANY_STACK | _sibling_stacks().map(lambda pair: pair[0]) | _LOWER.map(lambda s: s + "-")


@MANY
@given(_STACKS)
def test_every_principal_name_is_a_dns_label_and_kept_where_it_already_is_one(stack: str) -> None:
    for account, name in (("triton", triton_service_account(stack)), ("engine-builder", engine_service_account(stack))):
        assert _is_label(name), (stack, name)
        plain = f"{account}-{stack}"
        # byte-identical where the plain name is a label; else it ends with 8 hex digits of the plain text's SHA-256
        assert (name == plain) == _is_label(plain), (stack, name)
        if name != plain:
            assert name.endswith("-" + hashlib.sha256(plain.encode()).hexdigest()[:8]), (stack, name)


@MANY
@given(_sibling_stacks())
def test_stacks_sharing_48_characters_get_distinct_principals(pair: tuple[str, str]) -> None:
    """Distinct up to the odds in principals.DIGEST_HEX (32 bits: 2^-32 for a pair), here for any pair generated."""
    one, other = pair
    if one != other:
        assert triton_service_account(one) != triton_service_account(other)
        assert engine_service_account(one) != engine_service_account(other)


@MANY
@given(_ANY_STACK, _ANY_STACK)
def test_distinct_stacks_get_distinct_principals(one: str, other: str) -> None:
    if one != other:
        assert triton_service_account(one) != triton_service_account(other)
        assert engine_service_account(one) != engine_service_account(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Dev", "dev"),
        ("a_b", "a.b"),
        ("a_b", "a-b"),
        ("x" * 80, "x" * 81),
        ("x" * 60 + "a", "x" * 60 + "b"),
        LONG_STACKS,
    ],
)
def test_stacks_that_sanitize_or_cut_alike_still_differ(one: str, other: str) -> None:
    for name_of in (triton_service_account, engine_service_account):
        names = {name_of(one), name_of(other)}
        assert len(names) == 2 and all(_is_label(n) for n in names), names


# ---------------------------------------------------------------- no running stack's account changes
def test_names_that_fit_are_todays() -> None:
    """The shipped stacks and other names that fit keep exactly the accounts they run as today."""
    stacks = ("dev", "staging", "prod", "team-a", "x1", "a" * 48, "a" * 56)
    assert [triton_service_account(s) for s in stacks] == [f"triton-{s}" for s in stacks]
    assert [engine_service_account(s) for s in stacks[:6]] == [f"engine-builder-{s}" for s in stacks[:6]]
    assert [engine_service_account(s) for s in stacks[:6]] == [_before_issue_43_engine_name(s) for s in stacks[:6]]


def test_triton_names_with_a_digest_are_the_ones_issue_32_gave() -> None:
    """Triton's account carried a digest before (contracts/naming.py dns_label at 550d7c1); those stay too."""
    stacks = ("Prod", "a_b", "a.b", "x" * 80, "Team.Inference_EU", "a" * 46 + "-" + "b" * 20)
    assert [triton_service_account(s) for s in stacks] == [
        "triton-prod-4b5d54b0",
        "triton-a-b-2f261927",
        "triton-a-b-d8598fbd",
        "triton-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-77be97c2",
        "triton-team-inference-eu-27d5dc47",
        "triton-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-8903d60c",  # the cut's last '-' dropped, not doubled
    ]
    # nothing left after sanitizing "-": the digest alone
    assert principals.principal_name("", "") == hashlib.sha256(b"-").hexdigest()[:8]


def test_the_released_engine_name_collided_and_was_invalid_for_these_stacks() -> None:
    """The bug: before, both long stacks got one member, ending with '-' (not a label); now each its own."""
    old = {_before_issue_43_engine_name(s) for s in LONG_STACKS}
    assert len(old) == 1 and not _is_label(old.pop())
    assert [engine_service_account(s) for s in LONG_STACKS] == [
        "engine-builder-inference-platform-team-europe-west4-pr-0cca16d4",  # sha256("engine-builder-" + stack)
        "engine-builder-inference-platform-team-europe-west4-pr-0a25a201",
    ]
    assert [triton_service_account(s) for s in LONG_STACKS] == [f"triton-{s}" for s in LONG_STACKS]  # 62: fit


# ---------------------------------------------------------------- one home: the program and the pack
def test_the_program_binds_the_names_of_this_module() -> None:
    from triton_gke.infra import engine_writer, system

    assert system.triton_service_account is triton_service_account
    assert system.engine_service_account is engine_service_account
    assert engine_writer.engine_service_account is engine_service_account
    assert policies.triton_service_account is triton_service_account
    assert policies.engine_service_account is engine_service_account


def test_the_label_rule_is_the_contracts() -> None:
    """contracts/ is the ground room and may not import policy/, so its DNS_LABEL is a second spelling of the rule."""
    from triton_gke.contracts import naming

    assert (naming.DNS_LABEL.pattern, naming.DNS_LABEL_MAX) == (principals.DNS_LABEL.pattern, principals.DNS_LABEL_MAX)


def test_the_packs_namespaces_are_the_programs() -> None:
    from triton_gke.contracts.workloads import TRITON_NAMESPACE
    from triton_gke.k8s.engine_build import ENGINE_NAMESPACE

    assert (policies.TRITON_NAMESPACE, policies.ENGINE_NAMESPACE) == (TRITON_NAMESPACE, ENGINE_NAMESPACE)


@pytest.fixture(scope="module")
def standalone_pack() -> Iterator[ModuleType]:
    """policy/policies.py loaded as the CLI loads it: a top-level module with only its folder on sys.path, so it
    imports `principals` (not triton_gke.policy.principals); sys.path and sys.modules restored afterwards."""
    folder = Path(policies.__file__).parent
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("policies", folder / "policies.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["policies"] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
        assert module.triton_service_account.__module__ == "principals"
        yield module
    finally:
        sys.path.remove(str(folder))
        for name in set(sys.modules) - before:
            del sys.modules[name]


@MANY
@given(stack=_STACKS)
def test_the_pack_loaded_alone_names_each_stacks_principals_as_the_program(
    standalone_pack: ModuleType, stack: str
) -> None:
    from triton_gke.contracts.workloads import TRITON_NAMESPACE
    from triton_gke.k8s.engine_build import ENGINE_NAMESPACE

    assert standalone_pack.stack_principals(stack) == (
        (TRITON_NAMESPACE, triton_service_account(stack)),
        (ENGINE_NAMESPACE, engine_service_account(stack)),
    )


@pytest.mark.parametrize(("constant", "value"), [("DIGEST_HEX", 12), ("ENGINE_ACCOUNT", "engine-writer")])
def test_a_change_to_the_one_home_changes_the_program_and_the_pack_alike(
    monkeypatch: pytest.MonkeyPatch, constant: str, value: object
) -> None:
    from triton_gke.infra import engine_writer

    stack = LONG_STACKS[0]
    before = engine_writer.engine_service_account(stack)
    monkeypatch.setattr(principals, constant, value)
    after = engine_writer.engine_service_account(stack)
    assert after != before and policies.stack_principals(stack)[1] == ("triton-engines", after)


# ---------------------------------------------------------------- two long stacks, planned and judged
@pytest.fixture(scope="module")
def long_plans(engine_plan: Callable[..., Plan]) -> dict[str, Plan]:
    """Each long stack planned with dev's settings and engine builds on (so both principals are bound), declared as
    __main__.py declares it under that stack's name (no Pulumi.<stack>.yaml: the config is dev's)."""
    import pulumi

    from triton_gke.infra.config import load_stack_settings
    from triton_gke.infra.system import TritonGkeSystem, TritonGkeSystemArgs

    engine_plan("dev")  # builds the repository dev's engine settings serve
    repository = str(engine_plan.repository("dev"))  # type: ignore[attr-defined]

    def declare() -> None:
        args = TritonGkeSystemArgs(settings=load_stack_settings(), model_repository_dir=repository)
        TritonGkeSystem("triton-gke", args, child_aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)])

    config = stack_settings("dev", tritonBuildEngines=True)
    return {stack: run_under_mocks(declare, stack, config, PROJECT) for stack in LONG_STACKS}


def _bound(plan: Plan) -> dict[str, str]:
    return {b.name: b.inputs["member"] for b in plan.of_type(SA_IAM)}


def _as_stack(resource: PlannedResource, stack: str) -> PlannedResource:
    """The resource as another stack's plan would hold it: the same inputs under that stack's URN."""
    return dataclasses.replace(resource, urn=f"urn:pulumi:{stack}::{resource.urn.split('::', 1)[1]}")


def test_two_55_character_stacks_bind_distinct_members(long_plans: dict[str, Plan]) -> None:
    """Must show (issue 43): stacks of 55 characters sharing 48 bind their writers and readers to their own members,
    and each Job and Triton runs as the account its binding names."""
    members = {}
    for stack, plan in long_plans.items():
        bound = _bound(plan)
        engine, triton = engine_service_account(stack), triton_service_account(stack)
        assert bound["engines-workload-identity"] == f"{POOL}[triton-engines/{engine}]"
        assert bound["models-workload-identity"] == f"{POOL}[triton/{triton}]"
        (job,) = plan.of_type(JOB)
        assert job.inputs["spec"]["template"]["spec"]["serviceAccountName"] == engine
        accounts = {
            (a.inputs["metadata"]["namespace"], a.inputs["metadata"]["name"]) for a in plan.of_type(SERVICE_ACCOUNT)
        }
        assert {("triton-engines", engine), ("triton", triton)} <= accounts
        members[stack] = set(bound.values())
    one, other = LONG_STACKS
    assert not members[one] & members[other]


def test_the_pack_accepts_each_long_stacks_plan_for_its_own_stack_only(long_plans: dict[str, Plan]) -> None:
    for stack, plan in long_plans.items():
        assert all_violations(plan) == [], stack
        (other,) = [s for s in LONG_STACKS if s != stack]
        for grant in plan.of_type(SA_IAM):
            if "svc.id.goog" in grant.inputs["member"]:
                (message,) = violations(_as_stack(grant, other), WI)
                assert f"not one of the service accounts of stack {other!r}" in message, message
