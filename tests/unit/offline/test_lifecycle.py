"""A stack over its life: the second `up` changes nothing, each change shows what it replaces and why, and
changes that take a region down are refused unless allowed (offline/lifecycle.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from triton_gke.infra.node_recreation import (
    NODE_READY_MINUTES,
    PROVIDER_DEFAULT_MINUTES,
    RECREATING_PATHS,
    estimate,
    recreating_paths,
)
from triton_gke.offline import lifecycle_table
from triton_gke.offline.lifecycle import (
    PROVIDER_READ_BACK,
    RULES_FILE,
    applied_state,
    changed_paths,
    compare,
    covers,
    load_rules,
    node_recreation,
    normalize,
    refused,
    summary,
)
from triton_gke.offline.lifecycle_table import COMMON_CHANGES
from triton_gke.offline.plan_diff import index_records
from triton_gke.offline.plan_view import plan_records
from triton_gke.offline.runtime import Plan

pytest_plugins = ("tests.support.project_folder",)

SHIPPED_STACKS = ("dev", "staging", "prod")


CLUSTER = "gcp:container/cluster:Cluster"


NODE_POOL = "gcp:container/nodePool:NodePool"


BACKEND = "gcp:compute/backendService:BackendService"


COMMIT = re.compile(r"^[0-9a-f]{40}$")


def records(plan: Plan) -> dict[str, dict[str, Any]]:
    return index_records(plan_records(plan), plan.stack)


@pytest.fixture(scope="module")
def shipped_plans() -> dict[str, Plan]:
    return {stack: evaluate(stack) for stack in SHIPPED_STACKS}


# ---- the second `up` ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_a_second_up_with_no_change_creates_updates_replaces_and_deletes_nothing(shipped_plans, stack):
    """The state of the first `up` (with what the providers read back differently, PROVIDER_READ_BACK) against the
    same program again: Pulumi diffs the new inputs against that state, so any difference would be an update or a
    replacement on every later `up` (hashicorp/terraform-provider-google#12070: a cluster replaced on each apply)."""
    applied = applied_state(records(shipped_plans[stack]))
    changes = compare(applied, records(evaluate(stack)))
    assert [c.line() for c in changes if c.action != "unchanged"] == []


def test_the_read_back_model_is_what_forces_the_cluster_replacement_without_ignore_changes(shipped_plans):
    """The simulation is not vacuous: the same second `up` with the program's ignoreChanges dropped replaces every
    cluster (node_config read back empty, ForceNew) and every pool (initial_node_count)."""
    plan = records(shipped_plans["prod"])
    applied = applied_state(plan)
    without_ignores = {key: {**r, "ignoreChanges": []} for key, r in plan.items()}
    changes = [c for c in compare(applied, without_ignores) if c.action == "replace"]
    # Each cluster's replacement then takes its Kubernetes provider and every object on the cluster with it.
    direct = {c.key.split("::")[0] for c in changes if not c.provider and not c.key.startswith("pulumi:providers:")}
    assert direct == {CLUSTER, NODE_POOL}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_cluster_ignores_the_default_pool_node_config_it_removes(shipped_plans, stack):
    """node_config describes only the default pool that remove_default_node_pool deletes; the provider reads the
    cluster back without it and node_config is ForceNew (node_config.go schemaNodeConfig; terraform-provider-google
    #12070, #17511; cloud-foundation-fabric#1275 keeps it with lifecycle ignore_changes = [node_config])."""
    for cluster in shipped_plans[stack].of_type(CLUSTER):
        assert cluster.inputs["removeDefaultNodePool"] is True
        assert "nodeConfig" in cluster.ignore_changes, cluster.name


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_node_pools_ignore_their_initial_node_count_and_gpu_pools_start_empty(shipped_plans, stack):
    """initial_node_count is ForceNew (resource_container_node_pool.go; terraform-provider-google#6354,
    pulumi-gcp#412), so it is ignored after creation; and the GPU pool starts with none, so a T4 stock-out in one zone
    cannot fail the first `up` (terraform-provider-google#10823: a pool created in RUNNING_WITH_ERROR on GCE_STOCKOUT;
    kubernetes/k8s.io#9834). The autoscaler adds GPU nodes for pending Triton pods (cluster-autoscaler FAQ: below
    the minimum it scales up only for unschedulable pods), wherever there are T4s (location_policy ANY)."""
    for pool in shipped_plans[stack].of_type(NODE_POOL):
        assert "initialNodeCount" in pool.ignore_changes, pool.name
        assert pool.inputs["nodeDrainConfigs"] == [{"respectPdbDuringNodePoolDeletion": True}], pool.name
        if pool.inputs["nodeConfig"].get("guestAccelerators"):
            assert pool.inputs["initialNodeCount"] == 0, pool.name
            assert pool.inputs["autoscaling"]["locationPolicy"] == "ANY"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_backend_services_set_a_timeout_above_what_clients_and_the_slo_allow(shipped_plans, stack):
    """A backend service's timeout defaults to 30 s (compute_backend_service docs, terraform-provider-google v7.0.0:
    "The default is 30 seconds"); the load balancer answers a request that outlasts it itself. Ours is explicit and
    above the load test's per-request timeout (loadtest/locustfile.py timeout_s, 10 s) and the SLO's latency."""
    # The locustfile's documented default (its docstring's settings table); importing it would patch gevent in.
    docstring = (PROJECT_DIR / "loadtest" / "locustfile.py").read_text(encoding="utf-8")
    client_timeout = float(re.search(r"timeout_s\s+network timeout per request, seconds\s+(\d+)", docstring).group(1))
    backends = shipped_plans[stack].of_type(BACKEND)
    if not backends:
        pytest.skip("no global load balancer in this stack")
    slo_seconds = 0.1  # sloLatencyMs default 100 ms
    for backend in backends:
        assert isinstance(backend.inputs.get("timeoutSec"), int | float), f"{backend.name}: no timeoutSec"
        assert backend.inputs["timeoutSec"] > max(client_timeout, slo_seconds), backend.name


# ---- common changes ----------------------------------------------------------------------------------------------
def lifecycle_of(stack: str, base: Plan, **overrides: Any) -> dict[str, list[str]]:
    changes = compare(applied_state(records(base)), records(evaluate(stack, **overrides)))
    return {a: sorted(c.key for c in changes if c.action == a) for a in ("create", "update", "replace", "delete")}


def test_min_and_max_gpu_nodes_update_the_pool_in_place_and_replace_nothing(shipped_plans):
    result = lifecycle_of("prod", shipped_plans["prod"], gpuMinNodes=3, gpuMaxNodes=8)
    assert result["replace"] == [] and result["create"] == [] and result["delete"] == []
    assert {f"{NODE_POOL}::gke-{r}-gpu" for r in ("us-central1", "europe-west4", "asia-east1")} <= set(result["update"])


def test_leaving_spot_replaces_the_gpu_pool_and_is_refused_unless_allowed(shipped_plans):
    """nodeConfig.spot is ForceNew (node_config.go schemaNodeConfig), while the machine type is updated in place
    (nodePoolNodeConfigUpdate): the rules tell them apart."""
    applied = applied_state(records(shipped_plans["dev"]))
    machine = compare(applied, records(evaluate("dev", gpuMachineType="n1-standard-8")))
    assert [c.key for c in machine if c.action != "unchanged"] == [f"{NODE_POOL}::gke-us-central1-gpu"]
    assert [c.action for c in machine if c.action != "unchanged"] == ["update"]
    changes = compare(applied, records(evaluate("dev", gpuSpot=False)))
    replaced = [c for c in changes if c.action == "replace"]
    assert [c.key for c in replaced] == [f"{NODE_POOL}::gke-us-central1-gpu"]
    assert "nodeConfig.spot" in replaced[0].reasons[0] and "forces replacement" in replaced[0].reasons[0]
    assert [c.name for c in refused(changes, [])] == ["gke-us-central1-gpu"]
    assert refused(changes, ["gke-us-central1-gpu"]) == [] and refused(changes, ["all"]) == []


def test_a_new_zone_updates_the_cluster_in_place(shipped_plans):
    """The cluster's node locations update in place (resource_container_cluster.go); only the Command that waits
    for the NEG of every zone runs again (its triggers name the zones), so the backends wait for the new zone's."""
    result = lifecycle_of("dev", shipped_plans["dev"], zones=["us-central1-a", "us-central1-b"])
    assert result["replace"] == ["command:local:Command::negs-us-central1-ready"] and result["delete"] == []
    assert f"{CLUSTER}::gke-us-central1" in result["update"]


def test_removing_a_region_deletes_its_cluster_and_is_refused(shipped_plans):
    applied = applied_state(records(shipped_plans["prod"]))
    changes = compare(applied, records(evaluate("prod", regions=["us-central1", "europe-west4"])))
    deleted = {c.key for c in changes if c.action == "delete"}
    assert f"{CLUSTER}::gke-asia-east1" in deleted
    assert "gke-asia-east1" in {c.name for c in refused(changes, [])}


# ---- the rules ------------------------------------------------------------------------------------------------------
def test_the_replacement_rules_cite_each_provider_source_at_a_commit():
    data = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    for provider in ("gcp", "kubernetes", "random", "command"):
        source = data["sources"][provider]
        assert source["repo"] and COMMIT.match(str(source["commit"])), provider
    for type_token, entry in data["types"].items():
        assert entry.get("source"), f"{type_token}: no source file named"


def _leaf_paths(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in _leaf_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list) and value and not all(isinstance(v, str) for v in value):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, f"{path}[{i}]")]
    return [path]


