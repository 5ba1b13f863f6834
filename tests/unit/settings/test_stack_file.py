"""Second-pass tester findings on command-line inputs: special files, abbreviated options, names that are paths.

A FIFO, /dev/zero or a link to either as a stack file, --config-file or results.json is refused in one line
before a byte is read (it hung, or grew to gigabytes); options are never abbreviated (`--set` was read as
`--settle-seconds`); make bench is refused --set/--config-file before the model repository is rebuilt;
bench.pa_rates checks its stack and model names; bench.record type-checks the facts a record quotes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton_gke.bench.__main__ as bench_main
from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_gke.bench import pa_rates, record
from triton_gke.cli.one_line import MAKE_TARGET_ENV, OneLineParser
from triton_gke.offline import make_args
from triton_gke.sandbox import run as sandbox_run
from triton_gke.settings import ConfigError, stack_config
from triton_gke.settings.stack_file import MAX_BYTES, NotRegularFileError, read_regular_file

RUN = PROJECT_DIR / "bench" / "results" / "dev-2026-11-30-alone" / "results.json"


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    # A real process with a timeout: before the fix a FIFO blocked forever and /dev/zero filled the memory.
    command = [sys.executable, "-m", *args]
    return subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)


def _triton_gke(*args: str, make_target: str = "") -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it (make_target: as make_args runs it for that make target)."""
    env = {k: v for k, v in os.environ.items() if k != MAKE_TARGET_ENV}
    if make_target:
        env[MAKE_TARGET_ENV] = make_target
    command = [str(Path(sys.executable).parent / "triton-gke"), *args]
    return subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    return line


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


# ------------------------------------------------------------------ special files


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_special_config_file_is_refused_in_one_line_before_reading(special: str, fifo: Path) -> None:
    path = str(fifo) if special == "fifo" else special
    line = _one_line(_python("triton_gke.offline.plan", "--stack", "dev", "--config-file", path))
    kind = "a FIFO (named pipe)" if special == "fifo" else "a character device"
    assert line == f"error: {Path(path).name} ({path}): {kind}, not a regular file; a stack file is a regular YAML file"


def test_a_stack_file_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.z.yaml").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"^Pulumi\.z\.yaml \(/dev/zero\): a character device, not a regular file"):
        stack_config("z", project_dir=tmp_path)


def test_a_stack_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "Pulumi.z.yaml")
    with pytest.raises(ConfigError, match=r"^Pulumi\.z\.yaml \(.*\): a FIFO \(named pipe\), not a regular file"):
        stack_config("z", project_dir=tmp_path)


def test_an_empty_config_file_path_says_empty_path() -> None:
    line = _one_line(_triton_gke("plan", "--config-file", ""))
    assert line == "error: triton-gke plan: argument --config-file: empty path; name a file (see --help)"
    under_make = _one_line(_triton_gke("plan", "--config-file", "", make_target="plan"))  # as make_args runs it
    assert under_make == "error: make plan: argument --config-file: empty path; name a file (see make plan ARGS=--help)"


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300), cap=st.integers(min_value=0, max_value=300))
def test_a_regular_file_is_read_up_to_one_byte_past_the_cap(data: bytes, cap: int, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("f") / "file"
    path.write_bytes(data)
    link = path.with_name("link")
    link.symlink_to(path)
    assert read_regular_file(path, cap) == data[: cap + 1]
    assert read_regular_file(link, cap) == data[: cap + 1]  # a link to a regular file is read as the file


def test_special_files_are_not_opened(fifo: Path, tmp_path: Path) -> None:
    for path, kind in [
        (fifo, "a FIFO (named pipe)"),
        (Path("/dev/zero"), "a character device"),
        (tmp_path, "a folder"),
    ]:
        with pytest.raises(NotRegularFileError) as refused:
            read_regular_file(path, MAX_BYTES)
        assert refused.value.kind == kind


def test_an_oversized_stack_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.big.yaml").write_text("#" * (MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=f"^Pulumi.big.yaml: more than {MAX_BYTES} bytes"):
        stack_config("big", project_dir=tmp_path)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_bench_record_refuses_special_results(special: str, fifo: Path) -> None:
    path = str(fifo) if special == "fifo" else special
    line = _one_line(_python("triton_gke.bench.record", path))
    assert line.startswith(f"error: {path}: ") and "not a regular file" in line


# ------------------------------------------------------------------ abbreviations


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(min_value=3, max_value=len("--settle-seconds") - 1))
def test_an_abbreviated_option_is_unrecognized(cut: int) -> None:
    parser = OneLineParser(prog="p", raise_as=ValueError)
    parser.add_argument("--settle-seconds", type=float)
    with pytest.raises(ValueError, match="unrecognized arguments"):
        parser.parse_args(["--settle-seconds"[:cut], "2"])
    assert parser.parse_args(["--settle-seconds", "2"]).settle_seconds == 2.0


