"""Upgrading a stack deployed with release 0.3.0: the lifecycle comparison (`plan --against`) of 0.3.0's plans of dev,
staging and prod (and of dev with `tritonBuildEngines`, the path issue 43 changed most) against today's program shows
exactly the changes in EXPECTED, each with its reason, and every replacement, delete, delete-first outage or node
recreation among them is announced in CHANGELOG.md's Unreleased section. A change that replaces something nobody
announced turns this file red.

tests/data/plans-release-0.3.0/CASE.json.gz is `triton-gke plan --stack STACK [--set ...] --json` of release 0.3.0
(commit 75fb7e5, "Release 0.3.0"), run by 0.3.0's own package in a `git archive` of that commit, after its own
`triton-gke model-repo` with the same options (the model repository's digest is in the upload's triggers), with the
day the tests judge versions on. From the repository root, with `make setup` done:

    rm -rf /tmp/rel030 && mkdir -p /tmp/rel030/src && git archive 75fb7e5 | tar -x -C /tmp/rel030/src
    .venv/bin/python -m venv /tmp/rel030/venv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/rel030/venv/lib/python3.11/site-packages/zz_deps.pth
    /tmp/rel030/venv/bin/python -m pip install --no-deps --editable /tmp/rel030/src
    (cd /tmp/rel030/src && /tmp/rel030/venv/bin/python -c \
        'import triton_gke, triton_gke.infra.cluster as c; print(triton_gke.__version__, c.__file__)')
    release_plan() {  # CASE STACK [--set KEY=VALUE]
        (cd /tmp/rel030/src && export TRITON_GKE_TODAY=2026-12-03 &&
         ../venv/bin/triton-gke model-repo --stack "${@:2}" >/dev/null &&
         ../venv/bin/triton-gke plan --stack "${@:2}" --json) | gzip -n -9 > tests/data/plans-release-0.3.0/$1.json.gz
    }
    release_plan dev dev; release_plan staging staging; release_plan prod prod
    release_plan dev-engines dev --set tritonBuildEngines=true

The check line must print `0.3.0 /tmp/rel030/src/infra/cluster.py`. Why a venv of its own: 0.3.0 maps its rooms
(`triton_gke.infra` is `infra/`, ...) by pyproject's package-dir, which only its editable install (0.3.0's `make
setup` step 5/5) provides, and this checkout's .venv puts this checkout on sys.path (its editable .pth), so it would
import today's code. The .pth line adds .venv's installed dependencies without processing .venv's own .pth files:
0.3.0's requirements.txt and constraints.txt pin the same versions (today's only add jedi and parso). Every one of
the 90 triton_gke modules a plan imports was checked to come from /tmp/rel030/src when these files were made, and a
second run gave the same bytes.

The plans are compared as 0.3.0 wrote them: unlike tests/unit/offline/test_upgrade_from_release.py, the load
generator's files are not replaced by today's, because a changed file replaces its ConfigMap on a real upgrade too.

When the program changes what an upgrade from 0.3.0 does, update EXPECTED with the reason in the same commit; a
replacement, delete or node recreation also needs its phrase in CHANGELOG.md's Unreleased section (`announced_by`).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, stack_settings
from tests.support.stored_plans import with_stored_project
from triton_gke.offline.lifecycle import Change, applied_state, compare, normalize
from triton_gke.offline.plan_diff import index_records
from triton_gke.offline.plan_view import plan_records
from triton_gke.offline.runtime import Plan

RELEASE_PLANS = PROJECT_DIR / "tests" / "data" / "plans-release-0.3.0"
CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
# Case (the plan file's name) -> the stack and the settings both plans were made with.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "dev": ("dev", {}),
    "staging": ("staging", {}),
    "prod": ("prod", {}),
    "dev-engines": ("dev", {"tritonBuildEngines": True}),
}
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
COMMAND = "command:local:Command"
JOB = "kubernetes:batch/v1:Job"
TRITON_TEMPLATE = "spec.template.spec"
# Pulumi's actions an operator must be told of before the next `up`: the resource goes away, for a moment or for
# good. Delete-first outages, node recreations and disruptions of in-place updates count too (needs_announcement).
ANNOUNCED_ACTIONS = ("replace", "delete")


@dataclass(frozen=True)
class Expected:
    """One change an upgrade from 0.3.0 makes: what Pulumi does, to which inputs (normalized), and why."""

    action: str
    paths: frozenset[str]
    why: str
    deleted_first: bool = False  # lifecycle's outage: the old one is deleted before the new one exists
    announced_by: str = ""  # a phrase of CHANGELOG.md's Unreleased section that announces it (replace/delete/...)


def expected(case: str) -> dict[str, Expected]:
    """TYPE::NAME -> Expected, for every resource an upgrade of `case` from 0.3.0 touches."""
    stack, settings = CASES[case]
    engines = bool(settings.get("tritonBuildEngines"))
    result: dict[str, Expected] = {}
    for region in regions(stack):
        result[f"{CLUSTER}::gke-{region}"] = _maintenance_window(stack, region)
        result[f"{DEPLOYMENT}::triton-{region}-deployment"] = _triton_rollout(engines)
        result[f"{CONFIG_MAP}::locust-{region}-locustfile"] = Expected(
            "replace",
            frozenset({"data.arrivals.py", "data.locustfile.py"}),
            # A ConfigMap's data forces replacement (pulumi-kubernetes provider/pkg/provider/diff.go: core/v1
            # ConfigMap: properties{".binaryData", ".data"}), and its fixed name makes the provider delete it first
            # (offline/lifecycle.py delete_first).
            "loadtest/arrivals.py gained a comment in 340b846 (issue 34's layout), and the locustfile sends the "
            "inference key's headers (issue 44): the load generator's ConfigMap `locustfile` ships the files' text, "
            "so it is deleted and created again; Triton and serving untouched",
            deleted_first=True,
            announced_by="locust-REGION-locustfile",
        )
        if engines:
            result[f"{JOB}::engines-{region}-job"] = _engine_job()
        result.update(_inference_key(region))
    result.update(
        {
            f"random:index/randomPassword:RandomPassword::triton-inference-key-{slot}": Expected(
                "create", frozenset(), "issue 44: the inference keys, one per slot, shared by every region"
            )
            for slot in ("a", "b")
        }
    )
    if engines:
        result.update(_staged_upload())
    if stack != "dev":  # the global load balancer
        result["gcp:compute/uRLMap:URLMap::global-routes"] = Expected(
            "update",
            frozenset({"pathMatchers[].routeRules"}),
            "red team of issue 44: GET /v2/models/stats answered 404 by a route rule ahead of the others, in place "
            "(routeRules are updated in place: replacement_rules.yaml, resource_compute_url_map.go)",
        )
    return result


def _inference_key(region: str) -> dict[str, Expected]:
    """Issue 44: inference needs a key (inferenceAuth). Triton reads it from a Secret of its namespace; Locust sends
    both slots' keys from a Secret of its own, so its Deployments roll (an update of the pod template, no outage)."""
    secrets = {
        f"kubernetes:core/v1:Secret::triton-{region}-inference-keys": "the inference keys Triton's pods read",
        f"kubernetes:core/v1:Secret::locust-{region}-inference-headers": "the headers Locust sends with each inference",
    }
    result = {key: Expected("create", frozenset(), f"issue 44: {why}") for key, why in secrets.items()}
    for role in ("master", "worker"):
        result[f"{DEPLOYMENT}::locust-{region}-{role}"] = Expected(
            "update",
            frozenset({f"{TRITON_TEMPLATE}.containers[].env"}),
            "issue 44: Locust's inference_headers variable from its Secret, a rolling update",
        )
    return result


