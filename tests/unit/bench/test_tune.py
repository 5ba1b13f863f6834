"""`triton-gke bench tune` (bench/tuners/tune.py) in-process: bad options refused in one line before anything starts;
the
candidates and the printed `pulumi config set` lines are ones the stack accepts; --write-stack's edit keeps the
stack file's comments. tests/live/bench/test_tune.py runs a short real tuning."""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import triton_gke.bench.tuners.tune as tune
from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.tuners import tune_search
from triton_gke.bench.tuners.tune_search import complete
from triton_gke.cli.main import main as cli_main
from triton_gke.settings import ConfigError, from_stack_file, load_stack_settings
from triton_gke.settings.schema import config_schema
from triton_gke.settings.stack import stack_config

PROJECT = config_schema()[0]


@pytest.fixture(autouse=True)
def no_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is built or started: the build of the twin is a tripwire."""

    def tripwire(*_args: object) -> None:
        raise AssertionError("the tuner went on to build the CPU twin")

    monkeypatch.setattr(tune.runner, "build_sandbox_repository", tripwire)


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["--variant", "trt_int4"], "error: --variant 'trt_int4': not deployed by the stack (deployed: original"),
        (["--budget-minutes", "0"], "error: --budget-minutes 0: expected minutes from 1 to 600"),
        (["--budget-minutes", "-5"], "error: --budget-minutes -5: expected minutes from 1 to 600"),
        (["--budget-minutes", "nan"], "error: --budget-minutes nan: expected minutes from 1 to 600"),
        (["--budget-minutes", "100000"], "error: --budget-minutes 100000: expected minutes from 1 to 600"),
        (["--budget-minutes", "ten"], "error: argument --budget-minutes: invalid float value: 'ten'"),
        (["--max-candidates", "2.5"], "error: argument --max-candidates: invalid int value: '2.5'"),
        (["--max-candidates", "0"], "error: --max-candidates 0: expected 1 to 64"),
        (["--budget-minutes", "1"], "error: --budget-minutes 1: too short for one rate search"),
        (["--stack", "../x"], "error: --stack '../x': not a Pulumi stack name"),
        (["--stack", "nosuch"], "error: --stack 'nosuch': Pulumi.nosuch.yaml: no such stack file"),
        (["--min-requests", "500"], "error: --min-requests 500: a step at --start-rps 8 lasts at most 16 s"),
        (["--frobnicate"], "error: unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_options_are_one_line_exit_2(argv: list[str], starts: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert tune.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(starts) and err.count("\n") == 1, err


def test_the_console_script_runs_it_as_a_bench_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "tune", "--variant", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --variant 'nope': not deployed")
    with pytest.raises(SystemExit) as exit_:
        cli_main(["bench", "tune", "--help"])
    assert exit_.value.code == 0 and "--budget-minutes" in capsys.readouterr().out


@given(minutes=st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=80, deadline=None)
def test_any_budget_is_refused_in_one_line_or_accepted(minutes: float) -> None:
    args = tune.parser().parse_args([f"--budget-minutes={minutes!r}"])
    low, high = tune.BUDGET_RANGE
    if low <= minutes <= high:
        tune.check_args(args)
    else:
        with pytest.raises(tune.runner.BenchError, match=r"^--budget-minutes [^\n]*: expected minutes from 1 to 600$"):
            tune.check_args(args)


def test_the_search_is_sized_from_the_measured_time_of_the_defaults_search() -> None:
    """The first real run budgeted ~72 s a search and paid for 6 of the 10 it planned: a search there took ~2.3 min.
    Sized from that measured time, 20 minutes pay for 8 searches: 3 configurations, each finalist searched 3 times."""
    grid = tune.candidate_grid(dev_default(), 100.0, 46)
    units, candidates, rungs = tune.sized_search(grid, 20 * 60, 138.0, None)
    assert units == 8 and candidates == grid[:3] and complete(rungs)
    assert sum(r.cost for r in rungs) <= units
    assert len(tune.sized_search(grid, 20 * 60, 30.0, None)[1]) > 3  # a faster machine: more configurations
    assert tune.sized_search(grid, 20 * 60, 30.0, 2)[1] == grid[:2]  # --max-candidates
    assert tune.sized_search(grid, 60, 600.0, None)[:2] == (2, grid[:2])  # always the default and one other


@pytest.mark.parametrize("units", [2, 4])
def test_the_budgets_end_cuts_no_search_before_the_default_was_compared_with_one_other(units: int) -> None:
    """The default's search outlasted the whole budget (a one-minute budget on busy cores: 111 s). The other
    configuration of the first rung is still searched, as the sizing paid for; later searches stop at the deadline."""
    grid = tune.candidate_grid(dev_default(), 100.0, 46)
    default, other = grid[:2]
    searched, measured = {default}, []

    def measure(candidate: tune.Candidate, effort: int) -> list[float]:
        searched.add(candidate)
        measured.append(candidate)
        return [5.0] * effort

    stop = tune.budget_stop(time.monotonic() - 1, searched)  # the deadline has passed
    assert not stop()
    outcome = tune_search.successive_halving(
        [default, other], measure, units, default, stop=stop, measured={default: [4.0]}
    )
    # Two searches each in the first rung when paid (4 units): the other's two first, the default's second cut.
    assert measured == [other] and outcome.scores == {default: [4.0], other: [5.0] * (units // 2)}
    assert outcome.stopped_early == (units > 2)  # 4 units plan a second rung of both: the deadline cuts it
    assert not tune.budget_stop(time.monotonic() + 3600, searched)()  # before the deadline nothing stops


@given(budget_s=st.floats(60, 36_000), search_s=st.floats(0, 36_000), cap=st.none() | st.integers(1, 64))
@settings(max_examples=200, deadline=None)
def test_a_sized_search_never_plans_more_than_its_budget_pays_for(
    budget_s: float, search_s: float, cap: int | None
) -> None:
    grid = tune.candidate_grid(dev_default(), 100.0, 46)
    units, candidates, rungs = tune.sized_search(grid, budget_s, search_s, cap)
    assert units == 2 or units * max(search_s, 1.0) <= budget_s
    assert 1 <= len(candidates) <= min(len(grid), cap or 64) and candidates == grid[: len(candidates)]
    assert sum(r.cost for r in rungs) <= units and rungs[0].candidates == len(candidates)


# ---------------------------------------------------------------- candidates and the stack's rules


def dev_default() -> tune.Candidate:
    settings_ = from_stack_file("dev")
    return tune.Candidate.of(tune.pick_variant(None, settings_))


def test_the_default_is_the_stacks_capacity_variant_and_comes_first() -> None:
    settings_ = from_stack_file("dev")
    assert tune.pick_variant(None, settings_).name == settings_.capacity.variant == "original"
    grid = tune.candidate_grid(dev_default(), 100.0, 46)
    assert grid[0] == dev_default() == tune.Candidate(20000, 64, 64, 1)
    assert len(set(grid)) == len(grid)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_accepted_candidates_pulumi_lines_pass_the_stack_checks(stack: str) -> None:
    """Each line printed is `pulumi config set KEY VALUE -s STACK`; the stack file with those values loads."""
    name = tune.pick_variant(None, from_stack_file(stack)).name
    default = tune.Candidate.of(tune.pick_variant(None, from_stack_file(stack)))
    for candidate in tune.accepted(tune.candidate_grid(default, 100.0, 46), stack, lambda _: None):
        config = stack_config(stack)
        for line in tune.pulumi_lines(candidate, default, PROJECT, stack):
            words = shlex.split(line)
            assert words[:3] == ["pulumi", "config", "set"] and words[-2:] == ["-s", stack]
            config[words[3]] = words[4]
        loaded = load_stack_settings(config, stack=stack)
        variant = next(v for v in loaded.model_repo.variants if v.name == name)
        client_side = {"intra_op_threads": None, "protocol": "http", "other_payload": False}
        assert tune.Candidate.of(variant) == dataclasses.replace(candidate, **client_side)


def test_the_grid_covers_model_analyzers_space_and_the_client_side_it_cannot_search() -> None:
    """Issue 35: instances, batching on and off, batch sizes and the queue delay (Model Analyzer's space), and the
    client's protocol and payload (not Model Analyzer's); the client's choices print as lines of their own."""
    grid = tune.candidate_grid(dev_default(), 100.0, 46)
    off = [c for c in grid if c.max_batch_size == 1]
    assert {c.instance_count for c in off} == {1, 2} and {c.protocol for c in off} == {"http", "grpc"}
    assert any(c.other_payload for c in off) and len({c.max_queue_delay_us for c in grid}) >= 4
    grpc = next(c for c in grid if c.protocol == "grpc")
    uint8 = next(c for c in grid if c.other_payload)
    variant = tune.pick_variant(None, from_stack_file("dev"))
    assert grpc.label().endswith(", over gRPC") and uint8.label().endswith(", other payload")
    assert grpc.client_lines(variant) == ["clients: send over gRPC (Triton's port 8001) instead of HTTP"]
    assert uint8.client_lines(variant)[0].startswith("clients: send UINT8 images")
    assert dev_default().client_lines(variant) == []
    assert tune.pulumi_lines(grpc, dev_default(), PROJECT, "dev") == tune.pulumi_lines(
        dataclasses.replace(grpc, protocol="http"), dev_default(), PROJECT, "dev"
    )  # no stack key for the client's protocol


