"""`triton-gke bench` (bench/__main__.py) in-process: bad options and stack names are refused in one line.

Each refusal is one line naming the option or key, exit 2, before anything starts: `prepare` (which builds the
CPU twins and would start tritonserver) is replaced by a tripwire; options are never abbreviated (`--set` was
read as `--settle-seconds`). tests/live/bench/test_bench_command.py runs refusals in a real process."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import triton_gke.bench.__main__ as bench_main
from triton_gke.bench.__main__ import main
from triton_gke.bench.runners import runner
from triton_gke.bounded_files import output_folder_problem
from triton_gke.loadtest import arrivals
from triton_gke.settings.stack import STACK_NAME


# ---------------------------------------------------------------- the real thing, briefly
def test_bad_arguments_fail_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--saturation-users", "4,2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --saturation-users: counts >= 1 must rise strictly") and err.count("\n") == 1
    assert main(["--start-rps", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --start-rps 0 / --max-rps 500: expected 0 < start <= max")
    assert main(["--variants", "trt_int4"]) == 2
    assert "'trt_int4' is not deployed" in capsys.readouterr().err


def test_bench_refuses_min_requests_it_cannot_collect_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--min-requests", "150"]) == 2  # default --start-rps 4, --step-seconds 6: 96 requests at most
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --min-requests 150: a step at --start-rps 4 lasts at most 24 s") and err.count("\n") == 1
    )


@pytest.fixture
def no_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def tripwire(*_args: object) -> None:
        raise AssertionError("bench went on to prepare models for a bad option")

    monkeypatch.setattr(bench_main, "prepare", tripwire)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    # capsys is read (and so emptied) once per example: sharing the function-scoped fixture is safe here.
    assert bench_main.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


_too_fast = st.one_of(
    st.floats(min_value=arrivals.MAX_RATE, exclude_min=True, allow_infinity=True),
    st.just(math.nan),
    st.just(-math.inf),
)


_bad_growth = st.one_of(
    st.floats(max_value=1.05, exclude_max=True, allow_infinity=True),
    st.floats(min_value=10, exclude_min=True, allow_infinity=True),
    st.just(math.nan),
)


@pytest.mark.usefixtures("no_start")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--start-rps", "--max-rps"]), value=_too_fast)
def test_rates_beyond_the_locustfile_cap_are_refused(option: str, value: float, capsys) -> None:
    err = _refused([f"{option}={value!r}"], capsys)  # `=`: argparse takes "-inf" for an option
    assert err.startswith(f"error: {option} ") and f"at most {arrivals.MAX_RATE:g} requests/s" in err


@pytest.mark.usefixtures("no_start")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_bad_growth)
def test_bad_growth_is_blamed_on_growth(value: float, capsys) -> None:
    err = _refused([f"--growth={value!r}"], capsys)
    assert err.startswith("error: --growth ") and "from 1.05 to 10" in err and "--start-rps" not in err


@pytest.mark.usefixtures("no_start")
@pytest.mark.parametrize("below", ["", "sub/dir"])
def test_out_that_is_or_lies_under_a_file_is_refused(below: str, tmp_path: Path, capsys) -> None:
    existing = tmp_path / "results.csv"
    existing.write_text("kept\n")
    err = _refused(["--out", str(existing / below)], capsys)
    assert err.startswith(f"error: --out {existing / below}: {existing} exists and is not a folder")
    assert existing.read_text() == "kept\n"


# ---------------------------------------------------------------- issue 13 follow-up: the tester's findings
def _out(tmp_path: Path) -> list[str]:
    return ["--out", str(tmp_path / "out")]


@pytest.mark.usefixtures("no_start")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.one_of(
        st.sampled_from(["../../etc/passwd", "..", ".", "a/b", "", "dev\n", "dev prod"]),
        st.text(min_size=1, max_size=20).filter(lambda t: not STACK_NAME.fullmatch(t)),
    )
)
def test_a_stack_name_that_is_a_path_is_refused_naming_the_option(name: str, tmp_path_factory, capsys) -> None:
    out = tmp_path_factory.mktemp("out") / "run"
    err = _refused([f"--stack={name}", "--out", str(out)], capsys)
    assert err.startswith(f"error: --stack {name!r}: not a Pulumi stack name (") and err.endswith("characters)\n")
    assert not out.exists()


@pytest.mark.usefixtures("no_start")
def test_a_missing_stack_file_is_one_line_naming_it(tmp_path: Path, capsys) -> None:
    err = _refused(["--stack", "nope", *_out(tmp_path)], capsys)
    assert err == "error: --stack 'nope': Pulumi.nope.yaml: no such stack file\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_start")
@pytest.mark.parametrize("kind", ["dangling", "proc", "under-dangling"])
def test_out_that_cannot_be_written_is_refused_before_the_run(kind: str, tmp_path: Path, capsys) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere" / "at-all")
    out = {"dangling": link, "proc": Path("/proc/x"), "under-dangling": link / "run"}[kind]
    err = _refused(["--out", str(out)], capsys)
    assert err.startswith(f"error: --out {out}: ")
    assert ("symbolic link to nothing" in err) if kind != "proc" else ("cannot write there" in err)
    assert not (tmp_path / "nowhere").exists()


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(min_value=1, max_value=4))
def test_the_writability_probe_leaves_nothing_behind(depth: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        out = Path(root).joinpath(*(f"d{i}" for i in range(depth)))
        assert output_folder_problem(out) is None
        assert list(Path(root).iterdir()) == []


_FLOAT_OPTIONS = {
    "--step-seconds": (1, 600),
    "--settle-seconds": (0, 600),
    "--warmup-seconds": (1, 600),
    "--raw-seconds": (0.5, 600),
    "--slo-ms": (1, 3_600_000),  # contracts/slo.py, the stack's sloLatencyMs bound
    "--max-failure-pct": (0, 99),
}


@pytest.mark.usefixtures("no_start")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), option=st.sampled_from(sorted(_FLOAT_OPTIONS)))
def test_every_float_option_is_bounded_and_named(data: st.DataObject, option: str, capsys) -> None:
    low, high = _FLOAT_OPTIONS[option]
    value = data.draw(
        st.one_of(
            st.sampled_from([math.inf, -math.inf, math.nan]),
            st.floats(max_value=low, exclude_max=True),
            st.floats(min_value=high, exclude_min=True),
        )
    )
    err = _refused([f"{option}={value!r}", "--stack", "no-such-stack-is-read"], capsys)
    assert err.startswith(f"error: {option} ") and f"from {low:.10g} to {high:.10g}" in err


@pytest.mark.usefixtures("no_start")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    option=st.sampled_from(["--start-rps", "--max-rps"]),
    value=st.floats(min_value=0, max_value=0.1, exclude_min=True, exclude_max=True),
)
def test_a_rate_below_one_request_in_ten_seconds_is_refused(option: str, value: float, capsys) -> None:
    err = _refused([f"{option}={value!r}"], capsys)
    assert err.startswith(f"error: {option} ") and "at least 0.1 requests/s" in err


@pytest.mark.usefixtures("no_start")
def test_a_plan_longer_than_a_day_is_refused(tmp_path: Path, capsys) -> None:
    err = _refused(["--step-seconds", "600", "--repeats", "3", *_out(tmp_path)], capsys)
    assert err.startswith("error: --step-seconds/--settle-seconds/--repeats: the plan could run ")
    assert "over 24 h" in err


@settings(max_examples=50, deadline=None)
@given(
    saddr=st.one_of(
        st.sampled_from(["no-port", "http://[::1", "[::1", "http://127.0.0.1:8000", "host:", "host:0", "h:70000"]),
        st.text(max_size=30).filter(lambda t: ":" not in t),
        st.builds(lambda h, p: f"{h}:{p}", st.sampled_from(["a", "127.0.0.1"]), st.integers(min_value=65536)),
    )
)
def test_a_saddr_that_is_not_host_port_is_refused(saddr: str) -> None:
    with pytest.raises(runner.BenchError, match=r"^--saddr ") as err:
        runner.split_saddr(saddr)
    assert "\n" not in str(err.value)


@settings(max_examples=40, deadline=None)
@given(host=st.sampled_from(["127.0.0.1", "triton", "[::1]", "a.b-c.example"]), port=st.integers(1, 65535))
def test_a_host_port_saddr_is_taken(host: str, port: int) -> None:
    assert runner.split_saddr(f"{host}:{port}") == (host.strip("[]"), port)


@pytest.mark.usefixtures("no_start")
@pytest.mark.parametrize("option", ["--saddr", "--metrics-url"])
def test_stack_target_options_are_refused_with_the_sandbox(option: str, tmp_path: Path, capsys) -> None:
    err = _refused([option, "http://127.0.0.1:8002/metrics", *_out(tmp_path)], capsys)
    assert err == f"error: {option}: only with --target stack (the sandbox serves its own Triton)\n"


@pytest.mark.usefixtures("no_start")
def test_a_bad_saddr_is_refused_before_the_stack_file_is_read(tmp_path: Path, capsys) -> None:
    err = _refused(["--target", "stack", "--stack", "nope", "--saddr", "no-port", *_out(tmp_path)], capsys)
    assert err.startswith("error: --saddr 'no-port': expected host:port")


@pytest.fixture(scope="module")
def dev_settings() -> object:
    from triton_gke.settings import from_stack_file

    return from_stack_file("dev")


@settings(max_examples=40, deadline=None)
@given(chosen=st.lists(st.sampled_from(["original", "trt_fp32", "trt_fp16", "trt_int8"]), unique=True, max_size=4))
def test_the_default_uint8_copy_follows_the_variants_benched(chosen: list[str], dev_settings) -> None:
    argv = ["--variants", *chosen] if chosen else []
    config = bench_main.bench_config(bench_main.parser().parse_args(argv), dev_settings)
    assert config.uint8 == (("original",) if not chosen or "original" in chosen else ())
    explicit = bench_main.bench_config(bench_main.parser().parse_args([*argv, "--uint8", "trt_fp16"]), dev_settings)
    assert explicit.uint8 == ("trt_fp16",)
    none = bench_main.bench_config(bench_main.parser().parse_args([*argv, "--uint8"]), dev_settings)
    assert none.uint8 == ()


def test_bench_reads_set_as_an_unknown_option_not_settle_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["--set", "modelMaxBatchSize=8"]) == 2
    assert "unrecognized arguments: --set modelMaxBatchSize=8" in capsys.readouterr().err


def test_bench_states_the_length_rule_for_a_101_character_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["--stack", "a" * 101]) == 2
    assert capsys.readouterr().err.endswith("not starting with '.', at most 100 characters)\n")


@pytest.mark.usefixtures("no_start")
@pytest.mark.parametrize("kind", ["proc", "under-file"])
def test_a_build_dir_that_cannot_be_written_is_one_line_naming_it(kind: str, tmp_path: Path, capsys) -> None:
    """The red team: `bench --build-dir /sys/x` was a PermissionError traceback (exit 1) once the twins were built."""
    (tmp_path / "file").write_text("kept\n")
    build = {"proc": Path("/proc/x"), "under-file": tmp_path / "file" / "build"}[kind]
    err = _refused(["--build-dir", str(build), "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: --build-dir {build}: ") and (tmp_path / "file").read_text() == "kept\n"
    assert not (tmp_path / "out").exists()


FILE_NAMES = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=8)


@pytest.mark.usefixtures("no_start")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(FILE_NAMES, min_size=1, max_size=4, unique=True))
def test_out_over_someone_elses_files_is_refused_and_nothing_is_written(
    names: list[str], capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Red team of issue 45: `bench --out ''` (Path('') is '.') and `--out .` wrote the run's README.md over the
    project's own. A folder holding files that are not a bench run's (no results.json) is refused in one line before
    anything runs, and '' is refused as an empty path; an earlier run's folder may be written over."""
    folder = tmp_path_factory.mktemp("someone-elses")
    for name in names:
        (folder / name).write_text("a user's file\n")
    before = sorted(p.name for p in folder.iterdir())
    err = _refused(["--out", str(folder)], capsys)
    assert err.startswith(f"error: --out {folder}: a folder holding other files than a bench run's")
    assert sorted(p.name for p in folder.iterdir()) == before
    assert _refused(["--out", ""], capsys).startswith("error: --out: an empty path")


def test_out_over_an_earlier_bench_run_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}\n")
    (tmp_path / "README.md").write_text("an earlier run\n")
    bench_main._check_out_folder(tmp_path)  # no error
