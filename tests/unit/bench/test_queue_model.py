"""The queue model the tuner's screen ranks configurations with (bench/metrics/queue_model.py), checked against
textbook results it was not built from: Pollaczek-Khinchine for one server, Cosmetatos' approximation for several."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.bench.metrics import queue_model
from triton_gke.bench.metrics.queue_model import capacity, queue_p95, queue_times, single_queue


@settings(max_examples=15, deadline=None)
@given(st.floats(1.0, 500.0), st.floats(0.05, 0.8))
def test_the_single_queue_model_waits_as_pollaczek_khinchine_says(service_ms: float, load: float) -> None:
    """M/D/1's mean wait is rho * S / (2 * (1 - rho)) (the Pollaczek-Khinchine formula with a fixed service time):
    a textbook result the simulation did not come from."""
    rate = load * 1000.0 / service_ms
    p95, queue = single_queue(service_ms, rate)
    expected = load * service_ms / (2 * (1 - load))
    assert queue == pytest.approx(expected, rel=0.12)
    assert p95 >= service_ms


def test_the_single_queue_model_has_no_steady_state_at_or_past_the_servers_rate() -> None:
    assert single_queue(50.0, 20.0) is None and single_queue(50.0, 25.0) is None
    # Near capacity 100,000 arrivals from an empty queue fall short of the steady state: no figure at load 0.95.
    assert single_queue(50.0, 19.0) is None and single_queue(50.0, 18.9) is not None
    p95, queue = single_queue(50.0, 0.01)  # almost never two requests at once
    assert p95 == pytest.approx(50.0) and queue < 0.1


def erlang_c(servers: int, offered: float) -> float:
    """The chance an arrival waits in M/M/c (Erlang's C formula), offered = rate x service time."""
    head = sum(offered**k / math.factorial(k) for k in range(servers))
    tail = offered**servers / math.factorial(servers) * servers / (servers - offered)
    return tail / (head + tail)


def cosmetatos_wait_ms(service_ms: float, servers: int, rate: float) -> float:
    """M/D/c's mean wait by Cosmetatos' approximation from M/M/c's (G. P. Cosmetatos, "Some approximate equilibrium
    results for the multi-server queue (M/G/r)", Operational Research Quarterly 27 (1976),
    https://doi.org/10.1057/jors.1976.63): W(M/D/c) = 1/2 [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)]
    W(M/M/c), within a few per cent of the exact values at the loads below."""
    per_server = 1000.0 / service_ms
    offered, load = rate / per_server, rate / (per_server * servers)
    markov_ms = 1000.0 * erlang_c(servers, offered) / (servers * per_server - rate)
    return 0.5 * (1 + (1 - load) * (servers - 1) * (math.sqrt(4 + 5 * servers) - 2) / (16 * load * servers)) * markov_ms


@settings(max_examples=12, deadline=None)
@given(st.floats(5.0, 300.0), st.integers(2, 4), st.floats(0.5, 0.85))
def test_several_instances_wait_as_cosmetatos_approximation_says(service_ms: float, servers: int, load: float) -> None:
    rate = load * servers * 1000.0 / service_ms
    found = queue_times(service_ms, servers, rate)
    assert found is not None
    p95, wait = found
    assert wait == pytest.approx(cosmetatos_wait_ms(service_ms, servers, rate), rel=0.1)
    assert p95 >= service_ms


@settings(max_examples=25, deadline=None)
@given(st.floats(1.0, 400.0), st.integers(1, 3), st.floats(1.0, 2000.0))
def test_the_capacity_meets_the_slo_and_a_little_more_does_not(service_ms: float, servers: int, slo_ms: float) -> None:
    """What the tuner ranks by: the rate found keeps p95 within the SLO; 2 % more breaks it, or the model has no
    steady state there."""
    found = capacity(service_ms, servers, slo_ms)
    if service_ms > slo_ms:
        assert found == 0.0
        return
    assert found > 0
    within = queue_p95(service_ms, servers, found, queue_model.CAPACITY_REQUESTS)
    assert within is not None and within <= slo_ms
    beyond = queue_p95(service_ms, servers, found * 1.02, queue_model.CAPACITY_REQUESTS)
    assert beyond is None or beyond > slo_ms


@settings(max_examples=15, deadline=None)
@given(st.floats(5.0, 200.0), st.floats(1.05, 3.0), st.floats(210.0, 1000.0))
def test_a_slower_request_never_predicts_more_capacity(service_ms: float, slower: float, slo_ms: float) -> None:
    assert capacity(service_ms * slower, 1, slo_ms) <= capacity(service_ms, 1, slo_ms)
    assert capacity(service_ms, 2, slo_ms) >= capacity(service_ms, 1, slo_ms)  # another instance, as fast


@settings(max_examples=10, deadline=None)
@given(st.floats(10.0, 100.0), st.integers(2, 3), st.floats(1.0, 4.0))
def test_one_instance_c_times_as_fast_beats_c_instances(service_ms: float, servers: int, slo_factor: float) -> None:
    """The pooling result: one instance c times as fast holds the SLO up to at least the rate c instances hold (so
    in this model too two single-thread instances beat one two-thread instance only when the threads scale worse)."""
    slo_ms = slo_factor * service_ms
    assert capacity(service_ms / servers, 1, slo_ms) >= capacity(service_ms, servers, slo_ms) * 0.99


def test_the_model_is_seeded_so_every_machine_predicts_the_same() -> None:
    assert capacity(59.0, 1, 200.0) == capacity(59.0, 1, 200.0)
    assert queue_times(110.0, 2, 8.0) == queue_times(110.0, 2, 8.0)


@pytest.mark.parametrize(
    ("service_ms", "servers", "rate"), [(0.0, 1, 1.0), (10.0, 0, 1.0), (10.0, 1, 0.0), (float("nan"), 1, 1.0)]
)
def test_inputs_without_a_queue_are_refused(service_ms: float, servers: int, rate: float) -> None:
    with pytest.raises(ValueError, match="expected"):
        queue_times(service_ms, servers, rate)
    with pytest.raises(ValueError, match="slo_ms"):
        capacity(10.0, 1, 0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1e-310, 5e-306, 0.0, -5.0]),
    st.integers(-3, 10**9) | st.sampled_from([1.5, True]),
    st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_input_gives_a_capacity_or_a_value_error_and_never_hangs(
    service_ms: float, servers: int, slo: float
) -> None:
    """The red team: a time per request of 1e-310 ms made the bisection's upper bound infinite and it never ended;
    0 divided by zero; servers 1.5 was a TypeError; servers 0 and NaN times gave 0.0 as if measured."""
    try:
        found = capacity(service_ms, servers, slo)
    except ValueError:
        return
    assert math.isfinite(found) and found >= 0
    assert isinstance(servers, int) and servers >= 1 and math.isfinite(service_ms) and service_ms > 0


@pytest.mark.parametrize("requests", [0, -1, 2.5])
def test_a_simulation_of_no_arrivals_is_refused(requests: int) -> None:
    with pytest.raises(ValueError, match="requests"):
        queue_times(59.0, 2, 10.0, requests)
    with pytest.raises(ValueError, match="requests"):
        single_queue(59.0, 10.0, requests)


@settings(max_examples=20, deadline=None)
@given(extra=st.integers(1, 10**12), requests=st.integers(2, 300), rate=st.floats(0.5, 20.0))  # below 0.95 load of 2
def test_instances_beyond_one_per_request_change_nothing(extra: int, requests: int, rate: float) -> None:
    """With as many instances as requests none waits; more change nothing (the model caps its heap there, which
    took a 10**9-instance example from 7 minutes to milliseconds)."""
    assert queue_times(40.0, requests + extra, rate, requests) == queue_times(40.0, requests, rate, requests)
    assert queue_times(40.0, requests, rate, requests) == (40.0, 0.0)
