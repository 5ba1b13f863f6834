"""Bad inputs to `triton-gke bench` and to the locustfile's rate settings (issue 13 red-team findings).

Each refusal is one line naming the option or key, exit 2, before anything starts. The bench checks run
in-process with `prepare` (which builds the CPU twins and would start tritonserver) replaced by a tripwire;
the locustfile's `rate` reading is compiled from its source (importing it would import Locust and
monkey-patch this process with gevent), as in test_locust_stack_settings.py. test_locust.py runs the same
refusals through a real Locust process.
"""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import triton_gke.bench.__main__ as bench_main
from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_gke.bench import pa_rates, runner
from triton_gke.loadtest import arrivals
from triton_gke.settings.stack import STACK_NAME


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


def test_command_line_refusal_has_no_traceback() -> None:
    command = [sys.executable, "-m", "triton_gke.bench", "--max-rps", "1e12"]
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "error: --max-rps 1e+12: expected a rate of at most 1e+06 requests/s\n"


# ---------------------------------------------------------------- the locustfile's rate and trace


def _locustfile_rate() -> tuple[Callable[[dict[str, str]], float], type[Exception]]:
    source = (PROJECT_DIR / "loadtest" / "locustfile.py").read_text()
    wanted = {"SettingError", "_get", "_number", "_rate"}
    nodes = [n for n in ast.parse(source).body if getattr(n, "name", None) in wanted]
    assert {n.name for n in nodes} == wanted, "the locustfile no longer reads rate through _rate"
    namespace: dict = {"arrivals": arrivals, "math": math, "Mapping": dict, "annotations": None}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), "locustfile.py", "exec"), namespace)  # noqa: S102
    return namespace["_rate"], namespace["SettingError"]


LOCUSTFILE_RATE, SETTING_ERROR = _locustfile_rate()


@settings(max_examples=50, deadline=None)
@given(value=st.one_of(st.floats(max_value=0), st.floats(min_value=arrivals.MAX_RATE, exclude_min=True)).map(repr))
def test_locust_rate_at_or_below_zero_or_over_the_cap_is_refused(value: str) -> None:
    with pytest.raises(SETTING_ERROR, match=r"^rate=") as err:
        LOCUSTFILE_RATE({"rate": value})
    assert "\n" not in str(err.value)


@settings(max_examples=30, deadline=None)
@given(value=st.floats(min_value=0, max_value=arrivals.MAX_RATE, exclude_min=True))
def test_locust_rate_above_zero_is_taken_and_empty_is_unset(value: float) -> None:
    assert LOCUSTFILE_RATE({"rate": repr(value)}) == value
    assert LOCUSTFILE_RATE({"rate": " "}) == LOCUSTFILE_RATE({}) == 0.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    good=st.lists(st.integers(min_value=1, max_value=arrivals.MAX_GAP_US), min_size=0, max_size=5),
    gap=st.one_of(st.floats(min_value=arrivals.MAX_GAP_US, exclude_min=True, allow_infinity=False), st.just(1e30)),
)
def test_trace_gap_over_an_hour_is_refused_naming_file_and_line(good: list[int], gap: float, tmp_path_factory) -> None:
    trace = tmp_path_factory.mktemp("trace") / "gaps.txt"
    trace.write_text("".join(f"{g}\n" for g in good) + f"{gap!r}\n")
    with pytest.raises(arrivals.ArrivalError, match=rf"^{trace}:{len(good) + 1}: gap of .* is over 1 hour$"):
        arrivals.read_trace(trace)


# ---------------------------------------------------------------- bench.pa_rates


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=1000, allow_nan=False), min_size=1, max_size=6))
def test_pa_rates_reads_every_listed_rate(rates: list[float]) -> None:
    assert pa_rates.parse_rates(",".join(repr(r) for r in rates)) == rates


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.floats(max_value=0), st.floats(min_value=1000.001), st.just(float("nan"))))
def test_pa_rates_refuses_rates_outside_the_range(rate: float) -> None:
    with pytest.raises(ValueError, match=r"each rate must be in \(0, 1000\]"):
        pa_rates.parse_rates(f"25,{rate!r}")