def test_a_candidate_breaking_the_slo_order_is_skipped_with_the_stacks_reason() -> None:
    too_long = dataclasses.replace(dev_default(), max_queue_delay_us=30000)  # = autoscaleQueueTimeMs on dev
    bad_batch = dataclasses.replace(dev_default(), preferred_batch_size=128)  # above max batch 64
    logged: list[str] = []
    assert tune.accepted([dev_default(), too_long, bad_batch], "dev", logged.append) == [dev_default()]
    assert "modelMaxQueueDelayUs: 30000 us is not below" in logged[0]
    assert "modelPreferredBatchSize" in logged[1]


# ---------------------------------------------------------------- --write-stack


DEV_TEXT = (PROJECT_DIR / "Pulumi.dev.yaml").read_text(encoding="utf-8")


def test_setting_keys_keeps_every_comment_and_line() -> None:
    winner = tune.Candidate(5000, 8, 16, 2)
    edited = tune.set_stack_keys(DEV_TEXT, PROJECT, winner.stack_values())
    assert edited.startswith(DEV_TEXT)  # the keys are new in dev: added at the end of the config block
    assert edited[len(DEV_TEXT) :].splitlines() == [f"  {PROJECT}:{k}: {v}" for k, v in winner.stack_values().items()]
    again = tune.set_stack_keys(edited.replace(": 5000", ": 7000  # tuned"), PROJECT, {"modelMaxQueueDelayUs": 3000})
    assert f"  {PROJECT}:modelMaxQueueDelayUs: 3000  # tuned\n" in again  # an existing key: value changed, comment kept
    assert again.count("modelMaxQueueDelayUs") == 1