def test_every_property_the_program_sets_is_classified_as_replace_or_update():
    """Coverage: the rules say, for every input path of every resource of every shipped stack (and the options that
    add types: a domain, the driver installer), whether changing it replaces the resource."""
    rules = load_rules()
    plans = [evaluate(s) for s in SHIPPED_STACKS]
    plans += [evaluate("prod", domain="triton.example.com"), evaluate("dev", gpuDriverVersion="INSTALLATION_DISABLED")]
    unclassified = set()
    for plan in plans:
        for record in plan_records(plan):
            if record["type"].startswith("triton-gke:"):
                continue
            type_rules = rules.types.get(record["type"])
            for path in _leaf_paths(record["inputs"]):
                if type_rules is None or type_rules.classify(path) is None:
                    unclassified.add(f"{record['type']} {normalize(path)}")
    assert sorted(unclassified) == []


def test_the_read_back_paths_are_force_new_so_ignoring_them_matters():
    rules = load_rules()
    for type_token, paths in PROVIDER_READ_BACK.items():
        for path in paths:
            assert rules.types[type_token].classify(path)[0] == "replace", f"{type_token} {path}"


def test_the_lifecycle_table_in_the_docs_is_what_the_code_gives(own_project_folder):
    """In a project folder of its own: the table's model changes rebuild build/model_repository there."""
    from triton_gke.offline import build_models

    for stack in COMMON_CHANGES:
        assert build_models.main(["--stack", stack]) == 0
    assert lifecycle_table.main(["--check"]) == 0, "run triton-gke lifecycle-table"


