"""bench.reports.report: the CSVs, README, JSON and plots from a recorded run, and `triton-gke bench report`'s bad
inputs.

Each refusal is one line, exit 2, and leaves every file as it was: report reads results.json strictly before it
renders, and renders into a temporary folder moved into place at the end. The run folders are copies of the
committed runs in results/bench/."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.unit.bench.test_slo_search import RECORDED_ORIGINAL_CPU, RECORDED_RULE, SLO
from triton_gke.bench.metrics import cost
from triton_gke.bench.plans.results import (
    BenchRun,
    StepRow,
    VariantSummary,
    load_run,
)
from triton_gke.bench.plans.slo_search import (
    WARMUP,
    RateLadder,
    rate_search,
)
from triton_gke.bench.reports import report
from triton_gke.contracts.paths import BENCH_RESULTS
from triton_gke.settings import from_stack_file as load_settings


# ---------------------------------------------------------------- report
def recorded_run() -> BenchRun:
    criteria = dataclasses.replace(SLO, slo_ms=400, rule=RECORDED_RULE)  # the rule it was recorded under
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
    summary = dataclasses.replace(summary, pa_concurrency=None,  # max_rps: the chosen step's achieved 3.9949
                                  pa_load="binary search 2-14.2 requests/s (Poisson, step 0.24)", pa_rps=4.07,
                                  pa_p95_ms=380.0, pa_max_rps=4.4, pa_ratio=3.9949 / 4.07, pa_p95_ratio=None,
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
    assert [r["variant"] for r in summary] == ["original", "original_uint8"] and summary[0]["max_rps"] == "3.9949"
    assert summary[0]["pa_max_rps"] == "4.4" and summary[0]["saturation_rps"] == "9.5"
    readme = (tmp_path / "README.md").read_text()
    assert "NOT what a T4 does" in readme and "random weights" in readme
    pa_cell = "4.1 served, 4.4 asked (p95 380 ms; Locust / PA 0.98)"
    assert f"| `original` | **4.0** (offered 4.0) | {pa_cell} | 239 | 258 | 222 (32) | 2.00 |" in readme
    assert "| 9.5 (4, 3.80) | 0.86 (raw 11.0 img/s at batch 4) |" in readme
    assert "none met the SLO" in readme and "n/a (no rate met the SLO)" in readme
    assert "open-loop poisson arrivals" in readme and "bisection" in readme
    assert "## FP32 vs UINT8 payload" in readme and "| `original_uint8` | UINT8 | 150,528 |" in readme
    assert "reference T4" in readme and "load average at start (1/5/15 min) | 1.78 / 1.90 / 1.70" in readme
    # The chosen step held 24 requests: too few to recommend anything (report.MIN_EVIDENCE), and the line says so.
    assert (
        "- Best variant: withheld: `original` rest(s) on fewer than 200 requests (evidence: `original` 24 requests"
        " in 1 chosen step(s)); rerun with more --repeats or longer --step-seconds." in readme
    )
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


RUN = PROJECT_DIR / BENCH_RESULTS / "dev-2026-11-30-alone"


RUN_JSON = json.loads((RUN / "results.json").read_text())


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _folder(tmp: Path, data: Any) -> Path:
    """A run folder of the committed run's files with `data` as its results.json."""
    out = tmp / "run"
    shutil.copytree(RUN, out)
    (out / "results.json").write_text(data if isinstance(data, str) else json.dumps(data))
    return out