def regions(stack: str) -> tuple[str, ...]:
    """The stack file's `regions`, in its order (the order the default maintenance windows are handed out in)."""
    return tuple(json.loads(stack_settings(stack)["triton-gke:regions"]))


# Issue 43 point 4 (settings/maintenance.py): each region its own default window, from its position in `regions`:
# 7 hours on Saturday and Sunday at 01:00, 09:00 or 17:00 UTC (0.3.0: 01:00-09:00 in every region). The first region
# keeps its start, so only its end moves; SetMaintenancePolicy updates it in place (replacement_rules.yaml's note on
# maintenancePolicy, from resource_container_cluster.go).
WINDOW_MOVED = frozenset({"maintenancePolicy.recurringWindow.endTime", "maintenancePolicy.recurringWindow.startTime"})
WINDOW_SHORTENED = frozenset({"maintenancePolicy.recurringWindow.endTime"})


def _maintenance_window(stack: str, region: str) -> Expected:
    return Expected(
        "update",
        WINDOW_SHORTENED if regions(stack)[0] == region else WINDOW_MOVED,
        "issue 43 point 4: the region's own maintenance window (no two regions of a stack in maintenance at once), "
        "updated in place",
    )


def _triton_rollout(engines: bool) -> Expected:
    # A change of .spec.template is a rollout ("A Deployment's rollout is triggered if and only if the Deployment's
    # Pod template (that is, .spec.template) is changed",
    # https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#updating-a-deployment), one pod at a
    # time under Triton's rollout numbers (contracts/triton.py): no outage.
    paths = {f"{TRITON_TEMPLATE}.topologySpreadConstraints"}
    paths |= {f"{TRITON_TEMPLATE}.containers[].args", f"{TRITON_TEMPLATE}.containers[].env"}
    why = "issue 43 point 4: Triton's pods spread over the region's zones (ScheduleAnyway), a rolling update"
    why += "; issue 44: inference needs the key (the restricted inference group on HTTP and gRPC, from its Secret)"
    # Red team 44, finding 4b: a digest of the active key in the pod template, so replacing that key rolls the pods.
    paths.add("spec.template.metadata.annotations.triton-gke/inference-key-digest")
    why += ", and its digest in the pod template (a new key rolls the pods)"
    if engines:
        paths.add("spec.template.metadata.annotations.triton-gke/model-repository-digest")
        why += "; the engine repository's new digest (plan models served as tensorrt_plan since 0.3.0)"
    return Expected("update", frozenset(paths), why)


