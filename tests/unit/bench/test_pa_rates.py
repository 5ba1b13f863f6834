"""bench.runners.pa_rates in-process: its rates, stack and model names, --out, and the window it measures in."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.bench.runners import pa_rates, perf_analyzer
from triton_gke.contracts.naming import MODEL_NAME_RE


# ---------------------------------------------------------------- bench.runners.pa_rates
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0.01, max_value=1000, allow_nan=False), min_size=1, max_size=6))
def test_pa_rates_reads_every_listed_rate(rates: list[float]) -> None:
    assert pa_rates.parse_rates(",".join(repr(r) for r in rates)) == rates


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.floats(max_value=0), st.floats(min_value=1000.001), st.just(float("nan"))))
def test_pa_rates_refuses_rates_outside_the_range(rate: float) -> None:
    with pytest.raises(ValueError, match=r"each rate must be in \(0, 1000\]"):
        pa_rates.parse_rates(f"25,{rate!r}")


# ---------------------------------------------------------------- bench.runners.pa_rates --out, messages, meta.json
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


def test_window_requests_hold_the_old_window_at_a_rate_the_server_keeps_up_with() -> None:
    # 3 s at the rate, at least 20: the windows the time mode gave whenever answers kept coming.
    assert [perf_analyzer.window_requests(r) for r in (0.5, 2.5, 6.67, 25, 40)] == [20, 20, 21, 75, 120]


# ------------------------------------------------------------------ names
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.one_of(
        st.sampled_from(["", ".", "..", "../x", "a/b", "x\n", " ", "a b", ".hidden", "-x", "a" * 65]),
        st.text(max_size=12).filter(lambda t: not MODEL_NAME_RE.fullmatch(t)),
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


def test_pa_rates_never_writes_over_an_earlier_runs_files(tmp_path: Path, capsys) -> None:
    """The red team: pa-rates measured into a folder of other files and replaced its warm-up.csv at once."""
    out = tmp_path / "earlier"
    out.mkdir()
    (out / "warm-up.csv").write_text("mine\n")
    err = _pa_rates(["--out", str(out)], capsys)
    assert f"--out {out}: not empty (it holds 'warm-up.csv'" in err
    assert [p.name for p in out.iterdir()] == ["warm-up.csv"] and (out / "warm-up.csv").read_text() == "mine\n"
