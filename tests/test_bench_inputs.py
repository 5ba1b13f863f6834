"""Bad inputs to `python -m bench` and to the locustfile's rate settings (issue 13 red-team findings).

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
from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bench.__main__ as bench_main
from bench import pa_rates
from loadtest import arrivals


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
    command = [sys.executable, "-m", "bench", "--max-rps", "1e12"]
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
        [sys.executable, "-m", "bench.pa_rates", "--rates", "25,,30", "--out", "unused"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and not Path(PROJECT_DIR / "unused").exists()
    assert result.stderr.splitlines() == [
        "error: python -m bench.pa_rates: --rates '25,,30': expected comma-separated numbers (see --help)"
    ]
