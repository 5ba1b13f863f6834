"""Every command the README and the pages of docs/ show works when pasted: run verbatim with `bash -c` from the
root of a copy of the project (a folder of this module's own) and checked for its exit code and what the documents
say it prints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.project_folder import own_tmpdir
from tests.unit.docs.test_readme import (
    RUN,
    Example,
    Result,
    documented_examples,
)

TIMEOUT_S = 600


def promised_pattern(line: str) -> re.Pattern[str]:
    """A promised output line as a whole-line pattern; `...` is any text."""
    return re.compile("^" + ".*".join(re.escape(part) for part in line.split("...")) + "$")


def make_env() -> dict[str, str]:
    """Our environment without what an enclosing `make test ARGS=...` exports, which would leak into the command."""
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    return {k: v for k, v in os.environ.items() if k not in leaks}


def pasted_env(cwd: Path) -> dict[str, str]:
    env = make_env()
    if cwd.resolve() != PROJECT_DIR.resolve():  # a project copy: its own triton_gke/, not the checkout's
        env["PYTHONPATH"] = str(cwd)
        # ... and its own $TMPDIR: the run folders of its sandbox, and the orphaned ones it removes, are its own.
        env |= own_tmpdir(cwd / COPY_TMP)
    return env


def run_pasted(command: str, cwd: Path = PROJECT_DIR) -> Result:
    """The command as pasted into bash in the project root; output interleaved as on a terminal."""
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=pasted_env(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT_S,
    )
    return Result(done.returncode, done.stdout, folder=cwd)


def run_split(command: str, cwd: Path = PROJECT_DIR) -> Result:
    """As run_pasted, with stdout alone kept apart (for output meant to be piped)."""
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=pasted_env(cwd), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    return Result(done.returncode, done.stdout + done.stderr, stdout=done.stdout, folder=cwd)


# Commands whose stdout must be kept apart from stderr to check it.
STDOUT_APART = {
    "make plan STACK=prod ARGS=--json",
    ".venv/bin/triton-gke plan-folder examples/on-cluster-python --json",
    ".venv/bin/triton-gke provider --schema",
}


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return documented_examples()


# Commands that read what an earlier one wrote: run in the documents' order, one after the other.
IN_ORDER = "applied-dev.json"


@pytest.fixture(scope="module")
def readme_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the README's commands run: a copy of the project of this module's own (copy_project). `make sandbox`
    takes the one-run-per-checkout lock and rebuilds build/model_repository*, the plans write build/plan/<stack> and
    build/applied-dev.json: here none of that is the checkout's, which tests running beside this one use."""
    return copy_project(tmp_path_factory.mktemp("readme") / "project")


@pytest.fixture(scope="module")
def results(examples: list[Example], readme_project: Path) -> dict[str, Result]:
    """Each runnable README command run once (a command shown twice is run once), two at a time: they are
    independent processes (a build of the copy's model repository is locked, model_repo/build.py), except the
    ones that read an earlier one's file (IN_ORDER), which run in order in one lane."""
    commands: dict[str, str] = {}
    for example in examples:
        if example.key in RUN:
            commands.setdefault(example.key, example.command)

    def run(key: str) -> Result:
        return (run_split if key in STDOUT_APART else run_pasted)(commands[key], readme_project)

    chained = [key for key in commands if IN_ORDER in key]
    with ThreadPoolExecutor(2) as pool:
        chain = pool.submit(lambda: {key: run(key) for key in chained})
        rest = {key: pool.submit(run, key) for key in commands if key not in chained}
        return {**chain.result(), **{key: future.result() for key, future in rest.items()}}


@pytest.mark.parametrize("key", sorted(RUN))
def test_readme_command_works_when_pasted(key: str, examples: list[Example], results: dict[str, Result]) -> None:
    if key not in results:
        pytest.fail(f"{key!r} is not in any document any more")
    result = results[key]
    assert "Traceback" not in result.output, result.output
    RUN[key](result)
    for example in (e for e in examples if e.key == key and e.promised):
        output = result.output.splitlines()
        assert len(output) == len(example.promised), (
            f"{example.where} promises:\n" + "\n".join(example.promised) + f"\ngot:\n{result.output}"
        )
        for got, promised in zip(output, example.promised, strict=True):
            assert promised_pattern(promised).match(got), f"{example.where}: {got!r} vs {promised!r}"