# ---- properties ----------------------------------------------------------------------------------------------------
NAMES = st.text(alphabet="abcxyz", min_size=1, max_size=3)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | NAMES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_a_value_compared_with_itself_has_no_changed_path(value):
    assert list(changed_paths(value, value)) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(NAMES, VALUES, min_size=1, max_size=4), st.data())
def test_changing_one_leaf_reports_a_path_that_covers_it(inputs, data):
    leaves = _leaf_paths(inputs)
    target = data.draw(st.sampled_from(leaves))
    changed = json.loads(json.dumps(inputs))
    _replace_leaf(changed, target, "<changed>")
    paths = list(changed_paths(inputs, changed))
    assert paths and all(covers(p, target) or covers(target, p) for p in paths)


def _replace_leaf(value: Any, path: str, new: Any) -> None:
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for part in parts[:-1]:
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    last = parts[-1]
    if last.startswith("["):
        value[int(last[1:-1])] = new
    else:
        value[last] = new


@settings(max_examples=200, deadline=None)
@given(st.lists(NAMES, min_size=1, max_size=4), st.lists(st.integers(0, 9), max_size=3))
def test_a_rule_covers_every_path_below_it_and_no_sibling(parts, indices):
    rule = ".".join(parts)
    below = rule + "".join(f"[{i}]" for i in indices) + ".leaf"
    assert covers(rule, below) and covers(rule, rule)
    assert not covers(rule, rule + "x") and not covers(rule + ".leaf", rule)


