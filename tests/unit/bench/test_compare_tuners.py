"""`triton-gke bench compare-tuners` (bench/tuners/compare_tuners.py) in-process: what it reads from a tuning and a
Model Analyzer run, the order it measures in, the figures it reports, and bad input refused in one line before anything
is built. The measurement itself is the bench's (tests/live/bench) and perf_analyzer's."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.runners import perf_analyzer, runner
from triton_gke.bench.tuners import compare_tuners as ct
from triton_gke.bench.tuners import model_analyzer as ma
from triton_gke.bench.tuners import tune
from triton_gke.contracts.paths import BENCH_RESULTS

FIRST_TUNING = PROJECT_DIR / BENCH_RESULTS / "tune-dev-2026-12-02"  # before the noise rule: no "recommended"
MA_FIXTURES = Path(__file__).parent / "fixtures" / "model_analyzer"
DEFAULT = tune.Candidate(20000, 64, 64, 1)


@pytest.fixture(autouse=True)
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def tripwire(*_args: object) -> None:
        raise AssertionError("the comparison went on to build the CPU twin")

    monkeypatch.setattr(ct.runner, "build_sandbox_repository", tripwire)


def ma_run(folder: Path, search_s: float = 344.0) -> Path:
    """A Model Analyzer output folder as bench.tuners.model_analyzer.search leaves it (the real run's files)."""
    summary = folder / "reports" / "summaries" / "original" / ma.SUMMARY_HTML
    summary.parent.mkdir(parents=True)
    shutil.copyfile(MA_FIXTURES / ma.SUMMARY_HTML, summary)
    (folder / "results").mkdir()
    shutil.copyfile(MA_FIXTURES / ma.INFERENCE_CSV, folder / "results" / ma.INFERENCE_CSV)
    shutil.copytree(MA_FIXTURES / "configs", folder / "configs")
    asked = {"variant": "original", "percentile": 95, "latency_ms": 100, "search_s": search_s}
    (folder / ma.PICK_JSON).write_text(json.dumps(asked))
    return folder


def test_the_first_tuning_gives_the_default_and_its_best_as_recommended() -> None:
    entries = ct.tuner_entries(FIRST_TUNING)
    assert [e.source for e in entries] == ["default", "bench tune (recommended)", "bench tune (best measured)"]
    assert entries[0].candidate == DEFAULT and entries[0].search_s is None
    assert entries[1].candidate == entries[2].candidate == tune.Candidate(2000, 4, 8, 1)
    assert entries[1].search_s == json.loads((FIRST_TUNING / "tune.json").read_text())["wall_s"]
    merged = ct.distinct(entries)
    assert [e.source for e in merged] == ["default", "bench tune (recommended) = bench tune (best measured)"]


def test_model_analyzers_pick_keeps_the_twins_threads_and_its_search_time(tmp_path: Path) -> None:
    entry = ct.model_analyzer_entry(ma_run(tmp_path / "ma"), DEFAULT)
    assert entry.candidate == tune.Candidate(20000, 1, 1, 2) and entry.search_s == 344.0
    assert entry.source == "Model Analyzer" and "29.50 infer/s at concurrency 2" in entry.claim


def test_a_pick_json_that_is_not_one_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = ma_run(tmp_path / "ma")
    (folder / ma.PICK_JSON).write_text(json.dumps({"variant": "original", "percentile": True}))
    with pytest.raises(ma.ModelAnalyzerError, match=r"pick\.json: not a Model Analyzer run's pick\.json"):
        ma.load_pick(folder)


def test_each_round_measures_every_configuration_with_both_tools_in_turn() -> None:
    entries = [ct.Entry("default", DEFAULT, "", None), ct.Entry("x", tune.Candidate(0, 1, 1, 2), "", 1.0)]
    calls: list[tuple[str, tune.Candidate, float | None]] = []

    def ours(candidate: tune.Candidate, effort: int) -> list[float]:
        calls.append(("ours", candidate, None))
        return [] if candidate == DEFAULT and len(calls) > 2 else [10.0 * effort + len(calls)]

    def theirs(candidate: tune.Candidate, near: float | None) -> perf_analyzer.SearchResult | None:
        calls.append(("pa", candidate, near))
        rates = perf_analyzer.RateRange(1, 2, 0.1)
        return perf_analyzer.SearchResult(rates, near, near and near + 1, 50.0, 3) if near else None

    found = ct.measure_rounds(entries, 2, ours, theirs, lambda _: None)
    assert [(tool, c) for tool, c, _ in calls] == [
        ("ours", DEFAULT), ("pa", DEFAULT), ("ours", entries[1].candidate), ("pa", entries[1].candidate),
    ] * 2  # fmt: skip
    assert calls[1][2] == 11.0  # perf_analyzer searches around what our search found, in the same round
    assert found[DEFAULT] == {"ours": [11.0, None], "pa": [12.0, None]}  # a failed measurement stays a gap


def test_a_perf_analyzer_search_that_met_no_rate_counts_zero_and_a_failed_one_a_gap() -> None:
    """As our search's "none met" is 0: the first 3-round comparison left perf_analyzer's out of the median,
    which then showed 2.6 for values 3.2, none, 2.1 (median 2.1)."""
    entries = [ct.Entry("default", DEFAULT, "", None)]
    answers = iter([perf_analyzer.SearchResult(perf_analyzer.RateRange(1, 2, 0.1), None, None, None, 0), None])
    found = ct.measure_rounds(entries, 2, lambda c, e: [0.0], lambda c, near: next(answers), lambda _: None)
    assert found[DEFAULT]["pa"] == [0.0, None]


@given(
    default=st.lists(st.none() | st.floats(0.1, 100), min_size=1, max_size=4),
    other=st.lists(st.none() | st.floats(0.1, 100), min_size=1, max_size=4),
)
@settings(max_examples=100, deadline=None)
def test_the_ratio_to_the_default_is_of_medians_and_absent_without_one(
    default: list[float | None], other: list[float | None]
) -> None:
    import argparse
    import datetime
    import statistics

    from triton_gke.settings import from_stack_file

    dev = from_stack_file("dev")
    variant = tune.pick_variant(None, dev)
    entries = [ct.Entry("default", DEFAULT, "", None), ct.Entry("x", tune.Candidate(0, 1, 1, 2), "", 1.0)]
    found = {DEFAULT: {"ours": default, "pa": default}, entries[1].candidate: {"ours": other, "pa": other}}
    facts = {"conditions": {"noisy": []}}
    args = argparse.Namespace(stack="dev", rounds=len(default))
    report = ct._report(args, [], dev, variant, entries, found, facts, datetime.datetime.now(), 1.0)
    row = report["rows"][1]["ours"]
    got_default, got_other = [v for v in default if v is not None], [v for v in other if v is not None]
    if got_default and got_other:
        assert row["vs_default"] == pytest.approx(statistics.median(got_other) / statistics.median(got_default))
    else:
        assert row["vs_default"] is None
    assert ("no rate met the SLO" in ct.table(report)) == (not got_default or not got_other)


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["--rounds", "0"], "error: --rounds 0: expected 1 to 10"),
        (["--rounds", "two"], "error: argument --rounds: invalid int value: 'two'"),
        (["--tune", "/nonexistent"], "error: /nonexistent/tune.json: no such file (a tuning's tune.json)"),
        (["--stack", "../x"], "error: --stack '../x': not a Pulumi stack name"),
        (["--out", ""], "error: --out: an empty path"),
    ],
)
def test_bad_options_are_one_line_exit_2(
    argv: list[str], starts: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--tune", str(FIRST_TUNING), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main(base + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(starts) and err.count("\n") == 1, err


def test_a_tuning_of_another_stack_or_not_a_tuning_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    other = tmp_path / "tuning"
    other.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    report["default"]["max_queue_delay_us"] = 1234
    (other / "tune.json").write_text(json.dumps(report))
    args = ["--tune", str(other), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main(args) == 2
    assert "its default is not stack 'dev''s original" in capsys.readouterr().err
    report["default"]["max_queue_delay_us"] = True
    (other / "tune.json").write_text(json.dumps(report))
    assert ct.main(args) == 2
    assert "default: a configuration's values are whole numbers" in capsys.readouterr().err


def test_a_configuration_the_stack_refuses_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tune.json is a file anyone can edit (the red team: preferred 128 over max 8 crashed minutes into a run)."""
    edited = tmp_path / "tuning"
    edited.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    report["best"]["preferred_batch_size"] = 128
    (edited / "tune.json").write_text(json.dumps(report))
    args = ["--tune", str(edited), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bench tune (recommended) = bench tune (best measured)'s configuration: the stack ")
    assert "modelPreferredBatchSize" in err and err.count("\n") == 1, err
    assert ct.main([*args[:-2], "--out", str(tmp_path / "o2"), "--stack", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --stack 'nosuch': Pulumi.nosuch.yaml: no such stack file") and err.count("\n") == 1


def test_model_analyzer_refuses_an_out_that_is_a_file_or_holds_files_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    assert ma.main(["--out", str(tmp_path / "file")]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert ma.main(["--out", str(tmp_path / "full")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {tmp_path / 'full'}: not empty") and err.count("\n") == 1
    assert ma.main(["--stack", "nosuch", "--out", str(tmp_path / "new")]) == 2
    assert capsys.readouterr().err.startswith("error: --stack 'nosuch': Pulumi.nosuch.yaml: no such stack file")
    with pytest.raises(AssertionError, match="went on to build the CPU twin"):  # a new --out passes the checks
        ma.main(["--out", str(tmp_path / "new")])


@pytest.mark.parametrize(
    ("tool", "field", "value", "names"),
    [
        ("tune", "variant", "trt_fp16", "searched 'trt_fp16' at p95 <= 100 ms"),
        ("tune", "slo_ms", 250, "searched 'original' at p95 <= 250 ms"),
        ("ma", "latency_ms", 80, "searched 'original' at p95 <= 80 ms"),
        ("ma", "percentile", 99, "searched 'original' at p99 <= 100 ms"),
    ],
)
def test_a_pick_for_another_variant_or_slo_is_refused_before_anything_is_built(
    tool: str, field: str, value: object, names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each tool's pick must answer this comparison's question (the red team: a tuning at 250 ms was measured at
    dev's 100 ms without a word). The error names the option and file."""
    tuning, ma_folder = tmp_path / "tuning", ma_run(tmp_path / "ma")
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    if tool == "tune":
        report[field] = value
    (tuning / "tune.json").write_text(json.dumps(report))
    if tool == "ma":
        asked = json.loads((ma_folder / ma.PICK_JSON).read_text())
        (ma_folder / ma.PICK_JSON).write_text(json.dumps(asked | {field: value}))
    args = ["--tune", str(tuning), "--model-analyzer", str(ma_folder), "--out", str(tmp_path / "o")]
    assert ct.main(args) == 2
    err = capsys.readouterr().err
    where = f"--tune {tuning / 'tune.json'}" if tool == "tune" else f"--model-analyzer {ma_folder / ma.PICK_JSON}"
    assert err.startswith(f"error: {where}: {names}; this comparison measures 'original' at p95 <= 100 ms"), err
    assert err.count("\n") == 1


@given(variant=st.text(min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_a_pick_json_variant_that_is_not_a_model_name_is_refused_in_one_line(variant: str) -> None:
    """pick.json's variant names MA's folders under its run: a path or `..` would read outside it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = ma_run(Path(tmp) / "ma")
        (folder / ma.PICK_JSON).write_text(json.dumps({"variant": variant, "percentile": 95, "latency_ms": 100,
                                                       "search_s": 1.0}))  # fmt: skip
        if ma.MODEL_NAME_RE.fullmatch(variant):
            return  # a model name: read as MA's files say (the fixture's are original's)
        with pytest.raises(ma.ModelAnalyzerError) as refused:
            ma.load_pick(folder)
        message = str(refused.value)
        assert "is not a model name" in message and "\n" not in message and ma.PICK_JSON in message


def test_an_out_folder_of_other_files_is_refused_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The red team: `--out` pointed at the tuning's own folder replaced its README.md."""
    tuning = tmp_path / "tuning"
    shutil.copytree(FIRST_TUNING, tuning)
    before = (tuning / "README.md").read_bytes()
    assert ct.main(["--tune", str(tuning), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tuning)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {tuning}: not empty (it holds 'README.md' and ") and err.count("\n") == 1
    assert err.endswith("; the comparison writes into a new or empty folder: give another --out or remove this one\n")
    assert (tuning / "README.md").read_bytes() == before
    earlier = tmp_path / "earlier"  # nor over an earlier comparison (the default folder is dated by day)
    earlier.mkdir()
    (earlier / "comparison.json").write_text("{}")
    assert ct.main(["--tune", str(tuning), "--model-analyzer", str(tmp_path / "ma"), "--out", str(earlier)]) == 2
    assert "not empty (it holds 'comparison.json': an earlier or interrupted run's?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("part", "field", "value", "says"),
    [
        ("default", "median", "7.5", "a median is a number of requests/s, got '7.5'"),
        ("best", "median", [1], "a median is a number of requests/s, got [1]"),
        ("best", "median", True, "a median is a number of requests/s, got True"),
        ("best", "intra_op_threads", -1, ": intra_op_threads -1: expected 0 to 1024"),
        ("best", "intra_op_threads", 10**18, ": intra_op_threads 1000000000000000000: expected 0 to 1024"),
    ],
)
def test_a_tune_json_with_a_bad_figure_or_thread_count_is_one_line_before_anything_is_built(
    part: str, field: str, value: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The red team: a median as text was a traceback at the end of the checks; -1 or 10^18 threads passed every
    check and failed the twin's load mid-run (it takes 0-1024)."""
    tuning = tmp_path / "tuning"
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    report[part][field] = value
    (tuning / "tune.json").write_text(json.dumps(report))
    args = ["--tune", str(tuning), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tuning / 'tune.json'}") and says in err and err.count("\n") == 1, err


def test_a_model_analyzer_pick_named_like_a_path_is_refused(tmp_path: Path) -> None:
    """MA's summary names the configuration whose file under configs/ is read: `..` would read outside the run."""
    folder = ma_run(tmp_path / "ma")
    summary = folder / "reports" / "summaries" / "original" / ma.SUMMARY_HTML
    (tmp_path / "outside.config.pbtxt").write_text((folder / "configs" / "original_config_2.config.pbtxt").read_text())
    summary.write_text(summary.read_text().replace("original_config_2", "../../outside"))
    with pytest.raises(ma.ModelAnalyzerError, match=r"the pick '\.\./\.\./outside' is not a configuration name"):
        ma.load_pick(folder)


SECONDS_THAT_ARE_NOT = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, -1, -1e-9, True, "344", None, [1]]),
    st.floats(max_value=-1e-300),
    st.integers(max_value=-1),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=SECONDS_THAT_ARE_NOT)
def test_a_search_time_that_is_not_seconds_is_refused_in_one_line(value: object, tmp_path_factory) -> None:
    """The red team: an inf wall_s or search_s showed as "inf min" beside the other tool's time."""
    folder = tmp_path_factory.mktemp("t")
    tuning = folder / "tuning"
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    report["wall_s"] = value
    (tuning / "tune.json").write_text(json.dumps(report))
    with pytest.raises(runner.BenchError) as refused:
        ct.tuner_entries(tuning)
    message = str(refused.value)  # inf and NaN are not JSON: the bounded reader refuses them first
    assert "\n" not in message and (
        "tune.json: wall_s is the tuning's seconds, got " in message
        or ("tune.json: " in message and "not a finite number" in message)
    )
    ma_folder = ma_run(folder / "ma")
    asked = json.loads((ma_folder / ma.PICK_JSON).read_text())
    (ma_folder / ma.PICK_JSON).write_text(json.dumps({**asked, "search_s": value}))
    with pytest.raises(ma.ModelAnalyzerError) as refused_ma:
        ma.load_pick(ma_folder)
    assert ma.PICK_JSON in str(refused_ma.value) and "\n" not in str(refused_ma.value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.floats(min_value=0, max_value=1e9) | st.integers(min_value=0, max_value=10**9))
def test_any_finite_search_time_is_read(value: float, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("t")
    ma_folder = ma_run(folder / "ma", search_s=value)
    assert ma.load_pick(ma_folder).search_s == float(value)
    tuning = folder / "tuning"
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    (tuning / "tune.json").write_text(json.dumps({**report, "wall_s": value}))
    assert ct.tuner_entries(tuning)[1].search_s == value


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--start-rps", "600"], "error: --start-rps 600 / --max-rps 500: expected start <= max"),
        (["--build-dir", "/proc/x"], "error: --build-dir /proc/x: "),
    ],
)
def test_a_search_option_the_run_could_not_honour_is_refused_before_anything_is_measured(
    extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The red team: --start-rps above --max-rps started measuring; an unwritable --build-dir was an OSError line
    naming neither the option nor why."""
    args = ["--tune", str(FIRST_TUNING), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("option", ["--tune", "--model-analyzer"])
def test_an_empty_folder_option_is_refused_naming_it(option: str, tmp_path: Path, capsys) -> None:
    """The red team: `--tune ""` read the current folder's tune.json and named only 'tune.json'."""
    given = {"--tune": str(FIRST_TUNING), "--model-analyzer": str(ma_run(tmp_path / "ma"))} | {option: ""}
    args = [word for pair in given.items() for word in pair]
    assert ct.main([*args, "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"error: {option}: an empty path (it would mean the current folder)\n"


def test_a_tunings_client_side_pick_is_compared_with_its_protocol_and_payload(tmp_path: Path) -> None:
    """Issue 35: what Model Analyzer cannot search (gRPC, the UINT8 copy) is measured as the tuner picked it, and a
    screen's figures are named as predictions, not open-loop searches."""
    tuning = tmp_path / "tuning"
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    report["search"] = "screen"
    report["recommended"] = {**report["best"], "protocol": "grpc", "other_payload": True}
    (tuning / "tune.json").write_text(json.dumps(report))
    _, recommended, best = ct.tuner_entries(tuning)
    assert (recommended.candidate.protocol, recommended.candidate.other_payload) == ("grpc", True)
    assert (best.candidate.protocol, best.candidate.other_payload) == ("http", False)  # an older report's fields
    assert recommended.claim.endswith("closed-loop measurements") and "predicted (M/D/c)" in recommended.claim


@pytest.mark.parametrize(
    ("where", "field", "value", "says"),
    [
        ("best", "protocol", "udp", ": protocol 'udp': expected 'http' or 'grpc'"),
        ("best", "protocol", ["grpc"], ": protocol ['grpc']: expected 'http' or 'grpc'"),
        ("best", "protocol", None, ": protocol None: expected 'http' or 'grpc'"),
        ("best", "other_payload", "yes", ": other_payload 'yes': expected true or false"),
        ("best", "other_payload", 1, ": other_payload 1: expected true or false"),
        (None, "search", 5, "search 5: expected 'open-loop' or 'screen'"),
        (None, "search", ["screen"], "search ['screen']: expected 'open-loop' or 'screen'"),
    ],
)
def test_a_client_side_field_or_search_that_is_not_one_is_refused_naming_it(
    where: str | None, field: str, value: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The red team: every bad value gave one line about the protocol, whichever field it was, without the value;
    a search of 5 was read as an open-loop tuning and measured."""
    tuning = tmp_path / "tuning"
    tuning.mkdir()
    report = json.loads((FIRST_TUNING / "tune.json").read_text())
    (report[where] if where else report)[field] = value
    (tuning / "tune.json").write_text(json.dumps(report))
    args = ["--tune", str(tuning), "--model-analyzer", str(ma_run(tmp_path / "ma")), "--out", str(tmp_path / "o")]
    assert ct.main(args) == 2
    err = capsys.readouterr().err
    assert says in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_the_readme_states_whether_each_difference_is_more_than_noise() -> None:
    """Issue 35: the significance of each difference: our pick over Model Analyzer's and each over the default, per
    load tool, with the exact one-sided p; a failed round (None) is left out, a round that met no rate counts."""

    def row(source: str, ours: list[float | None], pa: list[float | None]) -> dict:
        return {"source": source, "ours": {"values": ours}, "pa": {"values": pa}}

    report = {
        "rows": [
            row("default", [1.0, 2.0, 0.0], [1.0, 1.0, 1.0]),
            row("bench tune (recommended)", [5.0, 6.0, 7.0], [3.0, None, 4.0]),
            row("Model Analyzer", [4.0, 8.0, 3.0], [2.0, 2.5, 1.5]),
        ]
    }
    lines = ct.significance(report).splitlines()
    assert "| bench tune's pick over Model Analyzer's | Locust | 6 of 9 | 0.35 |" in lines
    assert "| bench tune's pick over Model Analyzer's | perf_analyzer --async | 6 of 6 | 0.10 |" in lines
    assert "| bench tune's pick over the default | Locust | 9 of 9 | 0.05 |" in lines
    assert "| Model Analyzer's pick over the default | perf_analyzer --async | 9 of 9 | 0.05 |" in lines


def test_a_pick_proposed_by_several_is_tested_once_under_each_name() -> None:
    """The red team: a tuning that kept the default merges into "default = bench tune (recommended)", and its test
    against Model Analyzer's pick vanished; a pick both tools proposed is said to be one configuration."""

    def row(source: str, ours: list[float], pa: list[float]) -> dict:
        return {"source": source, "ours": {"values": ours}, "pa": {"values": pa}}

    kept = {"rows": [row("default = bench tune (recommended)", [1.0, 2.0], [1.0]), row("Model Analyzer", [3.0], [2.0])]}
    lines = ct.significance(kept).splitlines()
    assert "| bench tune's pick over Model Analyzer's | Locust | 0 of 2 | 1.00 |" in lines
    assert "| bench tune's pick is the default (the same configuration) | both | - | - |" in lines
    same = {"rows": [row("default", [1.0], [1.0]), row("bench tune (recommended) = Model Analyzer", [3.0], [2.0])]}
    assert "| bench tune's pick is Model Analyzer's (the same configuration) | both | - | - |" in ct.significance(same)


def test_rounds_visit_the_configurations_in_an_order_drawn_from_the_seed() -> None:
    """Issue 46: rounds in a random order, the same for the same seed, recorded; None keeps the listed order."""
    entries = [ct.Entry(f"c{i}", tune.Candidate(0, 1, 1, i + 1), "", None) for i in range(4)]

    def visits(seed: int | None) -> tuple[list[str], list[list[str]]]:
        seen: list[str] = []
        orders: list[list[str]] = []
        ct.measure_rounds(entries, 6, lambda c, e: seen.append(f"c{c.instance_count - 1}") or [1.0],
                          lambda c, near: None, lambda _: None, seed, orders)  # fmt: skip
        return seen, orders

    seen, orders = visits(7)
    assert [name for order in orders for name in order] == seen  # what ran is what was recorded
    assert visits(7) == (seen, orders) and visits(8)[1] != orders
    assert len({tuple(o) for o in orders}) > 1 and all(sorted(o) == ["c0", "c1", "c2", "c3"] for o in orders)
    assert visits(None)[1] == [["c0", "c1", "c2", "c3"]] * 6