def _engine_job() -> Expected:
    """The engine-build Job of a region: its pod template changed, and a Job's .spec.template forces replacement."""
    return Expected(
        "replace",
        frozenset(
            {
                "spec.template.metadata.annotations.triton-gke/model-repository-digest",
                f"{TRITON_TEMPLATE}.containers[].args[]",
                f"{TRITON_TEMPLATE}.containers[].image",
                f"{TRITON_TEMPLATE}.initContainers[].args[]",
                f"{TRITON_TEMPLATE}.initContainers[].image",
                "spec.ttlSecondsAfterFinished",
            }
        ),
        # pulumi-kubernetes provider/pkg/provider/diff.go: batch/v1 Job: ".spec.template" (and completions,
        # parallelism, selector) force replacement. The Job is auto-named: created before the old one is deleted.
        "since 0.3.0 (CHANGELOG Fixed): the build reads each plan model's inputs, the gcloud image is a release, the "
        "Job no longer expires; and the repository's digest: a new Job builds the plans again (a GPU node beside "
        "Triton's), and with issue 43 point 2 the pin waits for it",
        announced_by="engines-REGION-job",
    )


def _staged_upload() -> dict[str, Expected]:
    return {
        f"{COMMAND}::models-sync": Expected(
            "replace",
            frozenset({"create", "triggers[]", "update"}),
            # pulumi-command replaces a Command whose triggers change (its replaceOnChanges, lifecycle.py rules):
            # the upload runs again, now as `sync --stage` (new version folders beside the live ones).
            "issue 43 point 2: the upload stages (`sync --stage`); and the engine repository's new digest",
            announced_by="models-sync",
        ),
        f"{COMMAND}::models-pin-sync": Expected(
            "create",
            frozenset(),
            "issue 43 point 2: the pinning sync, after every region's engine-build Job completed",
        ),
        "gcp:storage/bucketIAMMember:BucketIAMMember::engines-objectCreator": Expected(
            "replace",
            frozenset({"condition.expression"}),
            # An IAM member's condition cannot be updated in place: hashicorp/terraform-provider-google-beta
            # google-beta/tpgiamresource/resource_iam_member.go IamMemberBaseSchema marks role, member, condition and
            # condition.expression ForceNew (replacement_rules.yaml has no rule for it; lifecycle.py assumes a
            # replacement). Not delete-first: the new binding (another condition key) is added, then the old removed.
            "since 0.3.0 (CHANGELOG Fixed): the engine writer may create `.plan` objects under the model prefix only",
            announced_by="engines-objectCreator",
        ),
    }


@cache
def release_plan(case: str) -> dict[str, dict[str, Any]]:
    """0.3.0's plan of `case`, as that release wrote it."""
    path = RELEASE_PLANS / f"{case}.json.gz"
    return index_records(json.loads(gzip.decompress(path.read_bytes())), str(path))


def upgrade(case: str, today: Plan) -> list[Change]:
    """What the next `up` of a stack deployed with 0.3.0 does, when today's program plans `today`."""
    return compare(applied_state(release_plan(case)), index_records(plan_records(today), CASES[case][0]))


@pytest.fixture(scope="module")
def upgrade_of(engine_plan: Callable[..., Plan]) -> Callable[[str], tuple[Change, ...]]:
    """The upgrade of each case to today's program with the case's settings (the engine repository where needed), in
    the project 0.3.0's plan was made in (tests/support/stored_plans.py says why)."""

    @cache
    def of(case: str) -> tuple[Change, ...]:
        stack, settings = CASES[case]
        settings = with_stored_project(release_plan(case), **settings)
        if settings.get("tritonBuildEngines"):
            rest = {k: v for k, v in settings.items() if k != "tritonBuildEngines"}
            return tuple(upgrade(case, engine_plan(stack, **rest)))
        return tuple(upgrade(case, evaluate(stack, **settings)))

    return of


