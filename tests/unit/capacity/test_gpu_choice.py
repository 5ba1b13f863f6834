"""The capacity contract across GPU types: nodes and $/hour per type for a target, the cheaper one picked."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.capacity.gpu_choice import GpuOption, arithmetic, as_fraction, choose, cost
from triton_gke.infra.gpu_choice import choose_for_region, main


def option(name, rps, gpu_usd_h, vm_usd_h=0, gpus=1):
    return GpuOption(name, f"{name}-vm", gpus, as_fraction(rps), as_fraction(gpu_usd_h), as_fraction(vm_usd_h))


@pytest.mark.parametrize(("t4_usd_h", "l4_usd_h", "cheaper"), [(0.35, 0.56, 0.27), (0.175, 0.223, 0.42)])
def test_the_issue_figures_pick_l4_about_25_percent_cheaper_on_demand_and_40_on_spot(t4_usd_h, l4_usd_h, cheaper):
    # Issue 36: MLPerf v3.1/v0.7 ResNet-50 INT8 Server per GPU, GPU-only prices on demand and Spot.
    t4, l4 = option("nvidia-tesla-t4", "5563.10", t4_usd_h), option("nvidia-l4", "12204.35", l4_usd_h)
    target = Fraction(10**7)  # large enough that rounding up to whole nodes does not move the ratio
    best, costed = choose([t4, l4], target)
    assert best.option is l4
    saving = 1 - costed[1].usd_per_million / costed[0].usd_per_million
    assert float(saving) == pytest.approx(cheaper, abs=0.005)
    lines = arithmetic(costed, best, target)
    assert lines[-1].startswith("choice: nvidia-l4") and f"{round(cheaper * 100)} % cheaper per hour" in lines[-1]


def test_nodes_round_up_with_headroom_and_never_fall_below_one():
    t4 = option("t4", 253, "0.35", "0.19")
    assert cost(t4, Fraction(400), headroom_percent=25).nodes == 2  # ceil(400 x 1.25 / 253) = ceil(1.98)
    assert cost(t4, Fraction(0)).nodes == 1
    assert cost(t4, Fraction(400), 25).usd_h == 2 * Fraction("0.54")


def test_a_region_with_both_types_prints_its_arithmetic():
    best, lines = choose_for_region("us-central1", 20000)
    assert best.option.accelerator == "nvidia-l4" and best.nodes == 2
    assert "ceil(20000 x 1 / (5563.1 req/s x 1 GPU)) = 4 node(s)" in lines[1]
    assert lines[-1].startswith("  choice: nvidia-l4")
    # A region without L4 in the catalogue has one candidate.
    only, lines = choose_for_region("europe-west4", 1000)
    assert only.option.accelerator == "nvidia-tesla-t4" and "the only GPU type" in lines[-1]


def test_the_command_prints_the_choice(capsys):
    assert main(["--region", "us-central1", "--target-rps", "20000", "--spot"]) == 0
    assert "choice: nvidia-l4" in capsys.readouterr().out
    assert main(["--region", "europe-north1", "--target-rps", "1"]) == 2


prices = st.decimals(min_value="0.001", max_value="50", places=4).map(lambda d: Fraction(str(d)))
rates = st.decimals(min_value="0.1", max_value="100000", places=2).map(lambda d: Fraction(str(d)))
options = st.builds(
    lambda i, rps, gpu, vm, gpus: GpuOption(f"gpu{i}", f"vm{i}", gpus, rps, gpu, vm),
    st.integers(0, 99), rates, prices, prices, st.integers(1, 8),
)  # fmt: skip


@given(st.lists(options, min_size=1, max_size=5), rates, st.integers(0, 100))
def test_the_pick_is_never_the_more_expensive_one(candidates, target, headroom):
    best, costed = choose(candidates, target, headroom)
    assert all(best.usd_h <= c.usd_h for c in costed)
    assert all(c.nodes * c.option.gpus_per_node * c.option.rps_per_gpu >= target * (1 + Fraction(headroom, 100))
               for c in costed)  # fmt: skip
    if len(costed) > 1:
        assert arithmetic(costed, best, target, headroom)[-1].startswith(f"choice: {best.option.accelerator}")
