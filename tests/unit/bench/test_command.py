"""Every bench command runs through the kernel (bench/command.py): its parser is a BenchParser whose shared options
the kernel added, its main runs in a run folder, an interrupt ends it with one line and 128 + the signal, a bad
--out is one line and exit 2, and its default --out lies under the project's results/bench (contracts/paths.py).

The commands are enumerated from the dispatcher (cli/main.py), so a new bench command that skips the kernel fails
here unless it is named in NOT_RUNS with the reason it runs nothing. Signals come from signal.raise_signal, as in
tests/unit/sandbox/test_interrupts_held.py."""

from __future__ import annotations

import datetime
import importlib
import signal
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench import command
from triton_gke.cli.main import BENCH_COMMANDS, COMMANDS, Command
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import BENCH_RESULTS, PACKAGE_DIR, bench_results_dir
from triton_gke.sandbox import run_folder

# Bench subcommands that start no measurement: no stack run, no run folder, no server to stop.
NOT_RUNS = {
    "record": "capacity records from a finished run's results.json",
    "report": "re-renders a finished run from its results.json",
    "pa-rates": "perf_analyzer at fixed rates on an already built twin; its refusals name its prog (live tests)",
}
# The options the kernel defines once; a command that has one must have it from the kernel.
SHARED = ("--stack", "--variant", "--out", "--build-dir")


def _bench_commands() -> dict[str, Command]:
    return {"bench": COMMANDS["bench"], **{f"bench {name}": c for name, c in BENCH_COMMANDS.items()}}


RUNS = {name: c for name, c in _bench_commands().items() if name.removeprefix("bench ") not in NOT_RUNS}


def _module(name: str) -> ModuleType:
    return importlib.import_module(RUNS[name].module)


def _main(name: str) -> Callable[[list[str]], int]:
    return getattr(_module(name), RUNS[name].entry)


def _argv(parser: command.BenchParser, tmp_path: Path, **given: str) -> list[str]:
    """Words the parser accepts: a folder for each required option, a fresh --build-dir, then `given`."""
    words = [w for a in parser._actions if a.required for w in (a.option_strings[0], str(tmp_path / a.dest))]
    for dest in [a.dest for a in parser._actions if a.required]:
        (tmp_path / dest).mkdir()
    given = {"--build-dir": str(tmp_path / "build"), **given}
    return words + [w for option, value in given.items() for w in (option, value)]


def test_the_kernel_covers_the_five_run_commands_and_names_every_other() -> None:
    assert set(RUNS) == {"bench", "bench tune", "bench model-analyzer", "bench loop-check", "bench compare-tuners"}
    assert set(NOT_RUNS) <= set(BENCH_COMMANDS)  # no stale exemption


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_parser_is_the_kernels_with_its_shared_options(name: str) -> None:
    parser = _module(name).parser()
    assert isinstance(parser, command.BenchParser), name
    for option in SHARED:
        action = next((a for a in parser._actions if option in a.option_strings), None)
        assert action is None or action.dest in parser.shared, f"{name}: {option} is not the kernel's"
    assert {"stack", "out"} <= parser.shared, name


@pytest.mark.parametrize("name", sorted(RUNS))
def test_an_interrupt_in_each_body_is_one_line_and_130_inside_a_run_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[bool] = []

    def interrupted(self: command.BenchParser, *args: object, **kwargs: object) -> None:
        seen.append(bool(run_folder._active))  # the body runs inside the run folder
        signal.raise_signal(signal.SIGINT)
        raise AssertionError("the signal was not turned into an interrupt")  # pragma: no cover

    monkeypatch.setattr(command.BenchParser, "parse_args", interrupted)
    assert _main(name)([]) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert seen == [True] and err.startswith("interrupted by SIGINT: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_bad_out_in_each_command_is_one_line_and_exit_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(PROJECT_DIR)  # the shipped stack files
    blocker = tmp_path / "a-file"
    blocker.write_text("mine\n")
    argv = _argv(_module(name).parser(), tmp_path, **{"--out": str(blocker / "out")})
    assert _main(name)(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: --out ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert blocker.read_text() == "mine\n"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_default_out_is_a_dated_folder_in_the_projects_results(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the project folder is the current one (contracts/paths.py project_dir)
    parser = _module(name).parser()
    args = parser.parse_args(_argv(parser, tmp_path, **{"--stack": "dev"}))
    out = parser.default_out(args, datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC))
    assert out.parent == bench_results_dir() == tmp_path / BENCH_RESULTS, name
    assert out.name == f"{parser.out_prefix}dev-2026-12-03", name
    assert f"{BENCH_RESULTS}/{parser.out_prefix}<stack>-<date>" in " ".join(parser.format_help().split()), name


def test_the_committed_runs_live_outside_the_package() -> None:
    """The wheel ships the package; results/bench/ is the project's (pyproject.toml package-data names no run)."""
    from triton_gke.bench.reports import doc_plots

    run_files = ("results.json", "tune.json", "comparison.json", "loop_check.json", "pick.json")
    assert not [p for name in run_files for p in PACKAGE_DIR.rglob(name)]
    assert {run for run, _ in doc_plots.IMAGES.values()} <= {p.name for p in (PROJECT_DIR / BENCH_RESULTS).iterdir()}
