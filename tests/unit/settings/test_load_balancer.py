"""settings.load_balancer: no pod is offered more than its capacity over both protocols (issue 20, item 6).

The HTTP and the gRPC backend service reach the same pods (one NEG per port over the same endpoints) and each
counts only the requests it sends against its own maxRatePerEndpoint (the balancing mode and its target are
set per backend service, for each backend: https://cloud.google.com/load-balancing/docs/backend-service).
With lbMaxRatePerPod on both, a pod could be offered twice what it serves. The settings layer splits the pod's
rate between them (settings/load_balancer.py backend_rates); these tests sum over both services per pod."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import triton_gke.settings.capacity as sizing
from tests.support.stacks import evaluate, stack_settings
from tests.unit.settings.test_capacity import per_pod_rates
from triton_gke.settings import load_stack_settings
from triton_gke.settings.load_balancer import PROTOCOL_SHARE_PERCENT, backend_rates, describe_split


def test_a_sized_pod_is_offered_at_most_its_capacity_over_both_backend_services() -> None:
    """The reference record (253 req/s per T4 node), targetRps 1012 on 5 nodes: lbMaxRatePerPod 203. On both
    services that offered each pod 406 req/s, 1.6 x what it serves at the SLO."""
    overrides = {"targetRps": 1012, "gpuMaxNodes": 5}
    sized = load_stack_settings(stack_settings("staging", **overrides), stack="staging")
    capacity = Fraction(repr(sized.capacity.rps_per_node))
    totals = per_pod_rates(evaluate("staging", **overrides))
    assert totals and all(total <= capacity for total in totals.values()), (capacity, totals)
    assert set(totals.values()) == {sized.load_balancer.max_rate_per_pod}  # the split loses nothing here


def test_an_explicit_rate_is_the_total_a_pod_is_offered(prod_plan) -> None:
    totals = per_pod_rates(prod_plan)
    assert len(totals) == 8 and set(totals.values()) == {1000}  # prod's lbMaxRatePerPod, over 8 zones' pods


@settings(max_examples=200, deadline=None)
@given(
    target=st.integers(min_value=1, max_value=10**6),
    headroom=st.integers(min_value=0, max_value=sizing.MAX_HEADROOM_PERCENT),
    hundredths=st.integers(min_value=100, max_value=10**8),  # req/s per node x 100: 1 to 1e6
    http_share=st.integers(min_value=1, max_value=99),
)
def test_over_capacities_targets_and_shares_no_pod_gets_more_than_it_serves(
    target: int, headroom: int, hundredths: int, http_share: int
) -> None:
    capacity = Fraction(hundredths, 100)
    nodes = sizing.nodes_for(target, headroom, capacity)
    rate = sizing.lb_rate_per_pod(target, headroom, capacity, nodes)
    shares = {"http": http_share, "grpc": 100 - http_share}
    rates = {port: Fraction(repr(r)) for port, r in backend_rates(rate, shares).items()}
    assert sum(rates.values()) <= rate <= capacity  # a pod over both protocols: at most what it serves
    for port, share in shares.items():
        exact = Fraction(rate * share, 100)
        assert 0 < rates[port] <= exact and exact - rates[port] < Fraction(1, 100)  # a hundredth at most lost
    assert nodes * sum(rates.values()) >= target - nodes * Fraction(2, 100)  # the minimum still takes the target


@settings(max_examples=100, deadline=None)
@given(rate=st.integers(min_value=1, max_value=10**7))
def test_the_default_split_is_even_and_exact(rate: int) -> None:
    rates = backend_rates(rate)
    assert rates == {"http": rate / 2, "grpc": rate / 2} and sum(rates.values()) == rate
    assert PROTOCOL_SHARE_PERCENT == {"http": 50, "grpc": 50}


@pytest.mark.parametrize(
    "shares",
    [{"http": 100, "grpc": 0}, {"http": 60, "grpc": 60}, {"http": 50}, {"http": 50, "grpc": 50, "metrics": 0}],
)
def test_a_split_that_leaves_a_protocol_nothing_or_overbooks_is_refused(shares: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="shares"):
        backend_rates(100, shares)


def test_the_plan_line_says_how_the_rate_is_split() -> None:
    assert describe_split(203) == (
        "lbMaxRatePerPod 203 req/s per pod, split over the HTTP and gRPC backend services on the same pods (each "
        "counts only its own requests): HTTP 101.5 (50 %), gRPC 101.5 (50 %); past its share a protocol spills to the "
        "next region."
    )
    assert math.isclose(sum(backend_rates(203, {"http": 90, "grpc": 10}).values()), 203)


BACKEND = "gcp:compute/backendService:BackendService"


@settings(max_examples=8, deadline=None)
@given(share=st.integers(1, 99))
def test_lb_http_share_percent_splits_the_pods_rate_between_the_two_services(share: int) -> None:
    """A known client mix (lbHttpSharePercent) moves the split; the two still add up to lbMaxRatePerPod."""
    plan = evaluate("staging", lbHttpSharePercent=share, lbMaxRatePerPod=1000)
    rates = {
        b.inputs["name"].rsplit("-", 1)[1]: b.inputs["backends"][0]["maxRatePerEndpoint"] for b in plan.of_type(BACKEND)
    }
    assert rates == {"http": share * 10, "grpc": (100 - share) * 10}