def test_path_normalization_treats_indices_and_wildcards_alike():
    assert normalize("a[0].b[12].c") == normalize("a[*].b[].c") == "a[].b[].c"


def test_docs_page_exists_and_names_the_refusal_option():
    text = Path(lifecycle_table.DOC).read_text(encoding="utf-8")
    assert "--allow-disruption" in text and lifecycle_table.BEGIN in text


def test_a_resource_holding_a_replaced_resources_id_is_updated_with_it():
    """A new domain replaces the managed certificate (its domains are ForceNew); the HTTPS proxy names the
    certificate's ID in sslCertificates, an in-place update, so the proxy is updated too, as the real `up` does."""
    domain_a = evaluate("dev", globalLoadBalancer=True, domain="a.example.com")
    applied = applied_state(records(domain_a))
    changes = compare(applied, records(evaluate("dev", globalLoadBalancer=True, domain="b.example.com")))
    by_name = {c.name: c for c in changes if c.action != "unchanged"}
    assert by_name["global-cert"].action == "replace"
    proxy = by_name["global-https-proxy"]
    assert proxy.action == "update" and proxy.paths[0].startswith("sslCertificates[0] (refers to")


# ---- the blast radius: provider cascade and delete-before-create -----------------------------------------------------
DEV_CLUSTER = f"{CLUSTER}::gke-us-central1"
DEV_PROVIDER = "pulumi:providers:kubernetes::gke-us-central1-k8s"


def _changed(changes: list) -> dict[str, Any]:
    return {c.key: c for c in changes if c.action != "unchanged"}


def test_a_replaced_cluster_replaces_its_provider_and_every_object_on_that_cluster(shipped_plans):
    """datapathProvider is ForceNew: the cluster is replaced, deleted first (its name is the program's: the bridge's
    nameRequiresDeleteBeforeReplace), its node pools with it (their `cluster` holds its name: the engine's
    calculateDependentReplacements), its Kubernetes provider (unknown kubeconfig: pulumi-kubernetes DiffConfig) and
    every object that provider manages (step_generator.go providerChanged), each line saying why."""
    plan = records(shipped_plans["dev"])
    applied = applied_state(plan)
    applied[DEV_CLUSTER]["inputs"]["datapathProvider"] = "LEGACY_DATAPATH"
    changes = compare(applied, plan)
    changed = _changed(changes)
    on_cluster = {key for key, r in plan.items() if r["provider"] == "gke-us-central1-k8s"}
    assert on_cluster and len(on_cluster) > 30
    pools = {f"{NODE_POOL}::gke-us-central1-cpu", f"{NODE_POOL}::gke-us-central1-gpu"}
    assert set(changed) == {DEV_CLUSTER, DEV_PROVIDER, *pools, *on_cluster}
    assert {c.action for c in changed.values()} == {"replace"}
    assert "its kubeconfig comes from " + DEV_CLUSTER in changed[DEV_PROVIDER].line()
    for key in on_cluster:
        assert f"its provider {DEV_PROVIDER} is replaced" in changed[key].line(), key
        assert changed[key].provider == DEV_PROVIDER and not changed[key].outage, key
    assert "[outage: deleted before created: the fixed name 'triton-dev-us-central1'" in changed[DEV_CLUSTER].line()
    for pool in pools:
        assert changed[pool].outage == f"with {DEV_CLUSTER}" and "cluster (holds an output of" in changed[pool].line()
    assert summary(changes).endswith(
        f"(of the replacements: 3 deleted before created, {len(on_cluster)} with their replaced provider)"
    )
    # The refusals stay: the cluster, the GPU pool and Triton's Deployment and namespace (now through the cascade).
    assert {c.name for c in refused(changes, [])} == {
        "gke-us-central1",
        "gke-us-central1-gpu",
        "triton-us-central1-deployment",
        "triton-us-central1-ns",
    }
    assert refused(changes, ["all"]) == []


