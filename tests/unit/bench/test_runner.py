"""bench.runners.runner: endpoints, variant selection and payload copies, a variant that cannot be served."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.bench.test_slo_search import RECORDED_ORIGINAL_CPU, RECORDED_RULE, SLO
from triton_gke.bench.plans.load_plan import LoadPlan
from triton_gke.bench.plans.results import PerfAnalyzerOpinion, StepRow, payload_pairs
from triton_gke.bench.plans.slo_search import (
    RateLadder,
    rate_search,
)
from triton_gke.bench.runners import runner
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.sandbox.triton import TritonStartError

SLO_400 = dataclasses.replace(SLO, slo_ms=400, rule=RECORDED_RULE)  # RECORDED_ORIGINAL_CPU's rule


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


# ---------------------------------------------------------------- progress and the one figure (issue 24)
RECORDS = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(["warm-up", "search", "saturation"]),
        "users": st.integers(1, 1000),
        "offered_rps": st.none() | st.floats(0.1, 5000),
        "rps": st.floats(0, 5000),
        "p95_ms": st.none() | st.floats(0, 1e6),
    }
)


@given(record=RECORDS, elapsed=st.floats(0, 1e5), left=st.none() | st.floats(0, 1e5))
def test_a_progress_line_gives_rate_p95_verdict_elapsed_and_time_left(
    record: dict, elapsed: float, left: float | None
) -> None:
    line = runner.progress_line("original repeat 1/2", record, "pass", elapsed, left)
    load = f"{record['users']} users" if record["offered_rps"] is None else f"offered {record['offered_rps']:.1f} req/s"
    p95 = "n/a" if record["p95_ms"] is None else f"{record['p95_ms']:.0f} ms"
    assert line == (
        f"  original repeat 1/2 step {record['phase']}: {load}, achieved {record['rps']:.1f} req/s, p95 {p95}, pass"
        f" | elapsed {runner.clock(elapsed)}, left {'n/a' if left is None else '~' + runner.clock(left)}"
    )


@given(seconds=st.floats(0, 1e6))
def test_clock_reads_back_to_the_second(seconds: float) -> None:
    text = runner.clock(seconds)
    match = re.fullmatch(r"(?:(\d+)h(\d{2})m|(\d+)m(\d{2})s|(\d+)s)", text)
    assert match, text
    hours, h_minutes, minutes, secs, alone = (int(g) if g else 0 for g in match.groups())
    total = hours * 3600 + h_minutes * 60 + minutes * 60 + secs + alone
    assert abs(total - round(seconds)) < (60 if hours else 1)


def test_time_left_comes_from_the_ramps_finished_so_far() -> None:
    now = time.monotonic()
    progress = runner.Progress(ramps=4, typical_ramp_s=200.0, log=lambda _: None, started=now - 100)
    progress.ramp_started = now - 100
    assert progress.left_s() == pytest.approx(4 * 200.0 - 100, abs=1)  # no ramp finished: the plan's typical one
    progress.finished, progress.ramp_started = 2, now - 10  # two ramps took 90 s: 45 s each, 10 s into the third
    assert progress.left_s() == pytest.approx(2 * 45.0 - 10, abs=1)
    lines: list[str] = []
    progress.log = lines.append
    progress.step("original repeat 3/4", {"phase": "search", "users": 32, "offered_rps": 9.0, "rps": 6.66,
                                          "p95_ms": 81.2}, "pass")  # fmt: skip
    assert lines == ["  original repeat 3/4 step search: offered 9.0 req/s, achieved 6.7 req/s, p95 81 ms, pass | "
                     "elapsed 1m40s, left ~1m20s"]  # fmt: skip


def test_a_step_s_verdict_is_the_search_s() -> None:
    step = {"users": 32, "rps": 8.7, "p50_ms": 60.0, "p95_ms": 120.0, "requests": 52, "failures": 0,
            "offered_rps": 9.0, "warmup": False, "phase": "search"}  # fmt: skip
    assert runner.step_verdict(step, SLO) == "fail: p95 120 ms > 100 ms"
    assert runner.step_verdict(step | {"p95_ms": 80.0}, SLO) == "pass"
    assert runner.step_verdict(step | {"phase": "saturation"}, SLO) == "closed loop"


def test_the_summary_s_figure_is_the_achieved_rate_of_the_chosen_step() -> None:
    """What the table, the ranking plot and the records show: 3.9949 achieved, not the 4.0 offered."""
    result = rate_search(RECORDED_ORIGINAL_CPU, SLO_400)
    rows = [StepRow("original", 1, i, s.users, s.offered_rps, s.warmup, 6.0, s.requests, s.failures, s.rps, s.p50_ms,
                    s.p95_ms, s.p95_ms, 1.5, None, None, None, None, None, v, result.best_index == i)
            for i, (s, v) in enumerate(zip(RECORDED_ORIGINAL_CPU, result.verdicts, strict=True))]  # fmt: skip
    opinion = PerfAnalyzerOpinion("", None, None, None, None, None, None, "skipped")
    model = runner.read_model(REFERENCE_VARIANTS[0], None)
    summary = runner.summarise(runner.VariantRun(model, [], [result], rows, opinion, None), None)
    (chosen,) = [r for r in rows if r.chosen]
    assert summary.max_rps == chosen.rps == 3.9949 and summary.offered_rps == chosen.offered_rps == 4.0


class FakeClock:
    """A clock the test moves: Progress reads it for every start, end and line."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


