"""ARGS of the make targets through real GNU make on the real Makefile: make's command line -> the environment of
the recipe -> the program, exactly as typed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.unit.offline.test_make_args import TARGETS_WITH_ARGS, TRICKY, TRITON_GKE

PREREQUISITES = ("setup", ".venv/.installed", "model-repo", "system-packages")


def make_env(**extra: str) -> dict[str, str]:
    """The environment without what an enclosing `make test ARGS=...` exports (it would leak into the inner make)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return env | extra


@pytest.mark.parametrize("text", ['--set \'regions=["a"]', "--out dir\\"])
def test_unbalanced_args_get_one_line_and_exit_2(text: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.make_args", "--target", "plan", "--stack", TRITON_GKE, "plan"],
        cwd=PROJECT_DIR,
        env=make_env(ARGS=text),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ARGS: ")
    assert "Traceback" not in done.stderr


def test_empty_stack_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.make_args", "--target", "plan", "--stack", TRITON_GKE, "plan"],
        cwd=PROJECT_DIR,
        env=make_env(STACK=""),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (
        2,
        "error: STACK is empty; name a stack file Pulumi.<STACK>.yaml, e.g. STACK=dev\n",
    )


def _recorder(tmp_path: Path) -> Path:
    """A stand-in for the venv's python that records its argv and the ARGS and STACK it was given."""
    script = tmp_path / "python"
    seen = tmp_path / "seen.json"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        'record = {"argv": sys.argv[1:], "ARGS": os.environ.get("ARGS"), "STACK": os.environ.get("STACK"), '
        '"PY": sys.argv[0]}\n'
        f"open({str(seen)!r}, 'w').write(json.dumps(record))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _make(tmp_path: Path, target: str, *assignments: str) -> dict[str, Any]:
    recorder = _recorder(tmp_path)
    seen = tmp_path / "seen.json"
    seen.unlink(missing_ok=True)
    done = subprocess.run(
        # -o: the prerequisites (set-up, model repository, system packages) are not what is under test here.
        ["make", "--no-print-directory", *(f"-o{p}" for p in PREREQUISITES if p != target)]
        + [target, f"PY={recorder}", *assignments],
        cwd=PROJECT_DIR,
        env=make_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(seen.read_text())


@given(
    target=st.sampled_from(sorted(TARGETS_WITH_ARGS)),
    text=st.text(
        st.one_of(TRICKY, st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")), max_size=30
    ),
)
@example(target="plan", text="--set x=$(shell touch pwned) $$HOME `id` $HOME 'a b' [\"c\"] *")
@settings(max_examples=30, deadline=None)
def test_make_hands_args_to_the_program_exactly_as_typed(
    tmp_path_factory: pytest.TempPathFactory, target: str, text: str
) -> None:
    seen = _make(tmp_path_factory.mktemp("make"), target, f"ARGS={text}", "STACK=prod")
    # make drops leading whitespace (C isspace) from a variable's value, nothing else; splitting ignores it anyway.
    assert seen["ARGS"] == text.lstrip(" \t\n\v\f\r")
    assert seen["STACK"] == "prod"
    assert seen["argv"][:2] == ["-m", "triton_gke.offline.make_args"]
    expected = [str(seen["PY"]) if word == "{PY}" else word for word in TARGETS_WITH_ARGS[target]]
    assert seen["argv"][2:] == expected