def test_a_kubernetes_object_keeping_its_fixed_name_is_deleted_before_it_is_created(shipped_plans):
    """pulumi-kubernetes deletes first when the object is named by the program and keeps its name and namespace
    (provider.go kubeProvider.Diff); a new name lets it create first. A ConfigMap's data forces replacement."""
    plan = records(shipped_plans["dev"])
    key = "kubernetes:core/v1:ConfigMap::locust-us-central1-locustfile"
    applied = applied_state(plan)
    applied[key]["inputs"]["data"] = {"locustfile.py": "old"}
    same_name = _changed(compare(applied, plan))
    assert list(same_name) == [key]
    assert "[outage: deleted before created: the fixed metadata.name 'locustfile'" in same_name[key].line()
    applied[key]["inputs"]["metadata"] = {**applied[key]["inputs"]["metadata"], "name": "old-locustfile"}
    renamed = _changed(compare(applied, plan))
    assert renamed[key].action == "replace" and renamed[key].outage == ""
    assert "[outage" not in renamed[key].line()


def test_the_delete_before_replace_option_makes_any_replacement_an_outage(shipped_plans):
    """The option overrides the provider (step_generator.go: "The user can override the provider's decision"); a
    pulumi-command Command creates first otherwise (the provider never asks to delete first)."""
    plan = records(shipped_plans["dev"])
    key = "command:local:Command::models-sync"
    applied = applied_state(plan)
    applied[key]["inputs"]["triggers"] = ["an older repository digest"]
    plain = _changed(compare(applied, plan))
    assert plain[key].action == "replace" and plain[key].outage == ""
    option = {**plan, key: {**plan[key], "deleteBeforeReplace": True}}
    changes = compare(applied, option)
    assert _changed(changes)[key].outage == "its deleteBeforeReplace option"
    assert summary(changes).endswith("(of the replacements: 1 deleted before created, 0 with their replaced provider)")


def test_an_autonamed_gpu_pool_is_created_before_the_old_one_is_deleted(shipped_plans):
    """The program leaves node pool names to Pulumi (autonamed), so a spot change creates the new pool first."""
    applied = applied_state(records(shipped_plans["dev"]))
    (pool,) = [c for c in compare(applied, records(evaluate("dev", gpuSpot=False))) if c.action == "replace"]
    assert pool.outage == "" and "[outage" not in pool.line()


PROD_REGIONS = ("us-central1", "europe-west4", "asia-east1")


def test_a_driver_change_on_prod_is_refused_as_protected_until_allowed_in_the_same_up(shipped_plans):
    """prod's GPU pools carry `protect`: the driver change alone is refused whatever --allow-disruption says; with
    allowGpuPoolReplacement in the same `up` the new protect is false, which the engine accepts (pulumi/pulumi#8873,
    step_generator.go checks the goal's Protect), and only the disruption check is left."""
    applied = applied_state(records(shipped_plans["prod"]))
    alone = compare(applied, records(evaluate("prod", gpuDriverVersion="DEFAULT")))
    pools = [f"{NODE_POOL}::gke-{r}-gpu" for r in PROD_REGIONS]
    assert sorted(c.key for c in refused(alone, ["all"])) == sorted(pools)
    assert all(c.protected and "allowGpuPoolReplacement true" in c.line() for c in refused(alone, ["all"]))
    allowed = compare(applied, records(evaluate("prod", gpuDriverVersion="DEFAULT", allowGpuPoolReplacement=True)))
    assert sorted(c.key for c in allowed if c.action == "replace") == sorted(pools)
    assert not any(c.protected for c in allowed) and refused(allowed, ["all"]) == []


def test_a_driver_change_on_prod_keeps_every_region_serving_and_dev_is_said_to_go_down(shipped_plans):
    """The plan of a driver change names, per region, the Triton pods that keep serving while the GPU pool is replaced:
    prod (HPA min 2, PDB maxUnavailable 1) keeps one in every region; dev (one pod) is down meanwhile."""
    applied = applied_state(records(shipped_plans["prod"]))
    changes = compare(applied, records(evaluate("prod", gpuDriverVersion="DEFAULT", allowGpuPoolReplacement=True)))
    lines = {c.name: c.line() for c in changes if c.action == "replace"}
    assert set(lines) == {f"gke-{r}-gpu" for r in PROD_REGIONS}
    for line in lines.values():
        assert "Triton keeps 1 of its 2 pods" in line and "the region keeps serving" in line, line
        assert "[outage" not in line
    dev = compare(applied_state(records(shipped_plans["dev"])), records(evaluate("dev", gpuDriverVersion="DEFAULT")))
    (pool,) = [c for c in dev if c.action == "replace"]
    assert "Triton keeps 0 of its 1 pods" in pool.line() and "the region is down meanwhile" in pool.line()


