"""Each fact of issue 45 has one home, and every reader follows it when it changes: a test changes the home (never
restating its value), runs a fresh copy of each reader (tests/support/fresh_modules.py) and sees that reader's
refusal move with it. A reader that kept its own copy of the fact (Model Analyzer's 600,000 ms SLO ceiling did) fails
here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.fresh_modules import fresh_copy
from tests.support.settings_probes import largest_gpu_max_nodes
from tests.support.stacks import stack_settings
from triton_gke.bench.runners.runner import BenchError
from triton_gke.capacity.records import TWIN_GPU, load_records
from triton_gke.contracts import gke_limits, gpus, slo
from triton_gke.infra.gpu_choice import MACHINES
from triton_gke.k8s.on_cluster import DEFAULT_ACCELERATOR
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import DEFAULT_GPU, ModelRepoSettings, VariantSettings, gpu_memory_problem
from triton_gke.model_repo.settings import validate_settings as validate_model_settings
from triton_gke.settings import ConfigError, lifecycle
from triton_gke.settings import stack as stack_module
from triton_gke.settings.catalogue import DEFAULT_GPU_CATALOGUE, load_gpu_catalogue
from triton_gke.settings.gpu_types import shipped_gpu_types
from triton_gke.settings.schema import config_schema

# ---------------------------------------------------------------- the SLO's latency ceiling (contracts/slo.py)


@pytest.fixture
def lower_slo_ceiling(monkeypatch: pytest.MonkeyPatch) -> int:
    """The home's ceiling halved (whole seconds, as the stack's longest wait it equals, settings/monitoring.py)."""
    lowered = slo.MAX_SLO_LATENCY_MS // 2000 * 1000
    monkeypatch.setattr(slo, "MAX_SLO_LATENCY_MS", lowered)
    monkeypatch.setattr(lifecycle, "MAX_WAIT_S", lowered // 1000)
    return lowered


def test_model_analyzer_follows_the_slo_ceiling(lower_slo_ceiling: int, tmp_path: Path) -> None:
    ma = fresh_copy("triton_gke.bench.tuners.model_analyzer")
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "config.pbtxt").write_text('name: "original"')
    ma.check_inputs(tmp_path, "original", lower_slo_ceiling, 95)
    with pytest.raises(ma.ModelAnalyzerError, match=f"from 1 to {lower_slo_ceiling}, got {lower_slo_ceiling + 1}"):
        ma.check_inputs(tmp_path, "original", lower_slo_ceiling + 1, 95)


def test_bench_slo_option_follows_the_slo_ceiling(lower_slo_ceiling: int, tmp_path: Path) -> None:
    bench = fresh_copy("triton_gke.bench.__main__")
    args = bench.parser().parse_args(["--slo-ms", str(lower_slo_ceiling + 1)])
    with pytest.raises(BenchError, match=f"--slo-ms .*: expected a number from 1 to {lower_slo_ceiling}$"):
        bench.check_args(args, tmp_path / "out")


def test_capacity_records_follow_the_slo_ceiling(lower_slo_ceiling: int) -> None:
    records = fresh_copy("triton_gke.capacity.records")
    assert records.CHECKS["slo_latency_ms"](lower_slo_ceiling) == lower_slo_ceiling
    with pytest.raises(records._Bad, match="out of bounds"):
        records.CHECKS["slo_latency_ms"](lower_slo_ceiling + 1)


def test_the_monitoring_component_follows_the_slo_ceiling(lower_slo_ceiling: int) -> None:
    observability = fresh_copy("triton_gke.observability.settings")
    observability.SloSettings(latency_ms=lower_slo_ceiling)
    with pytest.raises(observability.MonitoringError, match=f"above {lower_slo_ceiling} ms"):
        observability.SloSettings(latency_ms=lower_slo_ceiling + 1)


def test_the_stack_settings_follow_the_slo_ceiling(lower_slo_ceiling: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_module, "monitoring", fresh_copy("triton_gke.settings.monitoring"))
    config = stack_settings("dev", sloLatencyMs=lower_slo_ceiling + 1)
    with pytest.raises(ConfigError, match=f"sloLatencyMs.*expected at most {lower_slo_ceiling} ms"):
        stack_module.load_stack_settings(config, stack="dev")


# ---------------------------------------------------------------- GKE's node limits (contracts/gke_limits.py)


def test_the_stack_settings_follow_the_nodes_per_zone_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Halving GKE's per-zone node limit in its home halves the largest gpuMaxNodes of a one-zone region."""
    halved = gke_limits.MAX_NODES_PER_POOL_ZONE // 2
    monkeypatch.setattr(gke_limits, "MAX_NODES_PER_POOL_ZONE", halved)
    monkeypatch.setattr(stack_module, "cluster", fresh_copy("triton_gke.settings.cluster"))
    catalogue = load_gpu_catalogue(DEFAULT_GPU_CATALOGUE)
    region = next(
        r for r in catalogue.regions_with(DEFAULT_ACCELERATOR) if len(catalogue.zones_with(DEFAULT_ACCELERATOR, r)) == 1
    )
    zones = catalogue.zones_with(DEFAULT_ACCELERATOR, region)
    assert largest_gpu_max_nodes(stack_module, region, zones) == halved


