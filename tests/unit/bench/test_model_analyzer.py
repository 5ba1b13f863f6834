"""bench.tuners.model_analyzer: Model Analyzer's pick read from its own output, and a model configuration mapped to the
stack's serving keys. The fixtures in fixtures/model_analyzer/ are a real run's (triton-model-analyzer 1.58.0, brute
search of the `original` CPU twin at p95 <= 100 ms, 2 cores): its inference table and the config.pbtxt of its pick
and of the default. No live test: MA's shortest useful search of the twin takes minutes, not seconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bench.tuners import model_analyzer as ma
from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS

FIXTURES = Path(__file__).parent / "fixtures" / "model_analyzer"
SUMMARY = Path("reports") / "summaries" / "original" / ma.SUMMARY_HTML
# What the real run's files say (fixtures/model_analyzer/README.md): MA's pick, its figures, the default's.
PICK_KEYS = (
    "original_config_2",
    {"modelMaxQueueDelayUs": 20000, "modelPreferredBatchSize": 1, "modelMaxBatchSize": 1, "modelInstanceCount": 2},
)
PICK_FIGURES = (2, 29.5, 82.8)  # concurrency, infer/s, p95 ms
DEFAULT_FIGURES = (1, 15.7)
MEASUREMENTS, CONFIGURATIONS = 16, 5
HEADER = (
    "Model,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,Satisfies Constraints,"
    "Throughput (infer/sec),p95 Latency (ms)\n"
)


def exported(tmp_path: Path) -> Path:
    """An export folder laid out as search() leaves it: results/, reports/summaries/<model>/ and configs/."""
    for name in (ma.INFERENCE_CSV, ma.SUMMARY_HTML):
        target = tmp_path / (SUMMARY if name == ma.SUMMARY_HTML else Path("results") / name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / name, target)
    shutil.copytree(FIXTURES / "configs", tmp_path / "configs")
    return tmp_path


def test_the_pick_of_a_real_run_is_read_as_stack_keys(tmp_path: Path) -> None:
    pick = ma.parse_results(exported(tmp_path), "original", 95, 100)
    assert (pick.config_name, pick.stack_values()) == PICK_KEYS
    assert (pick.best.concurrency, pick.best.throughput, pick.best.latency_ms[95]) == PICK_FIGURES
    assert pick.satisfies_constraints == (PICK_FIGURES[2] <= 100)
    assert (pick.measurements, pick.configurations) == (MEASUREMENTS, CONFIGURATIONS)
    assert pick.default is not None and pick.default.config_name == "original_config_default"
    assert (pick.default.concurrency, pick.default.throughput) == DEFAULT_FIGURES
    assert f"{PICK_KEYS[0]}: delay {PICK_KEYS[1]['modelMaxQueueDelayUs']} us" in pick.describe()


def test_the_table_is_not_in_mas_order_the_summary_is() -> None:
    """In the earlier run MA's inference table lists configurations that fail the constraint before its pick:
    reading its first row would pick a configuration MA rejected."""
    rows = ma.read_inference_csv(FIXTURES / "run1" / ma.INFERENCE_CSV, "original")
    assert rows[0].config_name == "original_config_3" and not rows[0].satisfies
    ranked = ma.read_summary(FIXTURES / "run1" / ma.SUMMARY_HTML)
    assert ranked == [("original_config_2", 12.6642), ("original_config_default", 11.8444)]
    shown = ma.shown_measurement(rows, *ranked[0])
    assert (shown.concurrency, shown.satisfies, shown.latency_ms[95]) == (1, True, 98.1)
    default = ma.shown_measurement(rows, *ranked[1])  # no passing measurement: MA shows its best failing one
    assert (default.concurrency, default.satisfies) == (4, False)
    assert any(r.concurrency == 0 for r in rows)  # MA's binary search below a failing concurrency 1


def test_the_default_configuration_maps_to_the_stack_defaults() -> None:
    config = ma.read_config(FIXTURES / "configs" / "original_config_default.config.pbtxt")
    assert ma.stack_keys(config) == {
        "max_queue_delay_us": 20000,  # Pulumi.yaml's defaults; MA's input twin had no preferred size: = max
        "preferred_batch_size": 64,
        "max_batch_size": 64,
        "instance_count": 1,
    }


def test_the_measurement_shown_is_found_by_throughput_passing_first() -> None:
    rows = [
        ma.Measurement("c", 1, 12.7, {95: 98.0}, True),
        ma.Measurement("c", 2, 12.7, {95: 150.0}, False),
        ma.Measurement("c", 0, 10.2, {95: 90.0}, True),  # concurrency 0: MA's binary search measures it
        ma.Measurement("d", 4, 12.66, {95: 400.0}, False),
    ]
    assert ma.shown_measurement(rows, "c", 12.6642).concurrency == 1
    assert ma.shown_measurement(rows, "c", 10.1999).concurrency == 0
    with pytest.raises(ma.ModelAnalyzerError, match="names e, which its inference table does not hold"):
        ma.shown_measurement(rows, "e", 12.7)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("Model,Batch\noriginal,1\n", "no column 'Model Config Path'"),
        (None, "no measurement of model 'trt_int8'"),  # the real table, asked for another model
        (HEADER + "original,1,two,original_config_0,1:CPU,1,Yes,5.0,90\n", "a row MA's tables never hold"),
        (
            HEADER + "original,1,1,original_config_0,1:CPU,1,Yes,nan,90\n",
            "non-finite figure in row 'original_config_0'",
        ),
        (HEADER + "original,1,-1,original_config_0,1:CPU,1,Yes,5,90\n", "negative or non-finite figure"),
    ],
)
def test_a_table_that_is_not_mas_is_one_line(tmp_path: Path, table: str | None, message: str) -> None:
    path = exported(tmp_path) / "results" / ma.INFERENCE_CSV
    if table is not None:
        path.write_text(table)
    with pytest.raises(ma.ModelAnalyzerError, match=message) as caught:
        ma.read_inference_csv(path, "original" if table is not None else "trt_int8")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ("<html><p>no table</p></html>", "no summary table"),
        ("<table><tr><th>Model Config Name</th><th>Throughput (infer/sec)</th></tr></table>", "names no configuration"),
        (
            "<table><tr><th>Model Config Name</th><th>Throughput (infer/sec)</th></tr><tr><td>x</td><td>fast</td></tr>",
            "a summary row MA never writes",
        ),
        (
            "<table><tr><th>Model Config Name</th><th>Throughput (infer/sec)</th></tr><tr><td>x</td><td>1</td></tr>",
            "MA's summary names x, which its inference table does not hold",
        ),
    ],
)
def test_a_summary_that_is_not_mas_is_one_line(tmp_path: Path, summary: str, message: str) -> None:
    (exported(tmp_path) / SUMMARY).write_text(summary)
    with pytest.raises(ma.ModelAnalyzerError, match=message) as caught:
        ma.parse_results(tmp_path, "original", 95, 100)
    assert "\n" not in str(caught.value)


def test_missing_results_or_config_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ma.ModelAnalyzerError, match=r"result_summary\.html: no such file \(MA's summary report\)"):
        ma.parse_results(tmp_path, "original", 95, 100)
    export = exported(tmp_path)
    (export / "results" / ma.INFERENCE_CSV).unlink()
    no_table = r"metrics-model-inference\.csv: no such file \(MA's inference table\)"
    with pytest.raises(ma.ModelAnalyzerError, match=no_table):
        ma.parse_results(export, "original", 95, 100)
    export = exported(tmp_path / "again")
    picked = export / "configs" / f"{PICK_KEYS[0]}.config.pbtxt"
    picked.unlink()
    with pytest.raises(ma.ModelAnalyzerError, match=f"MA's pick {PICK_KEYS[0]}: no "):
        ma.parse_results(export, "original", 95, 100)
    picked.write_text("max_batch_size: {")
    with pytest.raises(ma.ModelAnalyzerError, match="not a readable Triton model configuration"):
        ma.parse_results(export, "original", 95, 100)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"latency_ms": 99.5}, f"latency_ms: expected whole milliseconds from 1 to {MAX_SLO_LATENCY_MS}, got 99.5"),
        ({"latency_ms": 0}, "latency_ms: expected whole milliseconds"),
        ({"latency_ms": True}, "latency_ms: expected whole milliseconds"),
        ({"percentile": 50}, "percentile: MA constrains p90, p95 or p99 latency, got 50"),
        ({"variant": "../x"}, "variant '../x': expected a model folder name"),
        ({"variant": "nosuch"}, "nosuch: no config.pbtxt"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(tmp_path: Path, kwargs: dict, message: str) -> None:
    arguments = {"variant": "original", "latency_ms": 100, "percentile": 95, **kwargs}
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "config.pbtxt").write_text('name: "original"')
    with pytest.raises(ma.ModelAnalyzerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ma.check_inputs(tmp_path, arguments["variant"], arguments["latency_ms"], arguments["percentile"])


def test_search_refuses_bad_input_before_installing_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def tripwire(*_args: object) -> None:
        raise AssertionError("search() went on to install Model Analyzer")

    monkeypatch.setattr(ma, "ensure_installed", tripwire)
    (tmp_path / "repo" / "original").mkdir(parents=True)
    (tmp_path / "repo" / "original" / "config.pbtxt").write_text('name: "original"')
    with pytest.raises(ma.ModelAnalyzerError, match="latency_ms"):
        ma.search(tmp_path / "repo", latency_ms=0, out_dir=tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("someone's")
    with pytest.raises(ma.ModelAnalyzerError, match="out: not empty"):
        ma.search(tmp_path / "repo", out_dir=tmp_path / "out")


def test_an_install_with_the_same_pins_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = ma.tools_home(tmp_path)
    (home / "venv" / "bin").mkdir(parents=True)
    for name in ("model-analyzer", "python"):
        (home / "venv" / "bin" / name).write_text("#!/bin/sh\n")
    (home / "installed.txt").write_text(f"{ma.MA_REQUIREMENT} {ma._constraints_hash()}\n")
    monkeypatch.setattr(ma, "_pip_step", lambda *_args: pytest.fail("pip ran although the pins did not change"))
    assert ma.ensure_installed(tmp_path) == home / "venv" / "bin" / "model-analyzer"
    steps: list[str] = []
    monkeypatch.setattr(ma, "_pip_step", lambda _command, what: steps.append(what))
    (home / "installed.txt").write_text("triton-model-analyzer==1.57.0 0\n")  # an older install: redone
    ma.ensure_installed(tmp_path)
    assert steps == [f"pip install {ma.MA_REQUIREMENT}"]  # the venv is kept, its packages are reinstalled


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency: expected a whole number from 1 to 1024, got 0"),
        ({"max_instance_count": 2.5}, "max_instance_count: expected a whole number"),
        ({"min_model_batch_size": 8, "max_model_batch_size": 4}, "min_model_batch_size: 8 exceeds"),
        ({"budget_s": float("nan")}, "budget_s: expected seconds from 60 to 86400"),
    ],
)
def test_bad_search_limits_are_one_line(limits: dict, message: str) -> None:
    with pytest.raises(ma.ModelAnalyzerError, match=message):
        ma.SearchLimits(**limits)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-concurrency", "0"], "error: --max-concurrency: expected a whole number from 1 to 1024, got 0\n"),
        (["--max-instances", "2000"], "error: --max-instances: expected a whole number from 1 to 1024, got 2000\n"),
        (["--max-batch", "-1"], "error: --max-batch: expected a whole number from 1 to 1024, got -1\n"),
        (["--budget-minutes", "0.5"], "error: --budget-minutes 0.5: expected 1 to 1440\n"),
        (["--budget-minutes", "nan"], "error: --budget-minutes nan: expected 1 to 1440\n"),
    ],
)
def test_bad_limits_on_the_command_line_name_the_option(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ma.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == message


def test_the_profile_configuration_constrains_the_asked_percentile(tmp_path: Path) -> None:
    config = ma.profile_config(
        model="original",
        repository=tmp_path / "repo",
        workdir=tmp_path,
        out_dir=tmp_path / "out",
        latency_ms=100,
        percentile=95,
        limits=ma.SearchLimits(max_concurrency=8),
        ports=ma.Endpoints(8000, 8001, 8002),
        server={
            "binary": "ts",
            "backends": "b",
            "libraries": "l",
            "path": "p",
            "shm_prefix": "s",
            "perf_analyzer": "pa",
        },
    )
    assert config["constraints"] == {"perf_latency_p95": {"max": 100}}
    assert config["run_config_search_max_concurrency"] == 8 and config["triton_launch_mode"] == "local"
    assert config["triton_grpc_endpoint"] == "127.0.0.1:8001"  # MA's default client protocol: gRPC
    assert "perf_latency_p95" in config["inference_output_fields"]


# ---------------------------------------------------------------- the mapping's boundary

sizes = st.integers(min_value=1, max_value=ma.INT32_MAX)


@st.composite
def batching_configs(draw: st.DrawFn) -> mc.ModelConfig:
    config = mc.ModelConfig(name="m", max_batch_size=draw(sizes))
    config.dynamic_batching.max_queue_delay_microseconds = draw(st.integers(0, ma.UINT64_MAX))
    preferred = draw(st.lists(st.integers(1, config.max_batch_size), max_size=3))
    config.dynamic_batching.preferred_batch_size.extend(preferred)
    for count in draw(st.lists(st.integers(0, 64), max_size=3)):
        config.instance_group.add(count=count, kind=mc.ModelInstanceGroup.KIND_CPU)
    return config


@given(batching_configs())
def test_every_valid_configuration_maps_to_keys_the_stack_accepts(config: mc.ModelConfig) -> None:
    keys = ma.stack_keys(config)
    assert 1 <= keys["preferred_batch_size"] <= keys["max_batch_size"] == config.max_batch_size
    assert keys["max_queue_delay_us"] == config.dynamic_batching.max_queue_delay_microseconds
    expected_preferred = max(config.dynamic_batching.preferred_batch_size or [config.max_batch_size])
    assert keys["preferred_batch_size"] == expected_preferred
    assert keys["instance_count"] == (sum(g.count or 1 for g in config.instance_group) or 1)


@given(st.integers(min_value=-(2**31), max_value=0))
def test_no_batching_is_refused(max_batch_size: int) -> None:
    config = mc.ModelConfig(name="m", max_batch_size=max_batch_size)
    config.dynamic_batching.SetInParent()
    with pytest.raises(ma.ModelAnalyzerError, match="max_batch_size"):
        ma.stack_keys(config)


@given(sizes, st.integers(1, 1000))
def test_a_preferred_size_above_the_maximum_is_refused(max_batch: int, above: int) -> None:
    config = mc.ModelConfig(name="m", max_batch_size=min(max_batch, ma.INT32_MAX - above))
    config.dynamic_batching.preferred_batch_size.append(config.max_batch_size + above)
    with pytest.raises(ma.ModelAnalyzerError, match="preferred_batch_size"):
        ma.stack_keys(config)


def test_a_configuration_without_dynamic_batching_is_refused() -> None:
    with pytest.raises(ma.ModelAnalyzerError, match="no dynamic_batching"):
        ma.stack_keys(mc.ModelConfig(name="m", max_batch_size=8))


def test_a_table_with_a_huge_field_or_short_rows_is_one_line(tmp_path: Path) -> None:
    """The red team: a field past the csv module's limit, and a short row whose later cells are missing, were
    tracebacks (_csv.Error, AttributeError on None)."""
    path = tmp_path / ma.INFERENCE_CSV
    path.write_text(HEADER + "original," + "x" * 200_000 + "\n")
    with pytest.raises(ma.ModelAnalyzerError, match=r"not MA's inference table \(field larger than field limit"):
        ma.read_inference_csv(path, "original")
    path.write_text(HEADER + "original,1,2\n")
    with pytest.raises(ma.ModelAnalyzerError, match="a row MA's tables never hold"):
        ma.read_inference_csv(path, "original")