def test_a_gpu_pool_deleted_without_the_pdb_drain_takes_every_triton_pod(shipped_plans):
    """Without respect_pdb_during_node_pool_deletion GKE deletes the pool's nodes without honouring the PDB: the
    comparison must not promise pods that the drain would not keep (a mutant dropping the check fails this)."""
    applied = applied_state(records(shipped_plans["prod"]))
    after = records(evaluate("prod", gpuDriverVersion="DEFAULT", allowGpuPoolReplacement=True))
    for key, record in after.items():
        if key.startswith(f"{NODE_POOL}::") and key.endswith("-gpu"):
            record["inputs"]["nodeDrainConfigs"] = []
    lines = [c.line() for c in compare(applied, after) if c.action == "replace" and c.key.endswith("-gpu")]
    assert len(lines) == 3 and all("Triton: every pod of the region at once" in line for line in lines), lines


def test_lifecycle_table_refuses_in_one_line_outside_a_checkout_and_on_bad_settings(monkeypatch, capsys) -> None:
    """Installed from the wheel there is no docs/lifecycle.md; before `make model-repo` the plans are refused: both
    one line and exit 2, no traceback (red team: FileNotFoundError and ConfigError tracebacks, exit 1)."""
    from triton_gke.offline import lifecycle_table
    from triton_gke.settings import ConfigError

    monkeypatch.setattr(lifecycle_table, "checkout_dir", lambda: None)
    assert lifecycle_table.main(["--check"]) == 2
    assert capsys.readouterr().err == (
        "error: triton-gke lifecycle-table: a maintainer's command: run it in a checkout of the repository\n"
    )
    monkeypatch.undo()

    def refused(progress):
        raise ConfigError("build/model_repository: not built;\nrun `make model-repo` first")

    monkeypatch.setattr(lifecycle_table, "rows", refused)
    assert lifecycle_table.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert err == "error: triton-gke lifecycle-table: build/model_repository: not built; run `make model-repo` first\n"


# ---- in-place updates that recreate every node ---------------------------------------------------------------------
def test_a_gpu_machine_type_change_names_the_node_recreation_and_its_estimate(shipped_plans):
    """The machine type is updated in place (not ForceNew), but GKE migrates every node to it through a node upgrade
    (UpdateNodePoolRequest.machine_type: "Initiates an upgrade operation that migrates the nodes"): each GPU pool is
    an update that says so, with the estimate its timeouts are sized to, and what Triton keeps meanwhile."""
    prod = compare(
        applied_state(records(shipped_plans["prod"])), records(evaluate("prod", gpuMachineType="n1-standard-8"))
    )
    pools = [c for c in prod if c.action != "unchanged"]
    assert [c.action for c in pools] == ["update"] * 3 and refused(pools, []) == []
    for change in pools:
        assert change.key.startswith(NODE_POOL) and change.name.endswith("-gpu")
        assert "[recreates every node: nodeConfig.machineType" in change.line()
        assert "up to 6 node(s), 1 at a time, ~51 min each (node ready 10 + pod startup 40 + grace 1)" in change.line()
        assert "up to ~306 min" in change.line() and "Triton keeps 1 of its 2 pods" in change.line()
    dev = compare(
        applied_state(records(shipped_plans["dev"])), records(evaluate("dev", gpuMachineType="n1-standard-8"))
    )
    (pool,) = [c for c in dev if c.action != "unchanged"]
    assert "up to ~51 min" in pool.recreation and "the region is down while its node is recreated" in pool.recreation
    # No Triton pod left serving: refused like a replacement unless --allow-disruption names the pool (red team).
    assert refused([pool], []) == [pool] and refused([pool], [pool.name]) == []
    assert "[takes down: the GPU pool's nodes, recreated with no Triton pod" in pool.line()


def test_prod_at_one_gpu_node_refuses_a_recreation_in_every_region(shipped_plans):
    """Red team: prod lowered to one GPU node and given a new disk size passed with exit 0 although every region was
    down while its node was recreated, all three at once."""
    changed = compare(
        applied_state(records(shipped_plans["prod"])),
        records(evaluate("prod", gpuMinNodes=1, gpuDiskSizeGb=200, tritonMaxUnavailable=1)),
    )
    pools = [c for c in changed if c.recreation and c.name.endswith("-gpu")]
    assert len(pools) == 3 and refused(pools, []) == pools