SEARCH_STEP = {"phase": "search", "users": 32, "offered_rps": 9.0, "rps": 6.66, "p95_ms": 81.2}


def test_time_left_counts_server_starts_perf_analyzer_and_the_tail_not_only_the_load_windows() -> None:
    """Two variants of one ramp each, perf_analyzer on: before the first variant's perf_analyzer search has been
    timed the line says "at least"; once timed, the estimate holds each part, and the run ends when it said."""
    clock, lines = FakeClock(), []
    progress = runner.Progress(2, 100.0, lines.append, started=clock.now, ramp_started=clock.now, clock=clock,
                               ramps_per_variant=1, after_variant_s=None, tail_s=10.0)  # fmt: skip
    progress.start_variant()
    clock.now += 5  # the server starts in 5 s
    progress.start_ramp()
    clock.now += 60
    # 40 s of this ramp (the typical 100), then the second variant's start (5 s) and ramp (100), the tail (10);
    # both perf_analyzer searches are still to come and untimed: a lower bound.
    assert progress.left() == (pytest.approx(155.0), True)
    progress.step("original repeat 1/1", SEARCH_STEP, "pass")
    assert lines[-1].endswith("elapsed 1m05s, left at least 2m35s")
    clock.now += 40
    progress.end_ramp()  # the ramp took 100 s
    clock.now += 120  # perf_analyzer's search: 120 s
    progress.end_variant()
    progress.start_variant()
    clock.now += 5
    progress.start_ramp()
    clock.now += 50
    assert progress.left() == (pytest.approx(50.0 + 120.0 + 10.0), False)  # the rest of the ramp, perf, tail
    progress.step("trt_fp32 repeat 1/1", SEARCH_STEP, "pass")
    assert lines[-1].endswith("left ~3m00s")
    said = clock.now + progress.left_s()
    clock.now += 50
    progress.end_ramp()
    clock.now += 120
    progress.end_variant()
    clock.now += 10  # the tail: raw onnxruntime, the baseline after
    assert clock.now == pytest.approx(said)


def test_the_last_step_of_a_run_is_not_told_nothing_is_left() -> None:
    """The issue's run: one variant, two repeats; at its last step the old estimate said ~0s while perf_analyzer's
    search, raw onnxruntime and the baseline were still to run (two minutes)."""
    plan = LoadPlan(RateLadder(1, 1.5, 0.05, 10, 0.5), 1, 1.0, 0.0, 1.0, dataclasses.replace(SLO, min_requests=4))
    config = runner.BenchConfig(stack="dev", target="sandbox", plan=plan, repeats=2, uint8=(), raw_seconds=3.0,
                                build_dir=Path("unused"))  # fmt: skip
    tail = 3.0 + runner.RAW_LOAD_S + runner.BASELINE_AFTER_S
    for perf_analyzer, untimed in ((True, True), (False, False)):
        clock = FakeClock()
        progress = runner.run_progress(dataclasses.replace(config, perf_analyzer=perf_analyzer), 1, lambda _: None)
        progress.clock = clock
        progress.start_variant()
        for _ in range(2):
            clock.now += 2  # the server start, then nothing between the ramps
            progress.start_ramp()
            clock.now += 89  # the last step's line comes 1 s before its ramp ends
            seconds, at_least = progress.left()
            clock.now += 1
            progress.end_ramp()
        # perf_analyzer's search untimed: "at least" the tail; without it the tail is all that is left
        assert at_least is untimed and seconds == pytest.approx(tail + 1)


def test_a_failed_variant_s_ramps_are_not_counted_as_coming() -> None:
    clock = FakeClock()
    progress = runner.Progress(4, 100.0, lambda _: None, started=clock.now, ramp_started=clock.now, clock=clock,
                               ramps_per_variant=2, after_variant_s=0.0)  # fmt: skip
    progress.start_variant()
    progress.start_ramp()
    clock.now += 30
    progress.skip_variant(2)
    assert progress.left() == (pytest.approx(200.0), False)  # the second variant's two typical ramps


def test_a_ramp_longer_than_its_estimate_makes_the_time_left_a_lower_bound() -> None:
    """A loaded machine: the search came down to low rates, whose steps last longer, and the ramp outlasted the
    plan's typical one; what is left of it is unknown, so the line says "at least" the rest (was "~9s")."""
    clock = FakeClock()
    progress = runner.Progress(1, 100.0, lambda _: None, started=clock.now, ramp_started=clock.now, clock=clock,
                               ramps_per_variant=1, after_variant_s=0.0, tail_s=9.0)  # fmt: skip
    progress.start_variant()
    progress.start_ramp()
    clock.now += 60
    assert progress.left() == (pytest.approx(49.0), False)
    clock.now += 169
    assert progress.left() == (pytest.approx(9.0), True)