# ---------------------------------------------------------------- the GPU table, keyed by GKE's accelerator name

L4 = "nvidia-l4"
L4_STACK = {"gpuAcceleratorType": L4, "gpuMachineType": MACHINES[L4], "regions": ["us-central1"]}


def gpu_keyed_tables() -> dict[str, set[str]]:
    """Every table of the package keyed by a GPU name, by where it lives: each must hold the same GPUs."""
    return {
        "contracts/gpus.py GPU_MEMORY_BYTES (memory)": set(gpus.GPU_MEMORY_BYTES),
        "infra/data/gpu_types.csv (machine shapes, GPUs per VM, compute capability, quota, prices)": set(
            shipped_gpu_types()
        ),
        "infra/gpu_choice.py MACHINES (the node each GPU type is priced on)": set(MACHINES),
        "infra/data/gcp_t4_zones.csv (zones and prices per zone)": set(
            load_gpu_catalogue(DEFAULT_GPU_CATALOGUE).accelerators
        ),
    }


def test_every_table_keyed_by_a_gpu_name_holds_the_same_gpus() -> None:
    tables = gpu_keyed_tables()
    every = set().union(*tables.values())
    assert {where: sorted(every - gpus_there) for where, gpus_there in tables.items()} == dict.fromkeys(tables, [])


def test_every_gpu_name_used_elsewhere_is_a_key_of_the_table() -> None:
    """The default GPU (the stack's, the component's, the model repository's) and every capacity record's GPU."""
    known = set(shipped_gpu_types())
    _, keys = config_schema()
    defaults = {keys["gpuAcceleratorType"].default, DEFAULT_ACCELERATOR, DEFAULT_GPU}
    assert len(defaults) == 1 and defaults <= known, defaults
    assert {r.gpu for r in load_records()} - {TWIN_GPU} <= known


def largest_fitting_count(variant: VariantSettings, gpu: str, memory: int) -> int:
    """The most instances of `variant` whose sum (model_repo/settings.py gpu_memory_problem) fits in `memory`."""
    low, high = 1, 2**20
    while low < high:
        middle = (low + high + 1) // 2
        settings = ModelRepoSettings(variants=(dataclasses.replace(variant, instance_count=middle),))
        low, high = (middle, high) if gpu_memory_problem(settings, gpu, memory) is None else (low, middle - 1)
    return low


def lower_l4_memory(monkeypatch: pytest.MonkeyPatch) -> int:
    """The L4's memory in its one home, lowered by a sixth (24 GB would become 20)."""
    lowered = gpus.GPU_MEMORY_BYTES[L4] * 5 // 6
    monkeypatch.setitem(gpus.GPU_MEMORY_BYTES, L4, lowered)
    return lowered


def test_the_model_repository_follows_the_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """As many instances as filled the L4 before now overflow it, and the refusal names the home's new figure."""
    variant = VariantSettings("m", "FP32", 64, 1, 0, 1, "FP32")
    count = largest_fitting_count(variant, L4, gpus.GPU_MEMORY_BYTES[L4])
    full = ModelRepoSettings(variants=(dataclasses.replace(variant, instance_count=count),))
    validate_model_settings(full, gpu=L4)
    lowered = lower_l4_memory(monkeypatch)
    with pytest.raises(ModelRepoError, match=f"more than the {L4}'s {lowered / 1e9:g} GB of GPU memory"):
        validate_model_settings(full, gpu=L4)


def test_the_gpu_table_and_the_stack_settings_follow_the_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    smaller_l4 = lower_l4_memory(monkeypatch)
    assert shipped_gpu_types()[L4].memory_bytes == smaller_l4
    config = stack_settings("dev", **L4_STACK, modelInstanceCount=1000)
    with pytest.raises(ConfigError, match=f"more than the {L4}'s {smaller_l4 / 1e9:g} GB of GPU memory"):
        stack_module.load_stack_settings(config, stack="dev")