def test_a_key_is_added_inside_the_config_block_not_after_a_later_top_level_key() -> None:
    text = "# head\nconfig:\n    a:b: 1\n    a:list:\n      - x\n# between\nother: 2\n"
    assert tune.set_stack_keys(text, "a", {"k": 5}) == (
        "# head\nconfig:\n    a:b: 1\n    a:list:\n      - x\n    a:k: 5\n# between\nother: 2\n"
    )


@given(values=st.fixed_dictionaries({k: st.integers(0, 10**9) for k in tune.STACK_KEYS}))
@settings(max_examples=50, deadline=None)
def test_any_values_round_trip_through_the_strict_stack_reader(
    values: dict[str, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from triton_gke.settings.stack_file import read_stack_file

    path = tmp_path_factory.mktemp("stack") / "Pulumi.dev.yaml"
    path.write_text(tune.set_stack_keys(DEV_TEXT, PROJECT, values), encoding="utf-8")
    types = {f"{PROJECT}:{key}": spec.type for key, spec in config_schema()[1].items()}
    read = read_stack_file(path, PROJECT, types)
    assert {k: read[f"{PROJECT}:{k}"] for k in values} == {k: str(v) for k, v in values.items()}
    assert path.read_text(encoding="utf-8").startswith(DEV_TEXT)


def test_write_stack_refuses_an_edit_the_stack_refuses_and_leaves_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV_TEXT, encoding="utf-8")
    monkeypatch.setattr("triton_gke.contracts.paths.project_dir", lambda: tmp_path)
    default = tune.Candidate(20000, 64, 64, 1)
    with pytest.raises(ConfigError, match="modelMaxQueueDelayUs"):
        tune.write_stack("dev", tune.Candidate(40000, 64, 64, 1), default)
    assert (tmp_path / "Pulumi.dev.yaml").read_text(encoding="utf-8") == DEV_TEXT
    assert [p.name for p in tmp_path.iterdir()] == ["Pulumi.dev.yaml"]  # no temporary file left
    path = tune.write_stack("dev", tune.Candidate(5000, 8, 16, 2), default)
    assert from_stack_file("dev", config_file=path).model_repo.variants[0].max_queue_delay_us == 5000
    assert path.read_text(encoding="utf-8").startswith(DEV_TEXT)


def test_write_stack_sets_only_the_changed_keys_in_a_linked_file_and_keeps_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the red team: a linked stack file became a plain copy (its target unchanged), its mode became 0600,
    and keys equal to the project's defaults were pinned into it."""
    real = tmp_path / "stacks" / "Pulumi.dev.yaml"
    real.parent.mkdir()
    real.write_text(DEV_TEXT, encoding="utf-8")
    real.chmod(0o644)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "Pulumi.dev.yaml").symlink_to(real)
    monkeypatch.setattr("triton_gke.contracts.paths.project_dir", lambda: tmp_path / "project")
    tune.write_stack("dev", tune.Candidate(5000, 64, 64, 1), tune.Candidate(20000, 64, 64, 1))
    assert (tmp_path / "project" / "Pulumi.dev.yaml").is_symlink() and (real.stat().st_mode & 0o777) == 0o644
    added = real.read_text(encoding="utf-8")[len(DEV_TEXT) :]
    assert "modelMaxQueueDelayUs: 5000" in added and "BatchSize" not in added and "InstanceCount" not in added


