"""GPU types as data (infra/data/gpu_types.csv): the T4 and L4 rules the settings apply, and an L4 stack planned."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, evaluate, stack_settings
from triton_gke.offline.runtime import CloudMocks, RecordingMonitor, run_program
from triton_gke.settings import load_stack_settings
from triton_gke.settings.catalogue import CatalogueError
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.gpu_types import GPU_TYPES_CSV, load_gpu_types

L4 = {"gpuAcceleratorType": "nvidia-l4", "gpuMachineType": "g2-standard-8"}


def test_the_table_holds_t4_on_n1_and_l4_built_into_g2():
    table = load_gpu_types()
    t4, l4 = table["nvidia-tesla-t4"], table["nvidia-l4"]
    assert (t4.family, t4.attached, t4.gpu_counts, t4.compute_capability) == ("n1", True, (1, 2, 4), "7.5")
    assert (l4.family, l4.attached, l4.compute_capability, l4.memory_bytes) == ("g2", False, "8.9", 24 * 10**9)
    assert {r.machine_type: r.gpus_per_vm for r in l4.rules}["g2-standard-24"] == 2
    assert (t4.quota(spot=False), t4.quota(spot=True)) == ("NVIDIA_T4_GPUS", "PREEMPTIBLE_NVIDIA_T4_GPUS")
    assert (l4.quota(spot=False), l4.quota(spot=True)) == ("NVIDIA_L4_GPUS", "PREEMPTIBLE_NVIDIA_L4_GPUS")
    assert t4.spot and l4.spot
    assert (t4.reference_rps_per_gpu, l4.reference_rps_per_gpu) == (5563.10, 12204.35)


def test_an_l4_stack_plans_a_g2_pool_with_the_l4_as_its_guest_accelerator():
    plan = evaluate("dev", **L4)
    gpu_pools = [r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool" and r.name.endswith("-gpu")]
    assert gpu_pools
    for pool in gpu_pools:
        config = pool.inputs["nodeConfig"]
        assert config["machineType"] == "g2-standard-8"
        (accelerator,) = config["guestAccelerators"]
        assert (accelerator["type"], accelerator["count"]) == ("nvidia-l4", 1)


@pytest.mark.parametrize(
    ("overrides", "key", "hint"),
    [
        ({"gpuAcceleratorType": "nvidia-l4"}, "gpuMachineType", "an L4 comes built into G2 types"),
        ({**L4, "gpuMachineType": "g2-standard-24"}, "gpuMachineType", "g2-standard-24 has 2 L4 built in"),
        ({**L4, "gpuAcceleratorCount": 4}, "gpuAcceleratorCount", "an L4 node carries 1 or 2 GPUs"),
        ({"gpuMachineType": "g2-standard-8"}, "gpuMachineType", "a T4 attaches to N1 machine types only"),
        ({"gpuAcceleratorCount": 3}, "gpuAcceleratorCount", "a T4 node carries 1, 2 or 4 GPUs"),
        ({**L4, "regions": ["europe-west4"]}, "regions", "no nvidia-l4 zone in the GPU catalogue"),
    ],
)
def test_a_mismatch_is_refused_in_one_line_naming_the_key(overrides, key, hint):
    monitor = RecordingMonitor(CloudMocks())
    with pytest.raises(ConfigError) as refused:
        run_program("dev", stack_settings("dev", **overrides), PROJECT, monitor=monitor)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"triton-gke:{key}:") and hint in message, message
    assert monitor.records == []


def test_an_l4_with_two_gpus_plans_on_g2_standard_24():
    plan = evaluate("dev", **{**L4, "gpuMachineType": "g2-standard-24", "gpuAcceleratorCount": 2})
    pool = next(r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool" and r.name.endswith("-gpu"))
    assert pool.inputs["nodeConfig"]["guestAccelerators"][0]["count"] == 2


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (
            lambda t: t.replace("nvidia-l4,g2,g2-standard-8,1,8,32,8.9", "nvidia-l4,g2,g2-standard-8,1,8,32,8.6"),
            "compute_capability: nvidia-l4 rows disagree",
        ),
        (lambda t: t.replace("nvidia-l4,g2,g2-standard-4,", "nvidia-l4,g2,n1-standard-4,"), "is not of family g2"),
        (lambda t: t.replace("NVIDIA_L4_GPUS,PREEMPTIBLE", "nvidia l4,PREEMPTIBLE"), "is not a quota metric name"),
        (lambda t: t.replace(",12204.35,", ",-1,"), "reference_rps_per_gpu"),
    ],
)
def test_a_broken_table_is_one_line_naming_the_file(tmp_path, edit, why):
    broken = tmp_path / "gpu_types.csv"
    broken.write_text(edit(GPU_TYPES_CSV.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(CatalogueError) as refused:
        load_gpu_types(broken)
    assert "\n" not in str(refused.value) and str(broken) in str(refused.value) and why in str(refused.value)


# One machine shape per accelerator the stack accepts (the table's rules: a named G2 type, or an N1 type for an attached
# T4).
SHAPES = {"nvidia-tesla-t4": {"gpuMachineType": "n1-standard-4"}, "nvidia-l4": {"gpuMachineType": "g2-standard-8"}}


@given(st.sampled_from(sorted(SHAPES)), st.booleans(), st.sampled_from(["dev", "prod"]))
def test_plans_are_served_for_the_pools_compute_capability_exactly_when_the_stack_builds_engines(gpu, build, stack):
    """The engine-build Job builds for the pool's GPU (infra/engine_writer.py engine_build_args); the model settings
    name that GPU's plan in every TensorRT config (model_repo/build.py) only when the Job exists."""
    assert set(SHAPES) == set(load_gpu_types())  # a GPU type added to the table gets a shape here
    regions = {"regions": ["us-central1"]} if gpu == "nvidia-l4" else {}  # the L4's only priced region
    config = stack_settings(stack, gpuAcceleratorType=gpu, tritonBuildEngines=build, **SHAPES[gpu], **regions)
    settings = load_stack_settings(config, stack=stack)
    expected = (load_gpu_types()[gpu].compute_capability,) if build else ()
    assert settings.model_repo.plan_compute_capabilities == expected
    assert settings.serving.build_engines is build
