"""bench.metrics.cost: the cost math against the reference anchors."""

from __future__ import annotations

import pytest

from triton_gke.bench.metrics import cost
from triton_gke.settings import from_stack_file as load_settings


# ---------------------------------------------------------------- cost
def test_cost_math_matches_the_reference_anchors() -> None:
    settings = load_settings("dev")
    prices = {p.pricing: p for p in cost.pricings(settings)}
    # n1-standard-4 + one T4 in us-central1: 0.19 + 0.35 on demand, 0.048 + 0.14 spot
    assert prices["on-demand"].node_usd_h == pytest.approx(0.54)
    assert prices["spot"].node_usd_h == pytest.approx(0.188)
    # performance-anchors.md: ~$0.067 on-demand, ~$0.023 spot per 1M inferences at 2236 RPS
    assert cost.usd_per_million(0.54, 2236) == pytest.approx(0.0671, abs=5e-4)
    assert cost.usd_per_million(0.188, 2236) == pytest.approx(0.0234, abs=5e-4)
    assert cost.usd_per_million(0.54, None) is None and cost.usd_per_million(None, 10) is None
    # LB data processing: ~$4.49 (FP32) and ~$1.12 (UINT8) per 1M requests
    assert cost.lb_usd_per_million(602_112) == pytest.approx(4.49, abs=0.01)
    assert cost.lb_usd_per_million(150_528) == pytest.approx(1.12, abs=0.01)


def test_cost_rows_cover_measured_and_reference_rps() -> None:
    prices = cost.pricings(load_settings("dev"))
    rows = cost.cost_rows(prices, {"original": 5.0, "original_uint8": None}, {"original": 602_112}, "measured")
    assert {(r.rps_source, r.pricing) for r in rows} == {
        ("measured", "on-demand"), ("measured", "spot"), ("reference T4", "on-demand"), ("reference T4", "spot")
    }  # fmt: skip
    reference = next(r for r in rows if r.rps_source == "reference T4" and r.pricing == "on-demand")
    assert reference.rps == 253.0 and reference.node_usd_per_1m == pytest.approx(0.54 / (253 * 3600) * 1e6)
    # the region at minimum size: GKE fee + one e2-standard-4 + one GPU node, all serving one node's RPS
    assert reference.region_usd_h == pytest.approx(0.10 + 0.134 + 0.54)
    assert all(r.variant == "original" for r in rows)  # no RPS and no reference figure: no row
