"""Each fact of issue 45 has one home, and every reader follows it when it changes: a test changes the home (never
restating its value), runs a fresh copy of each reader (tests/support/fresh_modules.py) and sees that reader's
refusal move with it. A reader that kept its own copy of the fact (Model Analyzer's 600,000 ms SLO ceiling did) fails
here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import stack_settings
from tests.support.fresh_modules import fresh_copy
from tests.support.settings_probes import largest_gpu_max_nodes
from triton_gke.bench.runners.runner import BenchError
from triton_gke.contracts import gke_limits, slo
from triton_gke.k8s.on_cluster import DEFAULT_ACCELERATOR
from triton_gke.settings import ConfigError, lifecycle
from triton_gke.settings import stack as stack_module
from triton_gke.settings.catalogue import DEFAULT_GPU_CATALOGUE, load_gpu_catalogue

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
