"""Upgrading a stack deployed from an earlier release: the lifecycle comparison (`plan --against`) of that release's
committed plans against today's program shows exactly the expected changes, and nothing is replaced without a reason.

tests/data/plans-before-lifecycle/STACK.json.gz: `python -m offline.plan --stack STACK --json` at 9575875 (the commit
before 0ba8942, issue 19's lifecycle work: no ZonalNegs, no node_drain_config, no lifecycle contract), run in a
`git archive` of that commit with its own `python -m offline.build_models --stack dev` (the model repository digest
in those plans is that builder's). So a rule that turns an in-place update into a replacement (node_drain_config, the
node pools' upgrade settings, a cluster's maintenance policy) fails here: infra/data/replacement_rules.yaml is read
against a real upgrade, not only against today's plan.

When the program changes what an upgrade does, update EXPECTED below with the reason, in the same commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from tests.support.stored_plans import with_stored_project
from tests.unit.offline.test_aliases import baseline
from triton_gke.offline.lifecycle import applied_state, compare, normalize
from triton_gke.offline.plan_diff import index_records
from triton_gke.offline.plan_view import plan_records

RELEASE_PLANS = PROJECT_DIR / "tests" / "data" / "plans-before-lifecycle"
REGIONS = {
    "dev": ("us-central1",),
    "staging": ("europe-west4", "us-central1"),
    "prod": ("asia-east1", "europe-west4", "us-central1"),
}
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
COMMAND = "command:local:Command"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
SECRET = "kubernetes:core/v1:Secret"
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
TRITON_TEMPLATE = "spec.template.spec"


def expected(stack: str) -> dict[str, tuple[str, frozenset[str], str]]:
    """TYPE::NAME -> (action, the changed input paths (normalized), why). Every entry says which change caused it."""
    why_negs = "ZonalNegs (issue 19): the NEG cleanup and wait are new Commands"
    why_pools = (
        "node_drain_config (issue 19) and upgrade_settings (issue 32), both updated in place "
        "(replacement_rules.yaml: not ForceNew, nodePoolUpdate)"
    )
    why_cluster = "issue 32: a maintenance policy and a supported GKE version, updated in place"
    why_triton = (
        "the lifecycle contract (preStop, grace period, readiness gate, --exit-timeout-secs), the model "
        "repository's new digest (builder v2) and the per-stack service account (issue 32): a rolling update"
    )
    why_sa = (
        "issue 32: a per-stack Kubernetes service account; metadata.name forces replacement (a new name: no outage)"
    )
    why_key = "issue 44: inference needs a key (inferenceAuth); two generated keys, a Secret per region for each side"
    result: dict[str, tuple[str, frozenset[str], str]] = {
        f"{RANDOM_PASSWORD}::triton-inference-key-a": ("create", frozenset(), why_key),
        f"{RANDOM_PASSWORD}::triton-inference-key-b": ("create", frozenset(), why_key),
        f"{COMMAND}::models-sync": (
            "replace",
            frozenset({"create", "triggers[]", "update"}),
            "the model repository's digest (builder v2) is in its triggers: the sync runs again",
        ),
        "gcp:serviceaccount/iAMMember:IAMMember::models-workload-identity": (
            "replace",
            frozenset({"member"}),
            "issue 32: the bucket reader's Workload Identity member names the per-stack service account",
        ),
    }
    for region in REGIONS[stack]:
        result[f"{COMMAND}::negs-{region}-cleanup"] = ("create", frozenset(), why_negs)
        result[f"{COMMAND}::negs-{region}-ready"] = ("create", frozenset(), why_negs)
        result[f"{CLUSTER}::gke-{region}"] = (
            "update",
            frozenset({"maintenancePolicy", "minMasterVersion"}),
            why_cluster,
        )
        for pool in ("cpu", "gpu"):
            result[f"{NODE_POOL}::gke-{region}-{pool}"] = (
                "update",
                frozenset({"nodeDrainConfigs", "upgradeSettings"}),
                why_pools,
            )
        result[f"{DEPLOYMENT}::triton-{region}-deployment"] = (
            "update",
            frozenset(
                {
                    "spec.template.metadata.annotations.triton-gke/model-repository-digest",
                    # red team 44, finding 4b: the active inference key's digest, so a new key rolls the pods
                    "spec.template.metadata.annotations.triton-gke/inference-key-digest",
                    # issue 44 adds the inference restrictions (the list grows: the whole args change) and the key's env
                    f"{TRITON_TEMPLATE}.containers[].args",
                    f"{TRITON_TEMPLATE}.containers[].env",
                    f"{TRITON_TEMPLATE}.containers[].lifecycle",
                    f"{TRITON_TEMPLATE}.readinessGates",
                    f"{TRITON_TEMPLATE}.serviceAccountName",
                    f"{TRITON_TEMPLATE}.terminationGracePeriodSeconds",
                    # issue 43: pods spread over the region's zones (ScheduleAnyway), a rolling update
                    f"{TRITON_TEMPLATE}.topologySpreadConstraints",
                }
            ),
            why_triton,
        )
        result[f"{SERVICE_ACCOUNT}::triton-{region}-sa"] = ("replace", frozenset({"metadata.name"}), why_sa)
        # issue 44: inference needs a key. Triton reads both keys from a Secret (its args name the slot's), Locust
        # sends both from a Secret of its own namespace (an env change of its pods: a rolling update).
        result[f"{SECRET}::triton-{region}-inference-keys"] = ("create", frozenset(), why_key)
        result[f"{SECRET}::locust-{region}-inference-headers"] = ("create", frozenset(), why_key)
        for role in ("master", "worker"):
            result[f"{DEPLOYMENT}::locust-{region}-{role}"] = (
                "update",
                frozenset({"spec.template.spec.containers[].env"}),
                why_key,
            )
    if stack != "dev":  # the global load balancer
        why_lb = (
            "the lifecycle contract's health check and connection draining (lbDrainingTimeoutSeconds), and the "
            "per-endpoint rate today's settings give (maxRatePerEndpoint), all in place"
        )
        for port in ("grpc", "http"):
            result[f"gcp:compute/backendService:BackendService::global-{port}"] = (
                "update",
                frozenset({"backends[].maxRatePerEndpoint", "connectionDrainingTimeoutSec"}),
                why_lb,
            )
        result["gcp:compute/healthCheck:HealthCheck::global-ready"] = (
            "update",
            frozenset({"checkIntervalSec", "timeoutSec", "unhealthyThreshold"}),
            why_lb,
        )
        result["gcp:compute/uRLMap:URLMap::global-routes"] = (
            "update",
            frozenset({"pathMatchers[].routeRules"}),
            "the retry policy on the inference routes (connect-failure, refused-stream), and a route rule ahead of "
            "them answering GET /v2/models/stats with 404 (issue 44's red team), in place",
        )
    return result


def release_plan(stack: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The release's plan, with today's load generator files (test_aliases.baseline says why)."""
    return baseline(stack, tmp_path, RELEASE_PLANS)