def test_the_refused_plan_exits_2_naming_the_key(results: dict[str, Result]) -> None:
    """The README: 'refused ... in one line naming the key, the value and what is allowed, exit code 2'."""
    result = results["make plan ARGS='--set regions=[\"europe-north1\"]'"]
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "triton-gke:regions" in errors[0] and "'europe-north1'" in errors[0]
    assert result.output.rstrip().endswith("Error 2")  # make's report of the program's exit code 2
    assert result.returncode == 2


def test_an_unreachable_target_exits_2_naming_both_keys(results: dict[str, Result]) -> None:
    """README, Sizing a stack from a target: 'refuses in one line naming both keys and the count needed'."""
    result = results["make plan STACK=staging ARGS='--set targetRps=1000'"]
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "triton-gke:gpuMaxNodes" in errors[0] and "triton-gke:targetRps=1000" in errors[0]
    assert "needs 5" in errors[0]
    assert result.returncode == 2


# --- the rebuild hint, pasted ----------------------------------------------------------------------------------
COPY_TMP = Path("build") / "tmp"  # a copy's $TMPDIR: in its own build/, which nothing the commands read lists


HINT = re.compile(r"run `(make model-repo [^`]+)` first")


_NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", ".hypothesis", ".pytest_cache", "results")


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """The project in a folder of its own, so flipping its build/model_repository races with no other test run."""
    return copy_project(tmp_path / "project")


def copy_project(copy: Path) -> Path:
    """The project's files (not .git, build/, results) in `copy`, with a build/ of its own.

    The venv and the model cache (content-addressed, checked on reuse) are shared through symlinks.
    """
    shutil.copytree(PROJECT_DIR, copy, ignore=_NOT_COPIED, symlinks=True)
    (copy / ".venv").symlink_to(PROJECT_DIR / ".venv")
    # The shared venv is the checkout's, never the copy's: make's setup target reinstalls when a requirements file or
    # pyproject.toml is newer than .venv/.installed, and in the copy it would repoint the shared venv's editable install
    # and console scripts at this temporary folder (it did, after pyproject.toml changed: the checkout's
    # .venv/bin/triton-gke then ran a deleted copy's python). A copied input newer than the marker takes the
    # marker's time, in nanoseconds: a float time rounds up past it, and make then saw the copy's inputs as newer.
    marker = PROJECT_DIR / ".venv" / ".installed"
    if marker.exists():
        installed_ns = marker.stat().st_mtime_ns
        for name in ("requirements.txt", "requirements-nodeps.txt", "constraints.txt", "pyproject.toml"):
            if (copy / name).stat().st_mtime_ns > installed_ns:
                os.utime(copy / name, ns=(installed_ns, installed_ns))
    (copy / "build").mkdir()
    (PROJECT_DIR / "build" / "cache").mkdir(parents=True, exist_ok=True)
    (copy / "build" / "cache").symlink_to(PROJECT_DIR / "build" / "cache")
    # The shared venv's editable install puts this checkout on the path; pasted_env puts the copy first on
    # PYTHONPATH, so the copy runs its own code and writes its own build/.
    return copy


def test_model_settings_in_args_reach_the_model_repository_and_the_hint_pastes(project_copy: Path) -> None:
    """`make plan` builds the repository with its own --set; run directly, the plan's hint repeats the --set."""
    override = "--set modelMaxQueueDelayUs=12345"
    planned = run_pasted(f"make plan ARGS='{override}'", project_copy)
    assert planned.returncode == 0, planned.output
    assert "queue delay 12345 us" in planned.output  # the repository was built with the plan's override

    assert run_pasted("make model-repo STACK=dev", project_copy).returncode == 0  # the stack's own settings again
    refused = run_pasted(f".venv/bin/triton-gke plan --stack dev {override}", project_copy)
    assert refused.returncode == 2, refused.output
    hint = HINT.search(refused.output)
    assert hint, refused.output
    assert hint[1] == f"make model-repo STACK=dev ARGS='{override}'"
    rebuilt = run_pasted(hint[1], project_copy)
    assert rebuilt.returncode == 0 and "queue delay 12345 us" in rebuilt.output, rebuilt.output
    again = run_pasted(f".venv/bin/triton-gke plan --stack dev {override}", project_copy)
    assert again.returncode == 0, again.output