def test_an_image_type_change_names_the_node_recreation(shipped_plans):
    """The node image is fixed (COS_CONTAINERD, infra/cluster.py), so no stack key changes it: a stack deployed with
    another image type (its applied plan says UBUNTU_CONTAINERD) meets today's program. image_type is updated in place
    (ClusterUpdate.DesiredImageType, node_config.go) and GKE recreates the nodes ("During node pool upgrades, nodes
    will be deleted and recreated", gcloud container clusters upgrade --image-type)."""
    deployed = records(shipped_plans["staging"])
    for record in deployed.values():
        if record["type"] == NODE_POOL:
            record["inputs"]["nodeConfig"]["imageType"] = "UBUNTU_CONTAINERD"
    changes = [
        c for c in compare(applied_state(deployed), records(shipped_plans["staging"])) if c.action != "unchanged"
    ]
    assert {c.action for c in changes} == {"update"} and len(changes) == 4  # two regions, CPU and GPU pools
    for change in changes:
        assert change.recreation.startswith("nodeConfig.imageType (GKE's node upgrade, in place for Pulumi)")
    cpu = next(c for c in changes if c.name.endswith("-cpu"))
    assert "1 at a time, ~11 min each (node ready 10 + pod startup 0 + grace 1)" in cpu.recreation
    assert "Triton" not in cpu.recreation


def test_other_in_place_pool_updates_recreate_nothing(shipped_plans):
    """Autoscaling bounds are set without a node upgrade (SetNodePoolAutoscaling): no recreation note."""
    changes = compare(applied_state(records(shipped_plans["prod"])), records(evaluate("prod", gpuMaxNodes=8)))
    assert [c for c in changes if c.recreation] == []


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_pools_timeouts_are_the_recreation_estimate_the_compare_shows(shipped_plans, stack):
    """One estimate (infra/node_recreation.py): the pools' custom timeouts (infra/cluster.py pool_timeouts) are what
    the compare computes from the same plan, never below the provider's two hours."""
    plan = records(shipped_plans[stack])
    pools = [r for r in plan.values() if r["type"] == NODE_POOL]
    assert pools
    for pool in pools:
        minutes = node_recreation(pool, plan).timeout_minutes
        assert minutes >= PROVIDER_DEFAULT_MINUTES
        assert pool["customTimeouts"] == {"create": f"{minutes}m", "update": f"{minutes}m", "delete": f"{minutes}m"}


def test_the_timeouts_follow_the_pool_maximum_and_tritons_startup_budget():
    """prod's GPU pools: 6 nodes x 51 min outlast the provider's 2 hours; a longer startup budget or more nodes
    lengthen the timeout the compare's estimate gives (the same function: a reader that diverges fails above)."""
    for overrides, minutes in (({}, 306), ({"tritonStartupMinutes": 60}, 426), ({"gpuMaxNodes": 8}, 408)):
        plan = records(evaluate("prod", **overrides))
        gpu = [r for r in plan.values() if r["type"] == NODE_POOL and r["name"].endswith("-gpu")]
        assert {r["customTimeouts"]["update"] for r in gpu} == {f"{minutes}m"}, overrides


