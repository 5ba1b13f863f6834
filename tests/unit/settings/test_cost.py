"""The estimated hourly cost output, from the shipped price catalogues."""

from __future__ import annotations

import pytest

from triton_gke.settings import from_stack_file as load_settings
from triton_gke.settings.cost import stack_cost_summary


def test_dev_costs_one_spot_t4_node_one_cpu_node_and_the_cluster():
    cost = stack_cost_summary(load_settings("dev"))
    # 0.10 cluster + (0.048 n1-standard-4 spot + 0.14 T4 spot) + 0.134 e2-standard-4; at most a second CPU node
    assert cost["perRegionUsdPerHour"]["us-central1"] == {"min": pytest.approx(0.422), "max": pytest.approx(0.556)}
    assert cost["loadBalancerUsdPerHour"] == 0.0


def test_prod_sums_regions_and_the_forwarding_rule():
    cost = stack_cost_summary(load_settings("prod"))
    # us-central1 at minimum: 0.10 + 2 x (0.19 + 0.35) + 0.38
    assert cost["perRegionUsdPerHour"]["us-central1"]["min"] == pytest.approx(1.56)
    assert cost["totalUsdPerHour"]["min"] == pytest.approx(1.56 + 1.671 + 1.68 + 0.025)
    assert cost["missingPrices"] == []


def test_unknown_prices_are_named_not_guessed():
    cost = stack_cost_summary(load_settings("staging"))
    assert cost["totalUsdPerHour"] == {"min": None, "max": None}
    assert "n1-standard-4 spot in europe-west4" in cost["missingPrices"]