def test_bench_reads_set_as_an_unknown_option_not_settle_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["--set", "modelMaxBatchSize=8"]) == 2
    assert "unrecognized arguments: --set modelMaxBatchSize=8" in capsys.readouterr().err


# ------------------------------------------------------------------ make bench / make sandbox settings options

_values = st.text(alphabet="abcXYZ019=[]\"' ", max_size=12)
_settings_words = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(make_args.SETTINGS_OPTIONS), _values).map(list),
        _values.map(lambda v: [f"--set={v}"]),
    ),
    min_size=1,
    max_size=3,
).map(lambda groups: [w for g in groups for w in g])


@settings(max_examples=40, deadline=None)
@given(words=_settings_words, other=st.sampled_from(["plan", "sandbox", "model-repo"]))
def test_make_bench_is_refused_settings_options_before_model_repo(words: list[str], other: str) -> None:
    env = {**os.environ, "ARGS": make_args.join_args(words), "MAKE_ARGS_GOALS": f"{other} bench", "STACK": "dev"}
    command = [
        sys.executable,
        "-m",
        "triton_gke.offline.make_args",
        "--target",
        "model-repo",
        "--stack",
        "--prerequisite",
        "no-such-program",
    ]
    done = subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=60)
    line = _one_line(done)  # exit 2 before the exec: the (missing) program would fail with a traceback
    assert line.startswith(f"error: ARGS: {words[0].split('=')[0]}: make bench takes no settings options")
    assert make_args.refused_settings(words, [other]) is None  # plan, sandbox, model-repo take them


def test_sandbox_takes_config_file_like_plan() -> None:
    args = sandbox_run._parser().parse_args(["--config-file", "Pulumi.dev.yaml", "--set", "a=b"])
    assert (args.config_file, args.set) == (Path("Pulumi.dev.yaml"), ["a=b"])


# ------------------------------------------------------------------ names


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.one_of(
        st.sampled_from(["", ".", "..", "../x", "a/b", "x\n", " ", "a b"]),
        st.text(max_size=12).filter(lambda t: not pa_rates.MODEL_NAME.fullmatch(t) or t in {".", ".."}),
    )
)
def test_pa_rates_refuses_a_model_that_is_not_a_name(name: str, tmp_path_factory, capsys) -> None:
    out = tmp_path_factory.mktemp("o") / "out"
    with pytest.raises(SystemExit) as done:
        pa_rates.main([f"--model={name}", "--out", str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: triton-gke bench pa-rates: --model {name!r}: not a model name")
    assert not out.exists()


@pytest.mark.parametrize("stack", ["../dev", "", "a" * 101, ".hidden"])
def test_pa_rates_refuses_a_stack_that_is_not_a_name(stack: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        pa_rates.main([f"--stack={stack}", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err == (
        f"error: triton-gke bench pa-rates: --stack {stack!r}: not a Pulumi stack name (letters, digits, '-', '_' "
        "and '.', not starting with '.', at most 100 characters) (see --help)\n"
    )


def test_bench_states_the_length_rule_for_a_101_character_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["--stack", "a" * 101]) == 2
    assert capsys.readouterr().err.endswith("not starting with '.', at most 100 characters)\n")


# ------------------------------------------------------------------ bench.record's facts

_bad = st.sampled_from([None, float("nan"), float("inf"), [], [1], {}, True, "x", -1])
_keys = st.sampled_from(["command", "wall_s", "machine", *(f"machine.{k}" for k in record.MACHINE_FACTS)])


@settings(max_examples=60, deadline=None)
@given(key=_keys, value=_bad)
def test_record_type_checks_command_wall_s_and_machine(key: str, value: object, tmp_path_factory) -> None:
    run = json.loads(RUN.read_text())
    top, _, sub = key.partition(".")
    if sub:
        run["machine"][sub] = value
    else:
        run[top] = value
    right_type = {"command": value == "x", "machine": value == {}}.get(key, False)
    if right_type or (sub and record.MACHINE_FACTS[sub][0](value)):
        return  # a value of the right type (text, an empty object, a null load average): nothing to refuse
    path = tmp_path_factory.mktemp("r") / "results.json"
    path.write_text(json.dumps(run))
    with pytest.raises(record.CapacityError) as refused:
        record.read_results(path)
    message = str(refused.value)
    if isinstance(value, float) and not math.isfinite(value):  # NaN/Infinity are not JSON: refused as the file is read
        assert message.startswith(f"{path}: ") and "not a finite number" in message and "\n" not in message
    else:
        assert message.startswith(f"{path}: {key}: ") and "\n" not in message


def test_the_committed_runs_pass_the_fact_checks() -> None:
    for path in sorted((PROJECT_DIR / "bench" / "results").glob("*/results.json")):
        assert record.read_results(path)[0]["machine"]
