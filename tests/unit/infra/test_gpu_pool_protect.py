"""GPU pools under Pulumi's protect on protected stacks, node-pool upgrades that need no spare GPU, the window."""

from __future__ import annotations

from tests.support.stacks import evaluate


def pools(plan, role: str):
    return [r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool" and r.name.endswith(f"-{role}")]


def test_prod_protects_its_gpu_pools_dev_does_not_and_the_setting_lifts_it(prod_plan, dev_plan) -> None:
    assert pools(prod_plan, "gpu") and all(p.protect for p in pools(prod_plan, "gpu"))
    assert not any(p.protect for p in pools(prod_plan, "cpu"))
    assert pools(dev_plan, "gpu") and not any(p.protect for p in pools(dev_plan, "gpu"))
    allowed = evaluate("prod", allowGpuPoolReplacement=True)
    assert not any(p.protect for p in pools(allowed, "gpu"))
    # The clusters stay protected: the setting lifts the GPU pools' protect only.
    assert all(r.protect for r in allowed.resources if r.type == "gcp:container/cluster:Cluster")


def test_gpu_pools_upgrade_without_a_surge_node_and_cpu_pools_with_one(prod_plan) -> None:
    for pool in pools(prod_plan, "gpu"):
        assert pool.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    for pool in pools(prod_plan, "cpu"):
        assert pool.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}


def test_clusters_carry_the_maintenance_window_and_exclusions() -> None:
    entry = "black-friday 2026-11-26T00:00:00Z 2026-12-01T00:00:00Z NO_MINOR_OR_NODE_UPGRADES"
    plan = evaluate("prod", maintenanceExclusions=[entry])
    clusters = [r for r in plan.resources if r.type == "gcp:container/cluster:Cluster"]
    assert clusters
    for cluster in clusters:
        policy = cluster.inputs["maintenancePolicy"]
        # Each region its own window (tests/unit/infra/test_maintenance_plan.py), the exclusions shared.
        assert set(policy["recurringWindow"]) == {"startTime", "endTime", "recurrence"}
        assert policy["maintenanceExclusions"] == [
            {
                "exclusionName": "black-friday",
                "startTime": "2026-11-26T00:00:00Z",
                "endTime": "2026-12-01T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"},
            }
        ]
