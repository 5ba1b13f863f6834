"""The ground-truth batcher simulation: exact scenarios for each Triton batching rule, M/D/1 theory at batch 1,
properties that the model guarantees, and the named mutants each caught by a test here."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.bench.truth import batcher_sim
from triton_gke.bench.truth.batcher_sim import (
    BatcherConfig,
    Mutants,
    Scenario,
    capacity,
    poisson_arrivals,
    simulate,
)

CURVE = {1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0, 16: 40.0}  # ms: batching pays, as on a GPU
S1 = 0.010  # curve(1) in seconds


NO_MUTANTS = Mutants()


def _latencies(arrivals, config, mutants=NO_MUTANTS, curve=CURVE, k=1.0):
    return simulate(arrivals, curve, config, k=k, mutants=mutants)


# ---------------------------------------------------------------- one exact scenario per rule


def test_a_lone_request_waits_the_max_queue_delay_then_runs_alone():
    """Delayed batching: no preferred or maximum batch can form, so the batcher sends when the oldest request has
    waited max_queue_delay (batcher.md "Delayed Batching")."""
    config = BatcherConfig(max_batch_size=8, max_queue_delay_us=5000)
    latency, batches = _latencies([0.0], config)
    assert latency == [pytest.approx(0.005 + S1)] and batches == [1]


def test_a_preferred_size_is_sent_as_soon_as_it_forms():
    config = BatcherConfig(max_batch_size=16, preferred_batch_sizes=(4,), max_queue_delay_us=50_000)
    latency, batches = _latencies([0.000, 0.001, 0.002, 0.003], config)
    assert batches == [4]
    assert latency[0] == pytest.approx(0.003 + 0.016)  # sent at the 4th arrival, not after 50 ms


def test_a_full_batch_is_sent_without_waiting_for_the_delay():
    config = BatcherConfig(max_batch_size=2, max_queue_delay_us=50_000)
    latency, batches = _latencies([0.0, 0.001], config)
    assert batches == [2] and latency[0] == pytest.approx(0.001 + 0.012)


def test_without_delay_the_queue_is_sent_whole_when_an_instance_frees():
    config = BatcherConfig(max_batch_size=16)
    latency, batches = _latencies([0.0, 0.001, 0.002, 0.003], config)
    assert batches == [1, 3]  # the first alone at once; the three that queued behind it together
    assert latency[3] == pytest.approx(0.010 + 0.014 - 0.003)


def test_two_instances_share_the_gpu():
    """Processor sharing: two batches in flight each progress at half speed, so both end at 2 x curve(1)."""
    config = BatcherConfig(max_batch_size=1, instances=2)
    latency, _ = _latencies([0.0, 0.0], config)
    assert latency == [pytest.approx(2 * S1), pytest.approx(2 * S1)]


# ---------------------------------------------------------------- the named mutants, each caught


@pytest.mark.parametrize(
    ("mutant", "test"),
    [
        (Mutants(ignore_queue_delay=True), test_a_lone_request_waits_the_max_queue_delay_then_runs_alone),
        (Mutants(parallel_instances=True), test_two_instances_share_the_gpu),
        (Mutants(ignore_preferred=True), test_a_preferred_size_is_sent_as_soon_as_it_forms),
    ],
    ids=["max queue delay ignored", "instances fully parallel", "preferred sizes ignored"],
)
def test_each_named_mutant_fails_its_test(monkeypatch, mutant, test):
    real = batcher_sim.simulate

    def mutated(*args, **kwargs):
        return real(*args, **{**kwargs, "mutants": mutant})

    monkeypatch.setattr(batcher_sim, "simulate", mutated)
    monkeypatch.setitem(globals(), "simulate", mutated)
    with pytest.raises(AssertionError):
        test()


def test_mutants_change_capacity_at_an_slo():
    """Beyond the exact scenarios: each mutant moves the capacity at a 100 ms SLO by more than its 95 % bound."""
    base = Scenario(CURVE, BatcherConfig(16, (4,), 40_000, 2), requests=1500)
    truth = batcher_sim.capacity_estimate(base, 0.1, seeds=(1, 2, 3))
    for mutant in (Mutants(ignore_queue_delay=True), Mutants(parallel_instances=True), Mutants(ignore_preferred=True)):
        moved = batcher_sim.capacity_estimate(replace(base, mutants=mutant), 0.1, seeds=(1, 2, 3))
        # the same seeds' arrivals on both sides (common random numbers): the paired differences' interval
        paired = batcher_sim.estimate([a - b for a, b in zip(moved.per_seed, truth.per_seed, strict=True)])
        assert abs(paired.mean) > paired.half_width, (mutant, paired)


# ---------------------------------------------------------------- theory: M/D/1 at batch 1


def test_batch_one_matches_md1_mean_wait():
    """Pollaczek-Khinchine: an M/D/1 queue's mean wait is rho*S / (2(1-rho)); at rho = 0.6, 15 ms. The simulation's
    mean over 5 seeds x 20,000 requests must agree within its 95 % interval plus 3 %."""
    rho = 0.6
    config = BatcherConfig(max_batch_size=1)
    means = []
    for seed in range(5):
        arrivals = poisson_arrivals(rho / S1, 20_000, seed)
        latency, _ = _latencies(arrivals, config)
        means.append(statistics.fmean(latency[2000:]) - S1)
    got = batcher_sim.estimate(means)
    theory = rho * S1 / (2 * (1 - rho))
    assert abs(got.mean - theory) <= got.half_width + 0.03 * theory


# ---------------------------------------------------------------- properties the model guarantees

configs = st.builds(
    BatcherConfig,
    max_batch_size=st.sampled_from([1, 2, 4, 8, 16]),
    preferred_batch_sizes=st.sampled_from([(), (2,), (4,), (4, 8)]),
    max_queue_delay_us=st.sampled_from([0, 1000, 20_000]),
    instances=st.integers(1, 4),
).filter(lambda c: all(p <= c.max_batch_size for p in c.preferred_batch_sizes))


@settings(max_examples=40, deadline=None)
@given(config=configs, seed=st.integers(0, 10_000), load=st.floats(0.2, 3.0))
def test_every_request_is_answered_in_batches_within_the_rules(config, seed, load):
    arrivals = poisson_arrivals(load / S1, 300, seed)
    latency, batches = _latencies(arrivals, config)
    assert sum(batches) == len(arrivals) and max(batches) <= config.max_batch_size
    assert min(latency) >= S1 - 1e-9  # nobody is served faster than a batch of one on the whole GPU


@settings(max_examples=25, deadline=None)
@given(config=configs, seed=st.integers(0, 10_000), k=st.sampled_from([0.5, 2.0, 10.0]))
def test_time_scale_k_scales_every_latency(config, seed, k):
    """The twin's time scale is exact in the model: arrivals, curve and delay times k give latencies times k."""
    arrivals = poisson_arrivals(0.8 / S1, 200, seed)
    base, batches = _latencies(arrivals, config)
    scaled, scaled_batches = _latencies([a * k for a in arrivals], config, k=k)
    assert scaled_batches == batches
    assert scaled == pytest.approx([x * k for x in base], rel=1e-6)