def test_pa_rates_bad_option_is_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.bench.pa_rates", "--rates", "25,,30", "--out", "unused"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and not Path(PROJECT_DIR / "unused").exists()
    assert result.stderr.splitlines() == [
        "error: triton-gke bench pa-rates: --rates '25,,30': expected comma-separated numbers (see --help)"
    ]


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


def test_a_missing_stack_file_has_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "triton_gke.bench", "--stack", "nope", "--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, "error: --stack 'nope': Pulumi.nope.yaml: no such stack file\n")


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
        assert runner.writable_folder(out) is None
        assert list(Path(root).iterdir()) == []


_FLOAT_OPTIONS = {
    "--step-seconds": (1, 600),
    "--settle-seconds": (0, 600),
    "--warmup-seconds": (1, 600),
    "--raw-seconds": (0.5, 600),
    "--slo-ms": (1, 600_000),
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
    assert err.startswith(f"error: {option} ") and f"from {low:g} to {high:g}" in err


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


def test_an_unreachable_or_unready_saddr_is_refused_before_any_locust(tmp_path: Path) -> None:
    import http.server
    import threading

    from triton_gke.sandbox.processes import free_port

    closed = free_port()
    with pytest.raises(runner.BenchError, match=rf"^--saddr 127.0.0.1:{closed}: Triton is not reachable"):
        runner.check_reachable(f"127.0.0.1:{closed}", timeout_s=1)

    class Answer(http.server.BaseHTTPRequestHandler):
        code = 503

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(Answer.code if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saddr = f"127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(runner.BenchError, match=r"Triton is not ready \(/v2/health/ready answered 503\)"):
            runner.check_reachable(saddr, timeout_s=2)
        Answer.code = 200
        runner.check_reachable(saddr, timeout_s=2)  # ready: no error
        runner.check_reachable(saddr, "grpc", timeout_s=2)  # gRPC: the TCP connection only
    finally:
        server.shutdown()
        server.server_close()
    command = [sys.executable, "-m", "triton_gke.bench", "--target", "stack", "--saddr", f"127.0.0.1:{closed}"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "o")], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.startswith(f"error: --saddr 127.0.0.1:{closed}: Triton is not")
    assert done.stderr.count("\n") == 1 and "[1/" not in done.stdout + done.stderr


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


# ---------------------------------------------------------------- bench.pa_rates --out, messages, meta.json


def _pa_rates(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert pa_rates.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: triton-gke bench pa-rates: ")
    return err


@pytest.mark.parametrize("kind", ["file", "under-file", "dangling"])
def test_pa_rates_out_that_cannot_be_a_folder_is_refused(kind: str, tmp_path: Path, capsys) -> None:
    existing = tmp_path / "file.csv"
    existing.write_text("kept\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    out = {"file": existing, "under-file": existing / "sub", "dangling": link}[kind]
    err = _pa_rates(["--out", str(out)], capsys)
    assert f"--out {out}: " in err and existing.read_text() == "kept\n" and not (tmp_path / "nowhere").exists()


def test_pa_rates_not_built_says_whose_error_it_is(tmp_path: Path, capsys) -> None:
    err = _pa_rates(["--stack", "never-built", "--out", str(tmp_path / "o")], capsys)
    assert "never-built/cpu/original: not built; run `make bench` first" in err
    assert not (tmp_path / "o").exists()


def test_pa_rates_meta_says_how_the_folder_was_made(tmp_path: Path) -> None:
    import datetime
    import json

    started = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)
    pa_rates.write_meta(tmp_path / "meta.json", ["--rates", "25,30", "--out", "a b"], started)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["command"] == "triton-gke bench pa-rates --rates 25,30 --out 'a b'"
    assert meta["started_utc"] == "2026-11-30T10:00:00+00:00"
    assert meta["commit"] and meta["cores"] >= 1 and meta["cpu_model"] and meta["onnxruntime"]
