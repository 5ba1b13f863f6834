"""The planned clusters' maintenance windows (settings/maintenance.py) and what keeps a region serving while GKE or
Compute Engine takes a GPU node away (docs/upgrades.md, "Host maintenance of the GPU nodes")."""

from __future__ import annotations

import json

from tests.support.stacks import evaluate
from triton_gke.settings import maintenance
from triton_gke.settings.values import MaintenanceWindow

CLUSTER = "gcp:container/cluster:Cluster"


def planned_windows(plan) -> dict[str, MaintenanceWindow]:
    """Region -> the recurring window its planned cluster carries."""
    found = {}
    for cluster in (r for r in plan.resources if r.type == CLUSTER):
        window = cluster.inputs["maintenancePolicy"]["recurringWindow"]
        found[cluster.inputs["location"]] = MaintenanceWindow(
            start_time=window["startTime"], end_time=window["endTime"], recurrence=window["recurrence"]
        )
    return found


def test_prod_plans_its_three_regions_with_windows_that_never_overlap(prod_plan) -> None:
    windows = planned_windows(prod_plan)
    assert sorted(windows) == ["asia-east1", "europe-west4", "us-central1"]
    listed = list(windows.items())
    for i, (a, window_a) in enumerate(listed):
        assert maintenance.checked_window(window_a.start_time, window_a.end_time, window_a.recurrence)
        for b, window_b in listed[i + 1 :]:
            assert maintenance.weekly_overlap(window_a, window_b).total_seconds() == 0, (a, b)
    # Position in the stack's list decides: us-central1 first, as in Pulumi.prod.yaml.
    assert windows["us-central1"] == maintenance.default_window(0)
    assert windows["asia-east1"] == maintenance.default_window(2)


def test_a_chosen_region_window_reaches_only_that_regions_cluster() -> None:
    entry = "europe-west4 2026-01-04T09:00:00Z 2026-01-04T13:00:00Z FREQ=WEEKLY;BYDAY=SU,MO,TU"
    windows = planned_windows(evaluate("prod", maintenanceWindows=json.dumps([entry])))
    assert windows["europe-west4"] == MaintenanceWindow(
        "2026-01-04T09:00:00Z", "2026-01-04T13:00:00Z", entry.split()[3]
    )
    assert windows["us-central1"] == maintenance.default_window(0)


def by_type(plan, kind: str) -> dict[str, dict]:
    return {r.name: r.inputs for r in plan.resources if r.type == kind}


def test_prod_keeps_each_region_serving_while_one_gpu_node_is_away(prod_plan) -> None:
    """A GPU VM stops for host maintenance (it cannot live-migrate) and GKE drains one for an upgrade: each region
    keeps at least two Triton pods on two GPU nodes, at most one taken down at a time, spread over its zones."""
    pools = by_type(prod_plan, "gcp:container/nodePool:NodePool")
    pdbs = by_type(prod_plan, "kubernetes:policy/v1:PodDisruptionBudget")
    hpas = by_type(prod_plan, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    deployments = by_type(prod_plan, "kubernetes:apps/v1:Deployment")
    for region in ("us-central1", "europe-west4", "asia-east1"):
        assert pools[f"gke-{region}-gpu"]["autoscaling"]["totalMinNodeCount"] >= 2
        assert pdbs[f"triton-{region}-pdb"]["spec"]["maxUnavailable"] == 1
        assert hpas[f"triton-{region}-hpa"]["spec"]["minReplicas"] >= 2
        pod = deployments[f"triton-{region}-deployment"]["spec"]["template"]["spec"]
        (one_per_node,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert one_per_node["topologyKey"] == "kubernetes.io/hostname"
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["maxSkew"] == 1
        assert spread["labelSelector"] == one_per_node["labelSelector"]
