"""Per-region pins (modelHoldRegions): the sync that pins is told to hold each listed region (model_repo/sync.py
--hold, which writes configs/REGION.pbtxt from the live config), and that region's Triton reads it
(tritonserver --model-config-name=REGION; triton-inference-server/core model_repository_manager.cc
GetModelConfigFullPath: configs/NAME.pbtxt where it exists, else config.pbtxt). The live proof is
tests/live/model_repo/test_staged_engines.py (two real servers on one bucket)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import evaluate, stack_settings
from triton_gke.settings import ConfigError, load_stack_settings

PROD_REGIONS = ("us-central1", "europe-west4", "asia-east1")


def _commands(plan):
    return {r.name: r.inputs["create"] for r in plan.resources if r.type == "command:local:Command"}


def _triton_args(plan) -> dict[str, list[str]]:
    """Region -> tritonserver's arguments in that region's Deployment."""
    deployments = [
        d
        for d in plan.resources
        if d.type == "kubernetes:apps/v1:Deployment" and d.name.startswith("triton-") and d.name.endswith("-deployment")
    ]
    return {
        d.name.removeprefix("triton-").removesuffix("-deployment"): d.inputs["spec"]["template"]["spec"]["containers"][
            0
        ]["args"]
        for d in deployments
    }


def test_a_held_region_reads_its_own_config_and_the_sync_holds_it():
    plan = evaluate("prod", modelHoldRegions=["europe-west4"])
    assert " --hold=europe-west4" in _commands(plan)["models-sync"]
    args = _triton_args(plan)
    assert sorted(args) == sorted(PROD_REGIONS)
    assert "--model-config-name=europe-west4" in args["europe-west4"]
    for region in ("us-central1", "asia-east1"):
        assert not [a for a in args[region] if a.startswith("--model-config-name")], region


def test_without_holds_nothing_changes():
    plan = evaluate("prod")
    assert "--hold" not in _commands(plan)["models-sync"]
    assert not [a for args in _triton_args(plan).values() for a in args if "model-config-name" in a]


def test_with_engine_builds_the_pin_holds_and_the_stage_does_not(engine_plan):
    plan = engine_plan("prod", modelHoldRegions=["asia-east1"])
    commands = _commands(plan)
    assert "--hold" not in commands["models-sync"] and commands["models-sync"].endswith(" --stage")
    assert commands["models-pin-sync"].endswith(" --pin --hold=asia-east1")


@settings(max_examples=60)
@given(st.lists(st.sampled_from((*PROD_REGIONS, "us-east1", "Europe-west4", "")), max_size=4))
def test_every_list_of_regions_is_accepted_or_refused_in_one_line(held: list[str]) -> None:
    config = stack_settings("prod", modelHoldRegions=held)
    valid = set(held) <= set(PROD_REGIONS) and len(set(held)) == len(held) and set(held) != set(PROD_REGIONS)
    if valid:
        assert load_stack_settings(config, stack="prod").model_store.hold_regions == tuple(held)
        return
    with pytest.raises(ConfigError) as refused:
        load_stack_settings(config, stack="prod")
    line = str(refused.value)
    assert line.startswith("triton-gke:modelHoldRegions") and "\n" not in line, line