def _report_refuses(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert report.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err and captured.out == ""
    assert captured.err.startswith("error: triton-gke bench report: ")
    return captured.err


# ---------------------------------------------------------------- bench.reports.report
@pytest.mark.parametrize("path", sorted((PROJECT_DIR / BENCH_RESULTS).glob("*/results.json")), ids=str)
def test_every_committed_results_json_reads_back_strictly(path: Path) -> None:
    run = report.read_run(path)
    assert json.loads(run.to_json()) == json.loads(path.read_text())


def test_a_missing_folder_or_a_file_is_refused(tmp_path: Path, capsys) -> None:
    assert "no such folder" in _report_refuses([str(tmp_path / "nope")], capsys)
    (tmp_path / "file").write_text("x")
    assert "not a folder" in _report_refuses([str(tmp_path / "file")], capsys)
    assert "results.json: no such file" in _report_refuses([str(tmp_path)], capsys)


def test_help_is_help_not_a_folder(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        report.main(["--help"])
    assert done.value.code == 0 and "results" in capsys.readouterr().out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.one_of(
        st.sampled_from(["", "[]", "{}", "null", "42", '"run"', '{"command": ', "NaN"]),
        st.text(max_size=40),
        st.dictionaries(st.sampled_from(["command", "stack", "steps", "x"]), st.integers(), max_size=3).map(json.dumps),
    )
)
def test_corrupt_or_incomplete_results_json_is_refused_and_nothing_is_rewritten(
    text: str, tmp_path_factory, capsys
) -> None:
    out = _folder(tmp_path_factory.mktemp("corrupt"), text)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"{out / 'results.json'}: " in err
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


_WHERE = st.sampled_from(["top", "steps", "summaries"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_WHERE, key=st.text(min_size=1, max_size=12))
def test_an_unknown_key_is_named(where: str, key: str, tmp_path_factory, capsys) -> None:
    data = copy.deepcopy(RUN_JSON)
    target = data if where == "top" else data[where][0]
    if key in target:
        return
    target[key] = 1
    out = _folder(tmp_path_factory.mktemp("unknown"), data)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"unknown key {key!r}"[:60].splitlines()[0] in err and _snapshot(out) == before


_WRONG = st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2), st.booleans(), st.just({"a": 1}))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["summaries", "steps"]), data=st.data())
def test_a_value_of_the_wrong_type_is_named(which: str, data: st.DataObject, tmp_path_factory, capsys) -> None:
    kind = VariantSummary if which == "summaries" else StepRow
    field = data.draw(st.sampled_from([f for f in kind.__dataclass_fields__.values() if str(f.type) != "str"]))
    value = data.draw(_WRONG.filter(lambda v: not (str(field.type) == "bool" and isinstance(v, bool))))
    changed = copy.deepcopy(RUN_JSON)
    changed[which][0][field.name] = value
    out = _folder(tmp_path_factory.mktemp("types"), changed)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"{which}[0].{field.name}: expected " in err and _snapshot(out) == before


def test_a_good_run_is_rerendered_with_the_same_tables(tmp_path: Path, capsys) -> None:
    out = _folder(tmp_path, json.dumps(RUN_JSON))
    assert report.main([str(out)]) == 0
    assert {"README.md", "summary.csv", "results.csv", "cost.csv", "results.json"} <= set(_snapshot(out))
    assert (out / "summary.csv").read_text() == (RUN / "summary.csv").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".report-")]  # the staging folder is gone


# ---------------------------------------------------------------- evidence and one figure (issue 24)
def _with_requests(run: BenchRun, requests: dict[str, int]) -> BenchRun:
    """The run with both variants found, each chosen step holding the given requests."""
    figures = {"max_rps": 6.66, "max_rps_low": 6.66, "max_rps_high": 6.66}
    uint8 = dataclasses.replace(
        run.summaries[0], variant="original_uint8", input_dtype="UINT8", bytes_per_request=150_528, **figures
    )
    steps = [*run.steps, *(dataclasses.replace(r, variant="original_uint8", rps=6.66) for r in run.steps)]
    steps = [dataclasses.replace(r, requests=requests[r.variant]) if r.chosen else r for r in steps]
    return dataclasses.replace(run, summaries=[run.summaries[0], uint8], steps=steps)