def unreleased_notes(changelog: str) -> str:
    """CHANGELOG.md's `## [Unreleased]` section, whitespace collapsed (a phrase may wrap over lines there)."""
    section = re.search(r"^## \[Unreleased\]\s*$(.*?)(?=^## \[)", changelog, re.MULTILINE | re.DOTALL)
    assert section, "CHANGELOG.md has no '## [Unreleased]' section before the releases"
    return " ".join(section.group(1).split())


def needs_announcement(change: Change) -> bool:
    return change.action in ANNOUNCED_ACTIONS or bool(change.outage or change.recreation or change.disruption)


def unannounced(changes: Iterable[Change], wanted: Mapping[str, Expected], notes: str) -> list[str]:
    """Each change an operator must be told of that EXPECTED gives no phrase for, or whose phrase `notes` lacks."""
    problems = []
    for change in filter(needs_announcement, changes):
        entry = wanted.get(change.key)
        if entry is None or not entry.announced_by:
            problems.append(f"{change.line()}: EXPECTED names no CHANGELOG phrase announcing it")
        elif " ".join(entry.announced_by.split()) not in notes:
            problems.append(f"{change.line()}: CHANGELOG.md's Unreleased section never says {entry.announced_by!r}")
    return problems


@pytest.mark.parametrize("case", tuple(CASES))
def test_upgrading_from_0_3_0_changes_exactly_what_is_expected(
    case: str, upgrade_of: Callable[[str], tuple[Change, ...]]
) -> None:
    got = {c.key: c for c in upgrade_of(case) if c.action != "unchanged"}
    wanted = expected(case)
    unexplained = sorted(c.line() for key, c in got.items() if key not in wanted)
    gone = {key: entry.why for key, entry in wanted.items() if key not in got}
    assert not unexplained, f"{case}: changes since 0.3.0 nobody explained (add them to EXPECTED): {unexplained}"
    assert not gone, f"{case}: expected changes that no longer happen (remove them from EXPECTED): {gone}"
    for key, entry in wanted.items():
        change = got[key]
        found = (change.action, frozenset(normalize(p) for p in change.paths), bool(change.outage))
        assert found == (entry.action, entry.paths, entry.deleted_first), (
            f"{case}: {key} should be {entry.action} of {sorted(entry.paths)}"
            f"{' deleted first' if entry.deleted_first else ''} ({entry.why}), is: {change.line()}"
        )


@pytest.mark.parametrize("case", tuple(CASES))
def test_every_replacement_since_0_3_0_is_announced_in_the_changelog(
    case: str, upgrade_of: Callable[[str], tuple[Change, ...]]
) -> None:
    notes = unreleased_notes(CHANGELOG.read_text(encoding="utf-8"))
    problems = unannounced(upgrade_of(case), expected(case), notes)
    assert not problems, f"{case}: an upgrade from 0.3.0 does what CHANGELOG.md does not announce: {problems}"


@pytest.mark.parametrize(
    ("setting", "what"),
    [
        # nodeConfig.spot is ForceNew (replacement_rules.yaml, google-beta node_config.go): a new GPU pool.
        ({"gpuSpot": False}, "replace"),
        # machineType updates in place, but GKE recreates every node (offline/lifecycle.py node_recreation).
        ({"gpuMachineType": "n1-standard-8"}, "recreates every node"),
    ],
)
def test_a_disruptive_change_nobody_announced_turns_the_check_red(setting: dict[str, Any], what: str) -> None:
    """The check's own mutant: dev as if the program had changed the GPU pool since 0.3.0, with today's CHANGELOG."""
    pool = f"{NODE_POOL}::gke-us-central1-gpu"
    changes = upgrade("dev", evaluate("dev", **with_stored_project(release_plan("dev"), **setting)))
    notes = unreleased_notes(CHANGELOG.read_text(encoding="utf-8"))
    assert [p for p in unannounced(changes, expected("dev"), notes) if pool in p and what in p]
    announced = {pool: Expected("update", frozenset(), "a test", announced_by="the GPU pools are replaced")}
    assert unannounced([c for c in changes if c.key == pool], announced, notes + " the GPU pools are replaced") == []


def test_only_the_unreleased_section_announces() -> None:
    """A phrase in 0.3.0's own notes announces nothing new; a phrase may wrap over lines."""
    changelog = "# Changelog\n\n## [Unreleased]\n\n- The GPU pools\n  are replaced.\n\n## [0.3.0]\n\n- gke-x\n"
    notes = unreleased_notes(changelog)
    assert "The GPU pools are replaced." in notes
    assert "gke-x" not in notes
