"""The rollout's preview check (triton_gke/cli/rollout_guard.py) on engine events as the Automation API parses them
(pulumi.automation.events.EngineEvent.from_json): changes outside the step's regions, shared resources and
replacements that take a region down are refused; the wave's own update passes."""

from __future__ import annotations

from typing import Any

from pulumi.automation.events import EngineEvent

from triton_gke.cli.rollout_guard import problems, region_of, steps_of

REGIONS = ("us-central1", "europe-west4", "asia-east1")
GPU_POOL_INPUTS = {"nodeConfig": {"guestAccelerators": [{"type": "nvidia-tesla-t4", "count": 1}]}}


def event(op: str, kind: str, name: str, inputs: dict[str, Any] | None = None) -> EngineEvent:
    urn = f"urn:pulumi:prod::triton-gke::{kind}::{name}"
    state = {"type": kind, "urn": urn, "inputs": inputs or {}}
    return EngineEvent.from_json(
        {
            "sequence": 1,
            "timestamp": 0,
            "resourcePreEvent": {"metadata": {"op": op, "urn": urn, "type": kind, "old": state, "new": state}},
        }
    )


DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POOL = "gcp:container/nodePool:NodePool"
BACKENDS = "gcp:compute/backendService:BackendService"


def test_an_update_of_the_waves_own_region_passes() -> None:
    steps = steps_of([event("update", DEPLOYMENT, "triton-europe-west4-deployment"), event("same", POOL, "x")])
    assert problems(steps, ("europe-west4",), REGIONS, scaler=False) == []


def test_a_change_outside_the_wave_is_refused() -> None:
    steps = steps_of([event("update", DEPLOYMENT, "triton-asia-east1-deployment")])
    assert problems(steps, ("europe-west4",), REGIONS, scaler=False) == [
        f"update {DEPLOYMENT}::triton-asia-east1-deployment: region asia-east1 is outside this step (europe-west4)"
    ]


def test_a_gpu_pool_replacement_is_refused_even_inside_the_wave() -> None:
    steps = steps_of([event("replace", POOL, "gke-europe-west4-gpu", GPU_POOL_INPUTS)])
    assert problems(steps, ("europe-west4",), REGIONS, scaler=False) == [
        f"replace {POOL}::gke-europe-west4-gpu: takes down a GPU node pool"
    ]


def test_the_backend_services_change_only_in_a_step_that_moves_a_scaler() -> None:
    steps = steps_of([event("update", BACKENDS, "global-http")])
    assert problems(steps, ("us-central1",), REGIONS, scaler=True) == []
    assert problems(steps, ("us-central1",), REGIONS, scaler=False)


def test_a_region_is_a_whole_part_of_the_name() -> None:
    assert region_of("gke-europe-west4-gpu", REGIONS) == "europe-west4"
    assert region_of("gke-europe-west40", REGIONS) is None
    assert region_of("global-http", REGIONS) is None