@pytest.mark.parametrize(
    ("words", "fragment"),
    [
        (["--out", ""], "--out: an empty path"),
        (["--build-dir", " "], "--build-dir: an empty path"),
        (["--min-requests", "0"], "--min-requests 0: expected at least 1"),
        (["--variant", "trt_int8_bs16_count4"], "--variant trt_int8_bs16_count4: its batch and instances come from"),
    ],
)
def test_options_the_red_team_found_are_refused_in_one_line(
    words: list[str], fragment: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tune.runner, "build_sandbox_repository", _never_built)
    assert tune.main(words) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err


def test_out_holding_someone_elses_files_is_refused_and_an_earlier_tuning_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tune.runner, "build_sandbox_repository", _never_built)
    (tmp_path / "README.md").write_text("mine\n")
    assert tune.main(["--out", str(tmp_path)]) == 2
    assert "holding other files than a tuning's" in capsys.readouterr().err
    assert (tmp_path / "README.md").read_text() == "mine\n"
    (tmp_path / "tune.json").write_text("{}\n")
    tune.check_out_folder(tmp_path)  # an earlier tuning's folder: replaced


def _never_built(*args: object, **kwargs: object) -> None:
    raise AssertionError("the twin was built although the options were refused")


# ---------------------------------------------------------------- the twin of a candidate

TWIN_CONFIG = """name: "original"
backend: "python"
max_batch_size: 64
input { name: "input" data_type: TYPE_FP32 dims: [3, 4] }
output { name: "probabilities" data_type: TYPE_FP32 dims: [2] }
instance_group { count: 1 kind: KIND_CPU }
dynamic_batching { preferred_batch_size: 64 max_queue_delay_microseconds: 20000 }
model_warmup {
  name: "warmup_batch1" batch_size: 1
  inputs { key: "input" value: { data_type: TYPE_FP32 dims: [3, 4] zero_data: true } }
}
"""


def test_a_candidates_twin_is_the_built_twin_with_its_batching_instances_and_threads(tmp_path: Path) -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    base = tmp_path / "built" / "original"
    (base / "1").mkdir(parents=True)
    (base / "1" / "model.onnx").write_bytes(b"onnx")
    (base / "1" / "model.py").write_text("# the twin's model.py\n")
    (base / "config.pbtxt").write_text(TWIN_CONFIG)
    folder = tune.twin_folder(base, tune.Candidate(5000, 4, 8, 2, intra_op_threads=1), tmp_path / "c0")
    config = text_format.Parse((folder / "config.pbtxt").read_text(), mc.ModelConfig())
    assert (config.max_batch_size, list(config.dynamic_batching.preferred_batch_size)) == (8, [4])
    assert config.dynamic_batching.max_queue_delay_microseconds == 5000 and config.instance_group[0].count == 2
    assert config.parameters[tune.INTRA_PARAMETER].string_value == "1"
    assert (folder / "1" / "model.onnx").stat().st_ino == (base / "1" / "model.onnx").stat().st_ino  # linked
    assert (base / "config.pbtxt").read_text() == TWIN_CONFIG  # the built twin is left as it was
    auto = tune.twin_folder(base, tune.Candidate(0, 1, 1, 1), tmp_path / "c1")
    assert (
        tune.INTRA_PARAMETER not in text_format.Parse((auto / "config.pbtxt").read_text(), mc.ModelConfig()).parameters
    )