@settings(max_examples=10, deadline=None)
@given(slos=st.lists(st.floats(0.02, 0.2), min_size=2, max_size=2, unique=True), seed=st.integers(0, 100))
def test_capacity_never_falls_as_the_slo_loosens(slos, seed):
    scenario = Scenario(CURVE, BatcherConfig(8, (8,), 5000, 2), requests=400)
    tight, loose = sorted(slos)
    assert capacity(scenario, tight, seed, grid=8, steps=5) <= capacity(scenario, loose, seed, grid=8, steps=5)


def test_capacity_stays_below_the_peak_and_is_zero_when_nothing_passes():
    scenario = Scenario(CURVE, BatcherConfig(4, (4,), 2000, 1), requests=600)
    assert 0 < capacity(scenario, 1.0, seed=3, grid=8, steps=4) < scenario.peak_rate()
    assert capacity(scenario, S1 / 2, seed=3, grid=8, steps=4) == 0.0  # faster than one batch of one: impossible


def test_an_overloaded_queue_fails_even_when_its_overall_p95_passes():
    """Offered 1.3 x the peak, the queue grows: the last quarter's p95 breaks an SLO the whole run's p95 meets."""
    scenario = Scenario(CURVE, BatcherConfig(1), requests=2000)
    rate = 1.3 * scenario.peak_rate()
    overall = batcher_sim.p95(scenario.latencies_at(rate, 0))
    assert not scenario.meets(rate, 0, overall * 1.01)
