"""The first `make setup` says what it is doing: a line on stderr before each of its steps (issue 33 part 4: it was
silent for several minutes). The recipe runs for real, with a stand-in for the virtualenv's python that records
each call instead of installing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR

FAKE_PYTHON = '#!/bin/sh\necho "called: python $*" >&2\n'


def test_each_setup_step_is_announced_before_it_runs(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(PROJECT_DIR), f"VENV={venv}", f"{venv}/.installed"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.stdout == "" and (venv / ".installed").is_file()
    assert lines[0].startswith(f"setup: {venv} with the pinned dependencies")
    steps = [line for line in lines if line.startswith("setup: ") and "/5 " in line]
    assert [s.split()[1] for s in steps] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert "several minutes the first time" in steps[2]
    calls = [line for line in lines if line.startswith("called: ")]
    assert calls == [
        "called: python -m pip install --quiet --upgrade pip==25.3",
        "called: python -m pip install --quiet -r requirements.txt -c constraints.txt",
        "called: python -m pip install --quiet --no-deps -r requirements-nodeps.txt",
        "called: python -m pip install --quiet --no-deps --editable .",
    ]
    for step, call in zip(steps[1:], calls, strict=True):  # each pip run comes right after its own line
        assert lines.index(call) == lines.index(step) + 1
    assert lines[-1] == "setup: done"
