"""The `triton-gke` console script (cli/main.py) as a user runs it (.venv/bin/triton-gke): one command, a
subcommand per program, one-line refusals, and make's exit status on its last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.cli import main as cli
from triton_gke.one_line import MAKE_TARGET_ENV

TRITON_GKE = Path(sys.executable).parent / "triton-gke"


RECORD = PROJECT_DIR / "capacity" / "records" / "cpu-twin__original__24.10-py3__slo-100ms.json"


# Every subcommand as a user types it, nested ones included.
SUBCOMMANDS = [
    [name, *child] for name, command in cli.COMMANDS.items() for child in ([[]] + [[c] for c in command.children])
] + [["capacity", "compare"]]


def env() -> dict[str, str]:
    """Our environment without what an enclosing `make test` exports (it would leak into an inner make)."""
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", MAKE_TARGET_ENV)
    return {k: v for k, v in os.environ.items() if k not in leaks}


def triton_gke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRITON_GKE), *args], cwd=PROJECT_DIR, env=env(), capture_output=True, text=True, timeout=120
    )


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and not done.stderr.startswith("usage:"), done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: "), line
    return line


def test_help_lists_every_subcommand_on_one_line_and_the_exit_statuses() -> None:
    done = triton_gke("--help")
    assert done.returncode == 0 and done.stderr == ""
    listed = [line.split()[0] for line in done.stdout.split("subcommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()]
    assert listed == list(cli.COMMANDS)
    expected = ["plan", "model-repo", "sync", "sandbox", "bench", "capacity", "plan-diff", "lifecycle-table"]
    assert set(expected + ["dashboards", "neg-cleanup"]) <= set(listed)
    for status in ("  0 ", "  1 ", "  2 ", "128+N", "Error N"):
        assert status in done.stdout


@pytest.mark.parametrize("words", SUBCOMMANDS, ids=" ".join)
def test_each_subcommand_has_help_named_after_the_console_script(words: list[str]) -> None:
    done = triton_gke(*words, "--help")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith((f"usage: triton-gke {' '.join(words)}", f"triton-gke {' '.join(words)}")), first


@pytest.mark.parametrize("words", [w for w in SUBCOMMANDS if w != ["capacity"]], ids=" ".join)
def test_a_bad_option_is_one_line_and_exit_2(words: list[str]) -> None:
    one_line_refusal(triton_gke(*words, "--no-such-option"))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "error: triton-gke: a subcommand is needed: plan, model-repo, "),
        (["plna"], "error: triton-gke: unknown subcommand 'plna'; the subcommands are plan, "),
        (["--stack", "dev"], "error: triton-gke: unknown option '--stack': a subcommand comes first; "),
        (["bench", "recrod"], "error: triton-gke bench: unknown subcommand 'recrod'; the subcommands are record, "),
        (["capacity", "comapre"], "error: triton-gke capacity: 'comapre' is not a command; commands: compare"),
    ],
)
def test_no_or_an_unknown_subcommand_is_one_line_and_exit_2(argv: list[str], expected: str) -> None:
    assert one_line_refusal(triton_gke(*argv)).startswith(expected)


def test_a_pasted_pa_rates_command_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The README's `triton-gke bench pa-rates ...`, before `make bench` built the model it serves."""
    line = one_line_refusal(
        triton_gke("bench", "pa-rates", "--model", "original", "--rates", "25,30", "--stack", "no-bench-build",
                   "--out", str(tmp_path / "out"))
    )  # fmt: skip
    assert line.startswith("error: triton-gke bench pa-rates: ") and "not built; run `make bench` first" in line


# ------------------------------------------------------------------ capacity compare: 1 vs 2, direct and by make
@pytest.fixture
def regression(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline folder with one record and a new one whose rate is half of it."""
    base, new = tmp_path / "base", tmp_path / "new"
    for folder, factor in ((base, 1.0), (new, 0.5)):
        folder.mkdir()
        record = json.loads(RECORD.read_text())
        record["max_rps_per_gpu"] = round(record["max_rps_per_gpu"] * factor, 1)
        (folder / RECORD.name).write_text(json.dumps(record, indent=2))
    return base, new


def test_capacity_compare_exits_1_on_a_regression_and_2_on_bad_input(regression: tuple[Path, Path]) -> None:
    base, new = regression
    dropped = triton_gke("capacity", "compare", str(base), str(new))
    assert dropped.returncode == 1, dropped.stderr
    assert dropped.stdout.splitlines()[-1].startswith("regression: 1 of 1 rates dropped by more than 10 %")
    line = one_line_refusal(triton_gke("capacity", "compare", str(base), str(new.parent / "absent")))
    assert "no such record file or folder" in line
    assert triton_gke("capacity", "compare", str(base), str(base)).returncode == 0


def _make_capacity_compare(args: str) -> subprocess.CompletedProcess[str]:
    # -o: the set-up is not under test, and must not reinstall the shared venv.
    command = ["make", "--no-print-directory", "-o", "setup", "-o", ".venv/.installed", "capacity-compare"]
    return subprocess.run(
        [*command, f"ARGS={args}"], cwd=PROJECT_DIR, env=env(), capture_output=True, text=True, timeout=120
    )


def test_make_capacity_compare_shows_the_programs_status_on_its_last_line(regression: tuple[Path, Path]) -> None:
    """GNU make exits 2 whenever a recipe fails ("How to Run make", the GNU make manual); what a user can tell 1
    from 2 by is the program's own line and make's `Error N`, which carries the program's status (make_args
    execs the program, so the recipe's status is the program's)."""
    base, new = regression
    dropped = _make_capacity_compare(f"'{base}' '{new}'")
    assert dropped.returncode == 2
    assert "regression: 1 of 1 rates dropped" in dropped.stdout
    assert dropped.stderr.splitlines()[-1].endswith("capacity-compare] Error 1"), dropped.stderr
    bad = _make_capacity_compare(f"'{base}' '{new.parent / 'absent'}'")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "no such record file or folder" in errors[0]
    assert bad.stderr.splitlines()[-1].endswith("capacity-compare] Error 2"), bad.stderr
    ok = _make_capacity_compare(f"'{base}' '{base}'")
    assert ok.returncode == 0 and "ok: none of 1 rates" in ok.stdout, ok.stderr


@given(option=st.from_regex(r"--[a-z][a-z0-9-]{0,15}", fullmatch=True))
@settings(max_examples=15, deadline=None)
def test_an_unknown_option_of_a_subcommand_is_one_line_exit_2(option: str) -> None:
    """Generated options to a light subcommand's real parser (plan-diff: no Pulumi import, so it is quick)."""
    if option in ("--allow-new-type", "--allow-reparent", "--help"):
        return
    done = triton_gke("plan-diff", "a.json", "b.json", option)
    assert one_line_refusal(done).startswith("error: triton-gke plan-diff: ")
