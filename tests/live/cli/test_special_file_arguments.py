"""Special files and empty paths on real command lines: a FIFO or /dev/zero as --config-file or results.json is
refused in one line before a byte is read; make bench is refused --set/--config-file before model-repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.offline import make_args
from triton_gke.one_line import MAKE_TARGET_ENV


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


def test_an_empty_config_file_path_says_empty_path() -> None:
    line = _one_line(_triton_gke("plan", "--config-file", ""))
    assert line == "error: triton-gke plan: argument --config-file: empty path; name a file (see --help)"
    under_make = _one_line(_triton_gke("plan", "--config-file", "", make_target="plan"))  # as make_args runs it
    assert under_make == "error: make plan: argument --config-file: empty path; name a file (see make plan ARGS=--help)"


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_bench_record_refuses_special_results(special: str, fifo: Path) -> None:
    path = str(fifo) if special == "fifo" else special
    line = _one_line(_python("triton_gke.bench.reports.record", path))
    assert line.startswith(f"error: {path}: ") and "not a regular file" in line


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