@given(fp32=st.integers(0, 2000), uint8=st.integers(0, 2000))
@settings(max_examples=40, deadline=None)
def test_a_recommendation_names_its_evidence_and_is_withheld_below_the_minimum(fp32: int, uint8: int) -> None:
    run = _with_requests(recorded_run(), {"original": fp32, "original_uint8": uint8})
    best, payload, _t4 = report.recommend(run.summaries, run.settings, run.steps)
    evidence = f"`original_uint8` {uint8:,} requests in 1 chosen step(s), `original` {fp32:,} requests in 1"
    short = [n for n, count in (("original_uint8", uint8), ("original", fp32)) if count < report.MIN_EVIDENCE]
    if short:
        assert best.startswith("Best variant: withheld: ") and payload.startswith("Payload: withheld: ")
        assert ", ".join(f"`{n}`" for n in short) in payload and evidence in payload
    else:
        assert best.startswith("Best for the SLO here: `original_uint8` at 6.7 RPS") and evidence in best
        assert payload.startswith("Payload: send UINT8") and evidence in payload


def test_the_issue_s_single_step_of_40_requests_decides_nothing() -> None:
    """The UINT8 advice of the busy run rested on one step of 40 requests (issue 24)."""
    run = _with_requests(recorded_run(), {"original": 400, "original_uint8": 40})
    lines = report.recommend(run.summaries, run.settings, run.steps)
    assert lines[1] == (
        "Payload: withheld: `original_uint8` rest(s) on fewer than 200 requests (evidence: `original_uint8` 40 "
        "requests in 1 chosen step(s), `original` 400 requests in 1 chosen step(s)); rerun with more --repeats or "
        "longer --step-seconds."
    )


def test_table_ranking_bar_and_ringed_curve_point_show_the_same_achieved_rate(tmp_path: Path) -> None:
    """The chosen step's achieved rate (6.66 offered at 9.0 in the issue) is the table's figure, the ranking bar's
    length and the x of the ringed point on the curves; the offered rate is only in brackets."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = recorded_run()
    chosen = next(r for r in run.steps if r.chosen)
    steps = [dataclasses.replace(r, rps=6.66, offered_rps=9.0) if r.chosen else r for r in run.steps]
    summary = dataclasses.replace(run.summaries[0], max_rps=6.66, max_rps_low=6.66, max_rps_high=6.66, offered_rps=9.0)
    run = dataclasses.replace(run, steps=steps, summaries=[summary])
    try:
        report._ranking(run, tmp_path / "ranking.png", plt)
        (bar,) = plt.gca().patches
        report._curves(run, tmp_path / "curves.png", plt)
        ringed = [line for line in plt.gcf().axes[0].lines if line.get_markersize() == 13]
    finally:
        plt.close("all")
    assert bar.get_width() == 6.66 and [line.get_xdata()[0] for line in ringed] == [6.66] and chosen.step == 2
    assert "| `original` | **6.7** (offered 9.0) |" in report.results_table(run.summaries, run.steps)


def test_a_noisy_run_says_so_first_and_in_the_machine_table(tmp_path: Path) -> None:
    run = recorded_run()
    reasons = ["other processes used 48 % of the machine during the run (limit 25 %)"]
    run.machine["conditions"] = {"cores": 2, "baseline_before": 248.0, "baseline_after": 160.0, "others_pct": 50.0,
                                 "others_run_pct": 48.0, "load_average": 3.1, "own_cores": 1.2, "steal_pct": 0.1,
                                 "noisy": reasons}  # fmt: skip
    report.write_all(run, tmp_path)
    readme = (tmp_path / "README.md").read_text()
    title, banner = readme.split("\n\n")[:2]
    assert title.startswith("# Benchmark: ") and banner.startswith(f"**Marked NOISY: {reasons[0]}.**")
    assert "| raw onnxruntime baseline before / after (inferences/s) | 248.0 / 160.0 (-35.5%) |" in readme
    assert "| marked noisy | " + reasons[0] + " |" in readme
    assert report.read_run(tmp_path / "results.json").machine["conditions"]["noisy"] == reasons
    run.machine["conditions"]["noisy"] = []
    report.write_all(run, tmp_path)
    assert "Marked NOISY" not in (tmp_path / "README.md").read_text()
    assert "| marked noisy | no: a quiet run |" in (tmp_path / "README.md").read_text()