@pytest.mark.parametrize("stack", tuple(REGIONS))
def test_upgrading_from_the_release_before_the_lifecycle_work_changes_exactly_what_is_expected(
    stack: str, tmp_path: Path
) -> None:
    old = release_plan(stack, tmp_path)
    today = evaluate(stack, **with_stored_project(old))
    changes = compare(applied_state(old), index_records(plan_records(today), stack))
    got = {
        c.key: (c.action, frozenset(normalize(p) for p in c.paths), c.line())
        for c in changes
        if c.action != "unchanged"
    }
    wanted = expected(stack)
    unexpected = {k: v[2] for k, v in got.items() if k not in wanted}
    missing = {k: v[2] for k, v in wanted.items() if k not in got}
    assert not unexpected, f"{stack}: changes nobody explained (add them to EXPECTED with the reason): {unexpected}"
    assert not missing, f"{stack}: expected changes that no longer happen (remove them from EXPECTED): {missing}"
    for key, (action, paths, why) in wanted.items():
        got_action, got_paths, line = got[key]
        assert (got_action, got_paths) == (action, paths), (
            f"{stack}: {key} should be {action} of {sorted(paths)} ({why}), is: {line}"
        )
    outages = [c.line() for c in changes if c.outage]
    assert not outages, f"{stack}: an upgrade deletes something before creating it: {outages}"


def test_the_node_drain_config_is_new_since_that_release_and_an_in_place_update(tmp_path: Path) -> None:
    """The mutant this test exists for: nodeDrainConfigs classified as replace would replace every pool here."""
    old = release_plan("dev", tmp_path)
    assert not any("nodeDrainConfigs" in r["inputs"] for r in old.values() if r["type"] == NODE_POOL)
    assert expected("dev")[f"{NODE_POOL}::gke-us-central1-gpu"][0] == "update"