def test_the_recreating_paths_the_program_sets_are_updated_in_place_by_the_rules():
    """A recreating path must be an in-place update for the provider: a ForceNew one replaces the pool instead."""
    rules = load_rules().types[NODE_POOL]
    set_by_program = {"nodeConfig.machineType", "nodeConfig.imageType", "nodeConfig.diskSizeGb", "nodeConfig.diskType"}
    assert set_by_program <= set(RECREATING_PATHS)
    for path in set_by_program:
        assert rules.classify(path) == ("update", path)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.integers(0, 1000),
    surge=st.integers(0, 5),
    unavailable=st.integers(0, 5),
    startup=st.integers(0, 180),
    grace=st.integers(0, 3600),
)
def test_the_estimate_is_batches_of_node_ready_startup_and_grace(nodes, surge, unavailable, startup, grace):
    if surge + unavailable == 0:
        with pytest.raises(ValueError):
            estimate(nodes, surge, unavailable, startup, grace)
        return
    found = estimate(nodes, surge, unavailable, startup, grace)
    batches = -(-nodes // (surge + unavailable))
    assert found.total_minutes == batches * (NODE_READY_MINUTES + startup + -(-grace // 60))
    assert found.timeout_minutes == max(PROVIDER_DEFAULT_MINUTES, found.total_minutes)
    assert estimate(nodes + 1, surge, unavailable, startup, grace).total_minutes >= found.total_minutes
    assert f"~{found.total_minutes} min" in found.text()


@given(
    root=st.sampled_from(RECREATING_PATHS),
    tail=st.from_regex(r"(\.[a-z][A-Za-z]{0,8}|\[[0-9]\])*", fullmatch=True),
    other=st.from_regex(r"nodeConfig\.[a-z][A-Za-z]{0,12}", fullmatch=True),
)
def test_a_path_at_or_below_a_recreating_path_recreates_and_a_sibling_does_not(root, tail, other):
    assert recreating_paths([root + tail]) == [root + tail]
    assert recreating_paths([other]) == ([other] if other in RECREATING_PATHS else [])


# ---- the inference key change (red team 44, finding 4a) -------------------------------------------------------------
TRITON_DEPLOYMENT = "kubernetes:apps/v1:Deployment::triton-"


def _triton_updates(changes: list) -> list:
    return [c for c in changes if c.key.startswith(TRITON_DEPLOYMENT) and c.action != "unchanged"]


@pytest.mark.parametrize(("before", "after"), [("a", "b"), ("b", "a")])
def test_a_key_slot_change_tells_clients_to_send_the_next_key_and_is_not_refused(before: str, after: str) -> None:
    """Every Triton Deployment of prod rolls to the other slot: each update says that clients must already send the
    next key and that the others get 403/UNAVAILABLE; nothing is refused (a client following docs/security.md loses no
    request: the rollout proof's key-change row)."""
    old = applied_state(records(evaluate("prod", inferenceKeySlot=before)))
    changes = compare(old, records(evaluate("prod", inferenceKeySlot=after)))
    updates = _triton_updates(changes)
    assert len(updates) == 3 and all(c.action == "update" for c in updates), [c.line() for c in changes]
    note = (
        f"[clients: the inference key slot moves {before} -> {after}: clients must already send the next key "
        f"(triton-grpc-protocol-inference-key-{after}, inferenceNextKey); those sending only the old one get "
        "403/UNAVAILABLE as pods roll]"
    )
    assert all(note in c.line() for c in updates)
    assert refused(changes, []) == []
    assert not [c for c in changes if c.clients and not c.key.startswith(TRITON_DEPLOYMENT)]


def test_turning_inference_auth_on_tells_clients_to_send_the_key(shipped_plans) -> None:
    old = applied_state(records(evaluate("dev", inferenceAuth=False)))
    (update,) = _triton_updates(compare(old, records(shipped_plans["dev"])))
    assert "[clients: inference now needs the key: clients must already send it" in update.line()
    assert "those sending none get 403/UNAVAILABLE as pods roll]" in update.line()


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_no_note_without_a_slot_change(shipped_plans, stack: str) -> None:
    """A second `up`, a change of the pool, or turning the key off (nothing is refused any more) says nothing."""
    same = compare(applied_state(records(shipped_plans[stack])), records(shipped_plans[stack]))
    assert not [c for c in same if c.clients]
    off = compare(applied_state(records(shipped_plans[stack])), records(evaluate(stack, inferenceAuth=False)))
    assert _triton_updates(off) and not [c for c in off if c.clients]


def test_plan_against_prints_the_note_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The red team's command: `plan --stack prod --set inferenceKeySlot=b --against prod.json` exits 0 and now says
    what clients must do, once per region."""
    from triton_gke.offline import plan as plan_command

    assert plan_command.main(["--stack", "prod", "--json"]) == 0
    applied = tmp_path / "prod.json"
    applied.write_text(capsys.readouterr().out)
    assert plan_command.main(["--stack", "prod", "--set", "inferenceKeySlot=b", "--against", str(applied)]) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if "[clients: the inference key slot moves a -> b" in line]
    assert len(notes) == 3 and all(
        line.startswith("update    kubernetes:apps/v1:Deployment::triton-") for line in notes
    )
