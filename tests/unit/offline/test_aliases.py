"""URNs and aliases in the offline plan are the engine's, and `--against` matches a moved resource by its aliases.

Sources (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8): pkg/resource/deploy/deployment.go generateURN (the
parent's whole qualified type), sdk/go/common/resource/urn/urn.go New, pkg/resource/deploy/step_generator.go
generateAliases / collapseAliasToUrn / inheritedChildAlias / getOldResource (URN first, then aliases).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pulumi
import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from tests.support.stored_plans import with_stored_project
from triton_gke.contracts.paths import ARRIVALS_FILE, LOCUSTFILE
from triton_gke.infra import system
from triton_gke.offline.lifecycle import applied_state, compare
from triton_gke.offline.plan_diff import index_records, load_plan
from triton_gke.offline.plan_view import plan_records
from triton_gke.offline.runtime import Plan, run_under_mocks

# `triton-gke plan --stack S --json` of each stack at 20975ba, before the components wrapped its resources.
BASELINES = PROJECT_DIR / "tests" / "data" / "plans-before-components"
STACKS = ("dev", "staging", "prod")


class Thing(pulumi.CustomResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Thing", name, {}, opts)


class Group(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Group", name, None, opts)
        Thing(f"{name}-inner", pulumi.ResourceOptions(parent=self))


def records(plan: Plan) -> dict[str, dict[str, Any]]:
    return index_records(plan_records(plan), plan.stack)


def before() -> None:
    Group("group")
    Thing("alone")


def after(aliased: bool = True) -> None:
    wrap = pulumi.ComponentResource("test:index:Wrap", "wrap")
    aliases = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)] if aliased else []
    Group("group", pulumi.ResourceOptions(parent=wrap, aliases=aliases))
    Thing("alone", pulumi.ResourceOptions(parent=wrap, aliases=aliases))


def test_urns_carry_the_parents_whole_qualified_type_and_no_root_stack_type() -> None:
    plan = run_under_mocks(after, "s", {}, "p")
    urns = {r.name: r.urn for r in plan.resources}
    assert urns["wrap"] == "urn:pulumi:s::p::test:index:Wrap::wrap"
    assert urns["group-inner"] == "urn:pulumi:s::p::test:index:Wrap$test:index:Group$test:index:Thing::group-inner"


def test_a_child_inherits_its_parents_alias() -> None:
    plan = run_under_mocks(after, "s", {}, "p")
    inner = next(r for r in plan.resources if r.name == "group-inner")
    assert inner.aliases == ["urn:pulumi:s::p::test:index:Group$test:index:Thing::group-inner"]


def test_moved_resources_are_unchanged_with_their_aliases_and_replaced_without() -> None:
    old = applied_state(records(run_under_mocks(before, "s", {}, "p")))
    kept = compare(old, records(run_under_mocks(after, "s", {}, "p")))
    # (offline/lifecycle.py treats every type outside triton-gke: as a provider's: the new wrapper shows as created)
    assert {c.key: c.action for c in kept if c.action != "unchanged"} == {"test:index:Wrap::wrap": "create"}
    lost = compare(old, records(run_under_mocks(lambda: after(aliased=False), "s", {}, "p")))
    assert {c.key for c in lost if c.action == "replace"} == {
        "test:index:Thing::alone",
        "test:index:Group::group",
        "test:index:Thing::group-inner",  # the descendant goes with its parent's alias
    }


def baseline(stack: str, tmp_path: Path, folder: Path = BASELINES) -> dict[str, dict[str, Any]]:
    """The committed plan of `stack` in `folder` (test_upgrade_from_release.py reads an older release's too)."""
    plain = tmp_path / f"{stack}.json"
    plain.write_bytes(gzip.decompress((folder / f"{stack}.json.gz").read_bytes()))
    plan = load_plan(plain)
    # The baselines pin URNs and aliases, not the load generator's files: the ConfigMap shipping them (k8s/loadtest.py)
    # is replaced whenever either changes (a ConfigMap's data forces replacement: infra/data/replacement_rules.yaml,
    # from pulumi-kubernetes provider/diff.go), so it holds today's text here.
    shipped = {LOCUSTFILE.name: LOCUSTFILE.read_text(), ARRIVALS_FILE.name: ARRIVALS_FILE.read_text()}
    for record in plan.values():
        data = record["inputs"].get("data") if record["type"] == "kubernetes:core/v1:ConfigMap" else None
        if isinstance(data, dict) and set(data) == set(shipped):
            record["inputs"]["data"] = shipped
    return plan


# Issue 32: Triton's Kubernetes service account is named per stack (triton-STACK, was triton in every stack), so the
# next `up` of a stack deployed before renames it: a new ServiceAccount (its metadata.name forces replacement) and the
# Workload Identity binding's new member (member forces replacement), both created before the old ones are deleted;
# the Deployment's serviceAccountName changes, an ordinary rolling update. Intended replacements, and the only ones.
RENAMED_SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount::triton-"
RENAMED_BINDING = "gcp:serviceaccount/iAMMember:IAMMember::models-workload-identity"


# Issue 44: inference needs a key; a stack deployed before gets the two generated keys and, per region, the Secret
# Triton reads them from and the one Locust sends them from. Created, nothing replaced; the only creations.
INFERENCE_KEY_RESOURCES = (
    "random:index/randomPassword:RandomPassword::triton-inference-key-a",
    "random:index/randomPassword:RandomPassword::triton-inference-key-b",
)
INFERENCE_KEY_SECRETS = ("kubernetes:core/v1:Secret::triton-", "kubernetes:core/v1:Secret::locust-")


def is_an_inference_key_creation(change: Any) -> bool:
    if change.action != "create":
        return False
    if change.key in INFERENCE_KEY_RESOURCES:
        return True
    return change.key.startswith(INFERENCE_KEY_SECRETS) and change.key.endswith(
        ("-inference-keys", "-inference-headers")
    )


def is_the_service_account_rename(change: Any) -> bool:
    if change.action != "replace":
        return False
    if change.key.startswith(RENAMED_SERVICE_ACCOUNT) and change.key.endswith("-sa"):
        return change.paths == ("metadata.name",)
    return change.key == RENAMED_BINDING and change.paths == ("member",)


@pytest.mark.parametrize("stack", STACKS)
def test_the_wrapped_stacks_keep_every_deployed_resource(stack: str, tmp_path: Path) -> None:
    old = baseline(stack, tmp_path)
    changes = compare(applied_state(old), records(evaluate(stack, **with_stored_project(old))))
    renamed = [c for c in changes if is_the_service_account_rename(c)]
    keys = [c for c in changes if is_an_inference_key_creation(c)]
    expected = renamed + keys
    assert [c.line() for c in changes if c.action in ("create", "replace", "delete") and c not in expected] == []
    regions = {c.name for c in changes if c.key.startswith("gcp:container/cluster:Cluster::")}
    assert len(renamed) == len(regions) + 1, [c.line() for c in renamed]  # a ServiceAccount per region, one binding
    assert len(keys) == 2 + 2 * len(regions), [c.line() for c in keys]  # two keys; two Secrets per region
    triton = [c for c in changes if c.key.startswith("kubernetes:apps/v1:Deployment::triton-")]
    assert len(triton) == len(regions)
    assert all(c.action == "update" and "spec.template.spec.serviceAccountName" in c.paths for c in triton), triton


def test_without_one_alias_that_resource_and_its_descendants_are_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The model store loses its alias: its bucket and IAM members under it become new resources."""
    real = system.ModelStore

    def unaliased(name: str, args: Any, opts: pulumi.ResourceOptions) -> Any:
        return real(name, args, opts=pulumi.ResourceOptions(parent=opts.parent))

    stored = baseline("dev", tmp_path)
    old = applied_state(stored)
    monkeypatch.setattr(system, "ModelStore", unaliased)
    changes = compare(old, records(evaluate("dev", **with_stored_project(stored))))
    # (less the intended rename of Triton's Kubernetes service account, above)
    replaced = {c.key for c in changes if c.action == "replace" and not c.key.startswith(RENAMED_SERVICE_ACCOUNT)}
    below_store = {k for k, r in old.items() if r["parent"] == "models" and not r["type"].startswith("triton-gke:")}
    assert replaced and replaced == below_store & replaced
    created = {c.key for c in changes if c.action in ("create", "delete") and not is_an_inference_key_creation(c)}
    assert created == set()  # (less the inference key's creations, above)