def test_a_build_dir_that_is_a_file_and_an_out_with_a_line_break_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The red team: a NotADirectoryError traceback, and a two-line error."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")

    def build(_settings: object, _variants: object, folder: Path) -> None:  # as the build's first mkdir fails there
        Path(folder).mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(tune.runner, "build_sandbox_repository", build)
    assert tune.main(["--build-dir", str(blocker / "bd"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(blocker) in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert tune.main(["--out", "/proc/x\nFAKE: second line"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out /proc/x") and err.count("\n") == 1, err


# --- the screen (--search screen): closed loop, then a queue model ----------------------------------------------
def test_a_screen_measurement_predicts_by_littles_law_and_the_queue_model() -> None:
    """17 answers/s with one request in flight is 58.8 ms per request; two instances at 20/s with two in flight,
    100 ms each; the prediction is the queue model's for that time, and no answer predicts nothing."""
    from triton_gke.bench.metrics.queue_model import capacity

    one = tune.screen_row(17.0, 70.0, 1, 200.0)
    assert one["service_ms"] == pytest.approx(58.82, abs=0.01)
    assert one["predicted_rps"] == pytest.approx(capacity(1000 / 17, 1, 200.0), abs=0.01)
    two = tune.screen_row(20.0, 120.0, 2, 200.0)
    assert two["service_ms"] == 100.0 and two["predicted_rps"] == pytest.approx(capacity(100.0, 2, 200.0), abs=0.01)
    assert tune.screen_row(0.0, 0.0, 1, 200.0)["predicted_rps"] == 0.0
    assert tune.screen_row(float("inf"), 0.0, 1, 200.0)["predicted_rps"] == 0.0  # no time per request to model
    assert tune.screen_row(4.0, 300.0, 1, 200.0)["predicted_rps"] == 0.0  # 250 ms per request: past the SLO alone


@given(st.integers(1, 64), st.none() | st.integers(1, 64), st.floats(60.0, 36000.0), st.floats(0.0, 600.0))
def test_a_screen_visits_what_its_budget_pays_for_and_always_compares(
    grid: int, max_count: int | None, budget_s: float, visit_s: float
) -> None:
    count = tune.screen_count(grid, max_count, budget_s, visit_s)
    assert count <= grid and count <= (max_count or tune.MAX_CANDIDATES)
    assert count >= min(2, grid, max_count or 2)  # the default and one other, where the grid and the option allow
    if count > 2:
        assert count * max(visit_s, 1.0) <= budget_s


def screened_report() -> dict:
    default = {**dataclasses.asdict(tune.Candidate(20000, 64, 64, 1)), "label": "default"}
    best = {**dataclasses.asdict(tune.Candidate(0, 1, 1, 1, protocol="grpc")), "label": "no batching, gRPC"}
    row = {"concurrency": 1, "infer_per_s": 16.9, "p95_ms": 66.0, "service_ms": 59.17, "predicted_rps": 9.2}
    return {
        "variant": "original", "stack": "dev", "slo_ms": 200, "command": "triton-gke bench tune --search screen",
        "started": "2026-12-03T21:00:00+00:00", "wall_s": 150.0, "units_spent": 6, "search": "screen",
        "candidates": [
            {**default, "default": True, "capacities": [5.0, 5.1, 5.2], "median": 5.1},
            {**best, "default": False, "capacities": [9.0, 9.2, 9.4], "median": 9.2},
        ],
        "best": {**best, "median": 9.2, "min": 9.0, "max": 9.4, "searches": 3},
        "default": {**default, "median": 5.1, "min": 5.0, "max": 5.2, "searches": 3},
        "recommended": {**best, "median": 9.2, "min": 9.0, "max": 9.4, "searches": 3},
        "ratio": 9.2 / 5.1, "significant": True, "chance": 0.05, "stopped_early": False, "noisy": [],
        "pulumi": ["pulumi config set triton-gke:modelMaxQueueDelayUs 0"], "client": [],
        "twin_only": {tune.INTRA_PARAMETER: None},
        "machine": {"screen": {"window_s": 1.0, "measurements": {"no batching, gRPC": [row]}}},
    }  # fmt: skip


def test_a_screens_readme_calls_its_figures_predictions_and_shows_what_they_came_from() -> None:
    text = tune.readme(screened_report())
    assert "6 closed-loop measurements" in text and "rate searches" not in text
    assert "predicted capacities (req/s at the SLO by M/D/c" in text
    assert "capacities predicted by M/D/c, not measured open loop" in text
    assert "each of its 3 closed-loop measurements beat each of the default's 3" in text
    assert "| no batching, gRPC | 1 | 16.9 | 66 | 59.17 | 9.2 |" in text


def test_search_takes_only_the_two_strategies(capsys: pytest.CaptureFixture[str]) -> None:
    assert tune.main(["--search", "bandit"]) == 2
    err = capsys.readouterr().err
    assert "--search: invalid choice: 'bandit'" in err and err.count("\n") == 1, err
