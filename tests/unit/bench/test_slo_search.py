"""The benchmark: the SLO search on recorded curves, the report, the cost math, and one real smoke run.

Only test_smoke_run_end_to_end starts servers (a real tritonserver and real Locust, < 60 s);
everything else is pure and fast.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_gke.bench import cost, perf_analyzer, report, runner
from triton_gke.bench.__main__ import main
from triton_gke.bench.load_plan import LoadPlan, PlanError
from triton_gke.bench.probes import Sample, window_stats
from triton_gke.bench.results import BenchRun, PerfAnalyzerOpinion, StepRow, VariantSummary, load_run, payload_pairs
from triton_gke.bench.slo_search import (
    NOT_REACHED,
    PASS,
    WARMUP,
    RateLadder,
    SloCriteria,
    Step,
    next_rate,
    rate_search,
    rate_state,
    search,
    should_stop,
    spread,
    verdict,
)
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.sandbox.triton import TritonStartError
from triton_gke.settings import from_stack_file as load_settings

SLO = SloCriteria(slo_ms=100, max_failure_ratio=0.01, stop_after=2, min_requests=20)


def curve(*points: tuple, first_is_warmup: bool = True) -> list[Step]:
    """Steps from (users, rps, p95_ms[, requests, failures]); offered load = users (1 request/s each)."""
    steps = []
    for index, (users, rps, p95, *rest) in enumerate(points):
        requests, failures = rest if rest else (int(rps * 6) + 20, 0)
        warmup = first_is_warmup and index == 0
        steps.append(Step(users, rps, p95 and p95 * 0.8, p95, requests, failures, float(users), warmup))
    return steps


# Recorded on this project's 2-core machine while other jobs ran (load average ~2):
# `triton-gke bench --variants original --slo-ms 400 --users 2,4,6,8,10,12,14,16 --repeats 1`.
RECORDED_ORIGINAL_CPU = [
    Step(2, 1.9967, 209.3, 284.6, 8, 0, 2.0, warmup=True),
    Step(2, 1.9986, 140.9, 184.2, 20, 0, 2.0),
    Step(4, 3.9949, 238.7, 257.7, 24, 0, 4.0),
    Step(6, 5.4929, 621.4, 1025.1, 33, 0, 6.0),
    Step(8, 7.3198, 1180.4, 1370.8, 44, 0, 8.0),
]
# Shaped like a T4 curve of the reference (users at 1 request/s): p95 flat, then the knee.
GPU_LIKE = curve((200, 199, 300), (200, 199.5, 31), (400, 398, 33), (600, 597, 38), (800, 795, 52), (1000, 991, 71),
                 (1250, 1080, 140), (1500, 1083, 420))  # fmt: skip


# ---------------------------------------------------------------- the SLO search


def test_recorded_curve_finds_the_last_step_under_the_slo() -> None:
    result = search(RECORDED_ORIGINAL_CPU, dataclasses.replace(SLO, slo_ms=400))
    assert result.best_index == 2 and result.max_rps == pytest.approx(3.9949)
    assert result.verdicts == (WARMUP, PASS, PASS, "p95 1025 ms > 400 ms", "p95 1371 ms > 400 ms")
    assert result.stopped_at == 4


def test_recorded_curve_at_the_stack_slo_has_no_result() -> None:
    result = search(RECORDED_ORIGINAL_CPU, SLO)
    assert not result.found and result.max_rps is None
    assert result.stopped_at == 2  # two failing steps in a row: no need to load the server further
    assert result.verdicts[3:] == (NOT_REACHED, NOT_REACHED)


def test_gpu_like_curve_picks_the_knee() -> None:
    result = search(GPU_LIKE, SLO)
    assert result.best.users == 1000 and result.max_rps == 991


def test_warmup_step_is_discarded_even_when_it_looks_best() -> None:
    steps = curve((50, 500, 20), (10, 10, 40), (20, 19, 60), (30, 25, 150), (40, 25, 300))
    result = search(steps, SLO)
    assert result.best_index == 2 and result.verdicts[0] == WARMUP
    slow_warmup = curve((10, 2, 5000), (10, 10, 40), (20, 19, 60), (30, 25, 150), (40, 25, 300))
    assert search(slow_warmup, SLO).best_index == 2  # a slow first step does not count as a failure either


def test_single_noisy_step_above_the_slo_is_tolerated() -> None:
    steps = curve((10, 10, 40), (10, 10, 40), (20, 20, 130), (30, 29, 80), (40, 33, 150), (50, 34, 400))
    result = search(steps, SLO)
    assert result.best.users == 30 and result.stopped_at == 5


def test_k_failing_steps_in_a_row_stop_and_later_passes_are_ignored() -> None:
    steps = curve((10, 10, 40), (10, 10, 40), (20, 20, 130), (30, 25, 180), (40, 40, 90))
    result = search(steps, SLO)
    assert result.best.users == 10 and result.stopped_at == 3 and result.verdicts[4] == NOT_REACHED
    assert search(steps, dataclasses.replace(SLO, stop_after=3)).best.users == 40
    assert search(steps, dataclasses.replace(SLO, stop_after=1)).stopped_at == 2


def test_highest_rps_wins_over_a_later_passing_step_past_saturation() -> None:
    steps = curve((10, 10, 40), (10, 10, 40), (20, 19.5, 70), (30, 19.0, 95), (40, 18, 150), (50, 17, 200))
    assert search(steps, SLO).best.users == 20


def test_failures_within_the_tolerance_pass_but_only_successes_count() -> None:
    steps = curve((10, 10, 40), (10, 9.9, 40, 1000, 10), (20, 19.8, 60, 2000, 20), (30, 25, 150), (40, 25, 300))
    result = search(steps, SLO)
    assert result.best.users == 20 and result.max_rps == 19.8  # 1% failed: tolerated, not counted as throughput


def test_failures_above_the_tolerance_fail_even_with_a_fast_p95() -> None:
    """A server that fails fast has low latencies: failures must not hide behind them."""
    steps = curve((10, 10, 40), (10, 10, 40), (20, 12, 5, 240, 120), (30, 10, 5, 300, 200))
    result = search(steps, SLO)
    assert result.best.users == 10
    assert result.verdicts[2] == "failures 50.0% > 1.0%" and result.stopped_at == 3
    strict = dataclasses.replace(SLO, max_failure_ratio=0.0)
    assert verdict(curve((10, 9.9, 40, 100, 1), first_is_warmup=False)[0], strict).kind == "fail"


def test_all_failing_curve_has_no_result() -> None:
    steps = curve((1, 1, 300), (1, 1, 250), (2, 2, 400), (3, 2.5, 900))
    result = search(steps, SLO)
    assert not result.found and result.best_index is None and result.stopped_at == 2
    everything_failed = curve((1, 0, None, 30, 30), (1, 0, None, 30, 30), (2, 0, None, 60, 60))
    assert search(everything_failed, SLO).verdicts[1:] == ("failures 100.0% > 1.0%",) * 2
    assert search([], SLO).found is False


def test_too_few_requests_are_inconclusive_unless_they_already_miss() -> None:
    few_fast = Step(1, 1.0, 40, 60, 6, 0, 1.0)
    few_slow = Step(1, 1.0, 300, 400, 6, 0, 1.0)
    assert verdict(few_fast, SLO).kind == "skip" and "inconclusive" in verdict(few_fast, SLO).reason
    assert verdict(few_slow, SLO).kind == "fail"
    # an inconclusive step between two failures does not break the row
    steps = [Step(1, 1, 40, 60, 30, 0, 1.0, True), Step(2, 2, 40, 60, 30, 0, 2.0), Step(4, 4, 200, 300, 30, 0, 4.0),
             Step(5, 5, 40, 60, 5, 0, 5.0), Step(6, 5, 250, 400, 30, 0, 6.0)]  # fmt: skip
    result = search(steps, SLO)
    assert result.best_index == 1 and result.stopped_at == 4


def test_should_stop_is_the_live_form_of_the_rule() -> None:
    steps = curve((10, 10, 40), (10, 10, 40), (20, 20, 130), (30, 25, 180))
    assert [should_stop(steps[: n + 1], SLO) for n in range(len(steps))] == [False, False, False, True]


def test_criteria_and_spread() -> None:
    with pytest.raises(ValueError, match="slo_ms"):
        SloCriteria(slo_ms=0)
    with pytest.raises(ValueError, match="max_failure_ratio"):
        SloCriteria(max_failure_ratio=1.5)
    found = spread([10.0, None, 12.0, 11.0])
    assert (found.median, found.low, found.high, found.count) == (11.0, 10.0, 12.0, 3)
    assert found.relative == pytest.approx(2 / 11)
    assert spread([None, None]) is None


# ---------------------------------------------------------------- plan, probes, perf_analyzer


def test_load_plan_travels_through_the_environment() -> None:
    plan = LoadPlan(RateLadder(2, 1.5, 0.05, 500, 0.4), 32, 6.0, 2.0, 4.0, SLO, "poisson", (1, 2, 4), "/tmp/s.jsonl")
    assert LoadPlan.from_env(plan.env()) == plan
    assert LoadPlan.from_env(dataclasses.replace(plan, saturation_users=()).env()).saturation_users == ()
    # a step holds min_requests: 1.25 x 20 / 2 requests/s = 12.5 s, at most 4 x step_s; never under step_s
    assert (plan.step_length_s(2.0), plan.step_length_s(1.0), plan.step_length_s(100.0)) == (12.5, 24.0, 6.0)
    assert plan.max_duration_s() > plan.max_search_steps() * (2 + 24)
    with pytest.raises(PlanError, match="--saturation-users"):
        dataclasses.replace(plan, saturation_users=(4, 2))
    with pytest.raises(PlanError, match="--arrival"):
        dataclasses.replace(plan, arrival="uniform")
    with pytest.raises(PlanError, match="BENCH_SLO_MS is not set"):
        LoadPlan.from_env({})
    with pytest.raises(ValueError, match="--start-rps 0 / --max-rps 10"):
        RateLadder(0, 1.5, 0.05, 10, 0.1)


# ---------------------------------------------------------------- the rate search


def simulate(capacity: float, ladder: RateLadder, noisy: frozenset[int] = frozenset(), limit: int = 400) -> list[Step]:
    """Run the search against a server that meets the SLO exactly up to `capacity` requests/s. Steps
    whose number is in `noisy` fail although their rate is below the capacity (one-off noise)."""
    steps = [Step(32, ladder.start, 50, 90, 100, 0, ladder.start, warmup=True)]
    while (rate := next_rate(steps, SLO, ladder)) is not None and len(steps) < limit:
        fails = rate > capacity or len(steps) in noisy
        steps.append(Step(32, rate, 60, 300 if fails else 80, 100, 0, rate))
    return steps


ladders = st.builds(
    RateLadder,
    start=st.floats(0.5, 50),
    growth=st.floats(1.2, 3),
    precision=st.sampled_from([0.02, 0.05, 0.1]),
    max_rate=st.just(10_000.0),
    floor=st.just(0.01),
)


@settings(max_examples=60, deadline=None)
@given(capacity=st.floats(0.05, 5000), ladder=ladders)
def test_rate_search_brackets_the_capacity_within_its_precision(capacity: float, ladder: RateLadder) -> None:
    steps = simulate(capacity, ladder)
    result = rate_search(steps, SLO)
    any_count = dataclasses.replace(SLO, min_requests=1)  # the bound on steps does not depend on it
    assert len(steps) - 1 <= LoadPlan(ladder, 32, 6.0, 2.0, 4.0, any_count).max_search_steps()
    assert result.found, [s.offered_rps for s in steps]
    found = runner.capacity(result)
    assert capacity / (1 + ladder.precision) < found <= capacity  # within 5 % (the precision), never above
    state = rate_state(steps, SLO)
    assert state.high is not None and state.high / found - 1 <= ladder.precision + 1e-12
    assert all(s.rps == s.offered_rps for s in steps[1:])  # the simulated server delivers what is offered


@settings(max_examples=60, deadline=None)
@given(capacity=st.floats(5, 500), ladder=ladders, noise=st.sets(st.integers(1, 40), max_size=6))
def test_single_noisy_failures_do_not_lower_the_answer(capacity: float, ladder: RateLadder, noise: set[int]) -> None:
    """A failure at a rate the server sustains is re-measured; only two failures in a row fail a rate."""
    noisy = frozenset(n for n in noise if n - 1 not in noise)  # one-off failures, never two in a row
    clean = runner.capacity(rate_search(simulate(capacity, ladder), SLO))
    result = rate_search(simulate(capacity, ladder, noisy), SLO)
    assert runner.capacity(result) == pytest.approx(clean) or ladder.start > capacity


def test_rate_search_rules_on_a_recorded_search() -> None:
    """From the CPU twin of `original` at a 300 ms SLO on 2 busy cores (bench run of this change)."""
    steps = [Step(32, 1.0, 115, 128, 2, 0, 2.0, warmup=True), Step(32, 2.2, 133, 285, 26, 0, 2.0),
             Step(32, 2.2, 104, 163, 20, 0, 3.0), Step(32, 5.3, 138, 282, 32, 0, 4.5),
             Step(32, 7.7, 408, 722, 31, 0, 6.75), Step(32, 6.5, 138, 542, 26, 0, 6.75),
             Step(32, 4.6, 162, 806, 23, 0, 5.51), Step(32, 5.8, 409, 290, 29, 0, 5.51),
             Step(32, 4.3, 148, 320, 26, 0, 4.98), Step(32, 6.5, 167, 575, 39, 0, 4.98)]  # fmt: skip
    criteria = dataclasses.replace(SLO, slo_ms=300)
    ladder = RateLadder(2, 1.5, 0.05, 500, 0.4)
    result = rate_search(steps, criteria)
    # 6.75 failed twice: the climb stops; 5.51 failed, then passed: noise, so 5.51 passes; 4.98 failed twice,
    # but it is below a passing rate: a later, lower failure bounds the answer from above all the same.
    state = rate_state(steps, criteria)
    assert state.passed == (2.0, 3.0, 4.5, 5.51) and state.failed == (6.75, 4.98)
    assert runner.capacity(result) == 4.5 and result.best_index == 3
    assert result.verdicts[0] == WARMUP and result.verdicts[4] == "p95 722 ms > 300 ms"
    assert next_rate(steps, criteria, ladder) == pytest.approx(math.sqrt(4.5 * 4.98))
    assert next_rate(steps[:5], criteria, ladder) == 6.75  # one failure: measure the same rate again
    assert next_rate(steps[:1], criteria, ladder) == 2.0 and next_rate(steps[:2], criteria, ladder) == 3.0


def test_too_few_requests_are_retried_then_count_as_failing() -> None:
    ladder = RateLadder(2, 2, 0.05, 100, 0.5)
    few = [Step(4, 2, 40, 60, 30, 0, 2.0, warmup=True)] + [Step(4, 2, 40, 60, 5, 0, 2.0)] * 3
    assert next_rate(few, SLO, ladder) == 2.0  # inconclusive: measure again
    assert next_rate([*few, Step(4, 2, 40, 60, 5, 0, 2.0)], SLO, ladder) == 1.0  # 4 tries: failing, come down
    failing = [Step(4, 2, 40, 600, 30, 0, r) for r in (2.0, 2.0, 1.0, 1.0, 0.5, 0.5)]
    assert next_rate(failing, SLO, ladder) is None and not rate_search(failing, SLO).found


def test_window_stats_turn_counters_into_batch_size_and_cpu() -> None:
    def sample(t: float, cpu: float, busy: float, n: float, executions: float) -> Sample:
        # n requests of one image, each 50 ms in the server (10 ms queued); 200 jiffies of machine time per second
        return Sample(t, cpu, busy, t * 200, n, executions, n, n * 5e4, n * 1e4, None)

    samples = [sample(0, 0, 0, 0, 0), sample(1, 0.5, 100, 10, 10), sample(5, 4.5, 500, 90, 30)]
    samples.append(sample(6, 5, 550, 95, 31))
    stats = window_stats(samples, 1.2, 4.8)  # widened to the samples around the window: t=1..5
    assert stats.batch == pytest.approx(80 / 20)
    assert stats.machine_cpu_pct == pytest.approx(100 * 400 / 800)
    assert stats.server_ms == pytest.approx(50) and stats.queue_ms == pytest.approx(10)
    assert stats.gpu_pct is None
    assert window_stats(samples[:1], 0, 1).batch is None


def test_perf_analyzer_csv_is_parsed_into_milliseconds(tmp_path: Path) -> None:
    path = tmp_path / "pa.csv"
    path.write_text(  # recorded from perf_analyzer 2.51 against the `original` CPU twin
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
        "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "2,4.06626,660,2479,19862,334,455155,414,0,488542,535830,543987,573098\n"
    )
    found = perf_analyzer.parse_csv(path, perf_analyzer.Load(concurrency=2))
    assert (found.load.describe(), found.rps) == ("concurrency 2", 4.06626)
    assert found.p95_ms == pytest.approx(543.987) and found.server_queue_ms == pytest.approx(19.862)
    closed = perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", found.load, path, 50)
    assert closed[1:7] == ["-m", "original", "-u", "127.0.0.1:8000", "-i", "http"]
    assert "--concurrency-range=2" in closed and "--measurement-interval=3000" in closed
    rate = perf_analyzer.Load(request_rate=2.5)
    assert rate.describe() == "2.5 requests/s (Poisson)"
    opened = perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", rate, path, 100)
    assert "--request-rate-range=2.5" in opened and "--request-distribution=poisson" in opened
    assert "--measurement-request-count=20" in opened  # windows of 20 answers at 2.5 requests/s (count_windows)
    assert "--async" not in opened  # perf_analyzer's default rate mode: at most --max-threads in flight
    independent = perf_analyzer.Load(request_rate=2.5, asynchronous=True)
    assert "--async" in perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", independent, path, 100)
    assert independent.describe() == "2.5 requests/s (Poisson, async)"
    with pytest.raises(ValueError, match="either"):
        perf_analyzer.Load()


# ---------------------------------------------------------------- runner helpers


def test_stack_target_reads_the_endpoint_from_stack_outputs() -> None:
    outputs = {"httpEndpoint": "http://203.0.113.7/v2/models/MODEL/infer", "lbAddress": "203.0.113.7"}
    assert runner.endpoint_from_outputs(outputs) == "203.0.113.7:80"
    with pytest.raises(runner.BenchError, match="globalLoadBalancer"):
        runner.endpoint_from_outputs({"clusters": {}})


def test_variant_selection_and_payload_copies() -> None:
    assert [v.name for v in runner.select_variants(REFERENCE_VARIANTS, ("trt_int8",))] == ["trt_int8"]
    assert len(runner.select_variants(REFERENCE_VARIANTS, ())) == 5
    with pytest.raises(runner.BenchError, match="'nope' is not deployed"):
        runner.select_variants(REFERENCE_VARIANTS, ("nope",))
    (copy,) = runner.payload_copies(REFERENCE_VARIANTS, ("original",))
    assert (copy.name, copy.input_dtype, copy.max_batch_size) == ("original_uint8", "UINT8", 64)
    model = runner.read_model(copy, None)
    assert (model.payload, model.bytes_per_request) == ("uint8", 150_528)
    served_uint8 = [copy, *REFERENCE_VARIANTS[1:]]  # a stack that already serves original_uint8 with UINT8
    (back,) = runner.payload_copies(served_uint8, ("original_uint8",))
    assert (back.name, back.input_dtype) == ("original_uint8_fp32", "FP32")
    with pytest.raises(runner.BenchError, match="--uint8: 'nope'"):
        runner.payload_copies(REFERENCE_VARIANTS, ("nope",))
    names = ["original", "original_uint8", "trt_int8", "x_uint8_fp32", "x_uint8"]
    assert payload_pairs(names) == [("original", "original_uint8"), ("x_uint8", "x_uint8_fp32")]


def test_perf_analyzer_searches_up_to_what_the_server_delivers_closed_loop(tmp_path: Path) -> None:
    plan = LoadPlan(RateLadder(2, 1.5, 0.05, 500, 0.4), 32, 6.0, 2.0, 4.0, SLO)
    config = runner.BenchConfig("dev", "sandbox", plan, repeats=1)
    rates = runner.pa_range(config, saturation_rps=40.0)
    assert (rates.low, rates.high, rates.step) == (2.0, 60.0, pytest.approx(1.0))
    assert runner.pa_range(config, None).high == 500.0 and runner.pa_range(config, 0.5).high == 4.0
    args = perf_analyzer.search_command(Path("pa"), "original", "127.0.0.1:8000", "http", rates, 100, 20, tmp_path)
    assert {"--async", "--binary-search", "--request-distribution=poisson", "--latency-threshold=100"} <= set(args)
    assert "--request-rate-range=2:60:1" in args and "--percentile=95" in args
    csv_path = tmp_path / "pa.csv"  # recorded from perf_analyzer 2.51's binary search on the slow twin (150 ms)
    csv_path.write_text(
        "Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
        "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "4,3.27739,239,2204,5603,65,44274,157,0,47458,58275,94933,108353\n"
        "17.125,15.2725,243,1480,30925,63,41965,172,0,65710,123325,143373,187673\n"
        "14.5,12.6095,265,1673,22473,63,42494,160,0,54130,106518,125075,183198\n"
    )
    found = perf_analyzer.parse_search_csv(csv_path, rates, 150)
    assert (found.max_rate, found.rps, found.p95_ms, found.levels) == (17.125, 15.2725, pytest.approx(143.373), 3)
    assert perf_analyzer.parse_search_csv(csv_path, rates, 130).max_rate == 14.5  # checked again, not trusted
    assert perf_analyzer.parse_search_csv(tmp_path / "none.csv", rates, 150).max_rate is None
    results = [rate_search(simulate(c, plan.ladder), SLO) for c in (10, 30, 20)]
    assert runner.median_repeat(results) == 2


def test_a_variant_that_cannot_be_served_is_reported_and_skipped() -> None:
    @contextlib.contextmanager
    def broken_server(_model: str) -> Iterator[runner.Endpoint]:
        raise TritonStartError("tritonserver exited with code 1 before it was ready\n(log tail)")
        yield  # a generator, as a server context is

    plan = LoadPlan(RateLadder(1, 1.5, 0.05, 10, 0.5), 1, 1.0, 0.0, 1.0, dataclasses.replace(SLO, min_requests=4))
    config = runner.BenchConfig("dev", "sandbox", plan, repeats=1)
    outcome = runner.run_all(config, [runner.read_model(REFERENCE_VARIANTS[0], None)], broken_server, lambda _: None)
    assert outcome.runs == [] and outcome.summaries == []
    assert outcome.failed == ["original: not measured: tritonserver exited with code 1 before it was ready"]


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


# ---------------------------------------------------------------- report


def recorded_run() -> BenchRun:
    criteria = dataclasses.replace(SLO, slo_ms=400)
    result = rate_search(RECORDED_ORIGINAL_CPU, criteria)  # offered 2, 2, 4, 6, 8 requests/s
    rows = [
        StepRow("original", 1, i, s.users, s.offered_rps, s.warmup, 6.0, s.requests, s.failures, s.rps, s.p50_ms,
                s.p95_ms, s.p95_ms, 1.5, s.p95_ms, 20.0, 30.0, 60.0, None, result.verdicts[i], result.best_index == i)
        for i, s in enumerate(RECORDED_ORIGINAL_CPU)
    ]  # fmt: skip
    rows[0] = dataclasses.replace(rows[0], phase="warm-up")
    rows.append(StepRow("original", 1, 5, 4, None, False, 6.0, 60, 0, 9.5, 380, 420, 400, 3.8, 390, 300, 95, 99,
                        None, "saturation (closed loop)", False, phase="saturation"))  # fmt: skip
    summary = VariantSummary(
        "original", "none", "FP32", 64, 64, 20000, 1, 602_112, 1, 1, 3.9949, 3.9949, 3.9949, 0.0, 4, 4.0, 238.7,
        257.7, 2.0, 222.2, 32.3, 31.0, 34.0, None, 7.32, 1, 4.07, 544.0, 0.98, "", 2, 7.37, 0.54, 2.6
    )  # fmt: skip
    summary = dataclasses.replace(summary, max_rps=4.0, max_rps_low=4.0, max_rps_high=4.0, pa_concurrency=None,
                                  pa_load="binary search 2-14.2 requests/s (Poisson, step 0.24)", pa_rps=4.07,
                                  pa_p95_ms=380.0, pa_max_rps=4.4, pa_ratio=4.0 / 4.07, pa_p95_ratio=None,
                                  saturation_rps=9.5, saturation_users=4, saturation_batch=3.8, raw_batch=4,
                                  raw_rps=11.0, served_raw=9.5 / 11.0)  # fmt: skip
    no_result = dataclasses.replace(summary, variant="original_uint8", input_dtype="UINT8", bytes_per_request=150_528,
                                    found=0, max_rps=None, max_rps_low=None, max_rps_high=None, spread_pct=None,
                                    pa_ratio=None, pa_max_rps=None, pa_note="no rate met the SLO")  # fmt: skip
    ladder = {f"ladder_{k}": v for k, v in dataclasses.asdict(RateLadder(2, 1.5, 0.05, 500, 0.4)).items()}
    settings = {**dataclasses.asdict(criteria), **ladder, "users": 32, "arrival": "poisson", "step_s": 6.0,
                "saturation_users": [1, 2, 4], "settle_s": 2.0, "warmup_s": 4.0, "repeats": 1,
                "protocol": "http"}  # fmt: skip
    prices = cost.pricings(load_settings("dev"))
    costs = cost.cost_rows(prices, {"original": 4.0}, {"original": 602_112}, "measured (CPU twin)")
    return BenchRun(
        command="triton-gke bench --variants original --slo-ms 400",
        stack="dev",
        target="sandbox",
        started="2026-11-29T12:51:44+00:00",
        wall_s=97.0,
        settings=settings,
        machine={"cores": 2, "cpu_model": "AMD EPYC", "load_start": [1.78, 1.9, 1.7], "load_end": [2.65, 2.1, 1.8]},
        steps=rows,
        summaries=[summary, no_result],
        costs=cost.records(costs),
        pricing=cost.records(prices),
        notes=["load at start: load average 1.78 on 2 cores"],
    )


def test_report_writes_csvs_readme_and_json_from_a_recorded_run(tmp_path: Path) -> None:
    run = recorded_run()
    written = report.write_all(run, tmp_path)
    names = {p.name for p in written}
    assert {"README.md", "results.csv", "summary.csv", "cost.csv", "results.json"} <= names
    with (tmp_path / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and rows[2]["chosen"] == "True" and rows[0]["verdict"] == WARMUP
    assert [r["phase"] for r in rows] == ["warm-up", *["search"] * 4, "saturation"]
    assert rows[0]["gpu_pct"] == ""  # None is written as an empty cell
    with (tmp_path / "summary.csv").open() as handle:
        summary = list(csv.DictReader(handle))
    assert [r["variant"] for r in summary] == ["original", "original_uint8"] and summary[0]["max_rps"] == "4.0"
    assert summary[0]["pa_max_rps"] == "4.4" and summary[0]["saturation_rps"] == "9.5"
    readme = (tmp_path / "README.md").read_text()
    assert "NOT what a T4 does" in readme and "random weights" in readme
    pa_cell = "4.1 served, 4.4 asked (p95 380 ms; Locust / PA 0.98)"
    assert f"| `original` | **4.0** | {pa_cell} | 239 | 258 | 222 (32) | 2.00 |" in readme
    assert "| 9.5 (4, 3.80) | 0.86 (raw 11.0 img/s at batch 4) |" in readme
    assert "none met the SLO" in readme and "n/a (no rate met the SLO)" in readme
    assert "open-loop poisson arrivals" in readme and "bisection" in readme
    assert "## FP32 vs UINT8 payload" in readme and "| `original_uint8` | UINT8 | 150,528 |" in readme
    assert "reference T4" in readme and "load average at start (1/5/15 min) | 1.78 / 1.90 / 1.70" in readme
    assert "Best for the SLO here: `original` at 4.0 RPS" in readme
    assert load_run(tmp_path / "results.json") == run
    assert json.loads((tmp_path / "results.json").read_text())["settings"]["slo_ms"] == 400


def test_report_draws_the_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = report.write_all(recorded_run(), tmp_path)
    for name in ("rps_vs_p95.png", "ranking.png"):
        assert tmp_path / name in written
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![ranking.png](ranking.png)" in (tmp_path / "README.md").read_text()


def test_recommendation_without_any_result_explains_the_latency_floor() -> None:
    run = recorded_run()
    nothing = dataclasses.replace(run.summaries[1], raw_batch=1, raw_rps=10.0)
    first, second = report.recommend([nothing], run.settings)
    assert first.startswith("No variant met p95 <= 400 ms, not even at the lowest rate tried (0.4 requests/s)")
    assert "one image takes 100 ms in raw ONNX Runtime (`original_uint8`) and the batcher waits up to 20 ms" in first
    assert "a floor of ~120 ms" in first and "--slo-ms 300" in second


def test_lowest_load_and_contention_are_read_from_the_steps() -> None:
    rows = recorded_run().steps
    assert report.lowest_step(rows, "original") == (pytest.approx(1.9986), pytest.approx(184.2))
    assert report.lowest_step(rows, "absent") is None
    assert report.contention_notes(rows) == []  # machine 60 % with the server at 30 %: Locust and noise
    busy = [dataclasses.replace(r, machine_cpu_pct=95.0, server_cpu_pct=15.0) for r in rows]
    (note,) = report.contention_notes(busy)
    assert "`original` (80 %)" in note


# ---------------------------------------------------------------- the real thing, briefly


def test_bad_arguments_fail_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--saturation-users", "4,2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --saturation-users: counts >= 1 must rise strictly") and err.count("\n") == 1
    assert main(["--start-rps", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --start-rps 0 / --max-rps 500: expected 0 < start <= max")
    assert main(["--variants", "trt_int4"]) == 2
    assert "'trt_int4' is not deployed" in capsys.readouterr().err


def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    """One variant: warm-up, a two-rate search, two closed-loop levels: real tritonserver, real Locust, report."""
    out = tmp_path / "out"
    args = ["--variants", "original", "--uint8", "--repeats", "1", "--start-rps", "2", "--max-rps", "4",
            "--growth", "2", "--max-users", "4", "--saturation-users", "1,2", "--step-seconds", "2",
            "--settle-seconds", "1", "--warmup-seconds", "1", "--min-requests", "4", "--slo-ms", "10000",
            "--raw-seconds", "1", "--no-perf-analyzer"]  # fmt: skip
    args += ["--build-dir", str(tmp_path / "build"), "--out", str(out)]
    assert main(args) == 0
    run = load_run(out / "results.json")
    assert [(r.phase, r.offered_rps, r.users) for r in run.steps] == [
        ("warm-up", 2.0, 4), ("search", 2.0, 4), ("search", 4.0, 4), ("saturation", None, 1), ("saturation", None, 2)
    ]  # fmt: skip
    assert all(r.requests >= 4 and r.failures == 0 and r.batch and r.server_cpu_pct for r in run.steps[1:])
    (summary,) = run.summaries
    assert summary.variant == "original" and summary.found == 1 and summary.max_rps == 4.0
    assert summary.saturation_rps and summary.saturation_users in (1, 2) and summary.pa_note.startswith("skipped")
    assert summary.raw_rps and summary.served_raw == pytest.approx(summary.saturation_rps / summary.raw_rps)
    with (out / "summary.csv").open() as handle:
        assert next(csv.DictReader(handle))["max_rps"] == "4.0"  # the column the independent check reads
    assert (out / "README.md").is_file()


def test_perf_analyzer_ratio_compares_the_throughput_it_served_not_the_rate_it_asked_for() -> None:
    """perf_analyzer asked 17.89 requests/s and served 16.51 in a recorded search; Locust found 16.88."""
    opinion = PerfAnalyzerOpinion("binary search", None, 16.51, None, 144.6, 16.88, 138.0, max_rate=17.89)
    assert opinion.ratio == pytest.approx(16.88 / 16.51)
    older = PerfAnalyzerOpinion("binary search", None, None, None, 144.6, 16.88, 138.0, max_rate=17.89)
    assert older.ratio == pytest.approx(16.88 / 17.89)  # a record without the served figure: the asked rate


@settings(max_examples=60, deadline=None)
@given(start=st.floats(0.01, 100), step_s=st.floats(0.5, 60), min_requests=st.integers(1, 1000))
def test_a_plan_whose_first_step_cannot_hold_min_requests_is_refused(
    start: float, step_s: float, min_requests: int
) -> None:
    """A step at --start-rps that cannot collect --min-requests is inconclusive, counts as failing, and the search
    only comes down to rates with fewer requests still: seen as 20 steps and no answer with --min-requests 150."""
    criteria = dataclasses.replace(SLO, min_requests=min_requests)
    try:
        plan = LoadPlan(RateLadder(start, 1.5, 0.05, max(start, 500), start / 2), 8, step_s, 1.0, 1.0, criteria)
    except PlanError as err:
        assert str(err).startswith(f"--min-requests {min_requests}: a step at --start-rps") and "\n" not in str(err)
        assert start * 4 * step_s < min_requests
    else:
        assert plan.ladder.start * plan.max_step_s >= min_requests


def test_bench_refuses_min_requests_it_cannot_collect_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--min-requests", "150"]) == 2  # default --start-rps 4, --step-seconds 6: 96 requests at most
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --min-requests 150: a step at --start-rps 4 lasts at most 24 s") and err.count("\n") == 1
    )
