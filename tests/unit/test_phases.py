"""The two phases of `make test` (tests/support/phases.py, applied by tests/conftest.py's hooks): every test is in
exactly one, and QUIET names real tests."""

from __future__ import annotations

import ast

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.phases import LIVE_DIR, LONGEST_FILES, PHASES, QUIET, is_quiet, skipped_in_quiet_phase

MAKE_TEST_PHASES = ("not quiet", "live and quiet")


def test_every_quiet_entry_names_a_live_test_file_or_a_test_in_one() -> None:
    for key in QUIET:
        path, _, name = key.partition("::")
        source = PROJECT_DIR / path
        assert source.is_file() and LIVE_DIR in source.parents, f"QUIET names {path}, which is not a live test file"
        if name:
            defined = {
                node.name for node in ast.walk(ast.parse(source.read_text())) if isinstance(node, ast.FunctionDef)
            }
            assert name in defined, f"QUIET names {key}, but {path} defines no {name}"


def test_the_files_handed_out_first_exist() -> None:
    missing = [path for path in LONGEST_FILES if not (PROJECT_DIR / path).is_file()]
    assert not missing, f"LONGEST_FILES names files that are gone: {missing}"


def test_each_kind_of_test_is_in_exactly_one_phase_of_make_test() -> None:
    for live in (False, True):
        for quiet in (False, True) if live else (False,):
            phases = [phase for phase in MAKE_TEST_PHASES if PHASES[phase](live, quiet)]
            assert len(phases) == 1, (live, quiet, phases)


def test_a_quiet_file_marks_its_tests_and_parametrized_ones_but_not_a_file_of_a_longer_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert is_quiet("tests/live/sandbox/test_rollout.py::test_no_request_fails[rolling]")
    key = "tests/live/offline/test_plan.py::test_one"  # an entry naming one test of a file
    monkeypatch.setitem(QUIET, key, "a test of its own")
    assert is_quiet(f"{key}[case-1]") and is_quiet(key)
    assert not is_quiet(f"{key}_and_more")
    assert not is_quiet("tests/live/sandbox/test_rollout.py_copy::test_x")


def test_the_makefile_runs_the_two_phases_in_order() -> None:
    recipe = (PROJECT_DIR / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    ran = [phase for line in recipe.splitlines() for phase in MAKE_TEST_PHASES if f'-m "{phase}"' in line]
    assert ran == list(MAKE_TEST_PHASES), recipe


def test_the_quiet_phase_imports_only_the_files_holding_quiet_tests() -> None:
    def ignored(markexpr: str, path: str) -> bool:
        return bool(skipped_in_quiet_phase(PROJECT_DIR / path, markexpr))

    assert not ignored("live and quiet", "tests/live/sandbox/test_rollout.py")
    assert not ignored("live and quiet", "tests/live/bench/test_conditions.py")
    assert ignored("live and quiet", "tests/live/offline/test_plan_out.py")
    assert ignored("live and quiet", "tests/unit/test_phases.py")
    assert not ignored("live and quiet", "tests/live")  # folders are walked
    assert not ignored("not quiet", "tests/live/offline/test_plan_out.py")
