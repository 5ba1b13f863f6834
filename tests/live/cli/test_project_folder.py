"""The project a command or a program acts on is the Pulumi project folder, never the package's own folder.

For the CLI the current folder (as for `pulumi` itself), for a program the folder the engine runs it in (its working
directory: contracts/paths.py project_dir). Stack files, build/model_repository, build/plan, the sandbox lock and
the bench outputs are found there; the settings' schema stays the package's Pulumi.yaml. Here the package is this
checkout's editable install, so every project below is a folder of its own with a stack only it has (`mine`):
read from the package's folder, it would not be found. tests/live/triton_gke/test_package.py checks the same
from a wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stacks import stack_settings
from tests.unit.settings.test_project_dir import REPO
from triton_gke.one_line import MAKE_TARGET_ENV

TRITON_GKE = Path(sys.executable).parent / "triton-gke"


BUILT = REPO / "build" / "model_repository"


needs_built_models = pytest.mark.skipif(
    not (BUILT / ".model_repo.json").is_file(), reason="needs `make model-repo STACK=dev` (build/model_repository)"
)


SYSTEM_WITH_OWN_FOLDER = """
import sys
import pulumi
from triton_gke import TritonGkeSystem, TritonGkeSystemArgs
from triton_gke.infra.config import load_stack_settings

system = TritonGkeSystem(
    "triton-gke",
    TritonGkeSystemArgs(settings=load_stack_settings(), python=sys.executable, model_repository_dir=sys.argv[0]),
)
pulumi.export("model_repository", system.model_repository)
"""


def env() -> dict[str, str]:
    """Our environment without what an enclosing `make test` exports (a make target changes the hints)."""
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", MAKE_TARGET_ENV)
    return {k: v for k, v in os.environ.items() if k not in leaks}


def triton_gke(cwd: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TRITON_GKE), *words], cwd=cwd, env=env(), capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder of its own: the stack program and a stack file only it has (Pulumi.mine.yaml, dev's)."""
    folder = tmp_path / "my-project"
    folder.mkdir()
    (folder / "Pulumi.mine.yaml").write_text((REPO / "Pulumi.dev.yaml").read_text())
    shutil.copy(REPO / "__main__.py", folder)
    return folder


def test_plan_reads_the_current_folders_stack_and_its_hint_names_the_console_script(project: Path) -> None:
    done = triton_gke(project, "plan", "--stack", "mine")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    # The stack file was found (no "no such stack file"); what is missing is the project's own build.
    assert line == (
        "error: build/model_repository: no model repository built; run `triton-gke model-repo --stack mine` first"
    ), line


@needs_built_models
def test_the_system_uploads_and_plans_into_the_current_folders_build(project: Path) -> None:
    (project / "build").mkdir()
    (project / "build" / "model_repository").symlink_to(BUILT)
    done = triton_gke(project, "plan", "--stack", "mine", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    sync = next(r for r in json.loads(done.stdout) if r["type"] == "command:local:Command" and "sync" in r["name"])
    assert " build/model_repository gs://" in sync["inputs"]["create"], sync["inputs"]["create"]
    assert (project / "build" / "plan" / "mine").is_dir()
    assert not (REPO / "build" / "plan" / "mine").exists()


@needs_built_models
def test_the_system_args_name_another_built_repository(project: Path) -> None:
    """TritonGkeSystemArgs.model_repository_dir: a repository built elsewhere, named by the program."""
    (project / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (project / "__main__.py").write_text(SYSTEM_WITH_OWN_FOLDER.replace("sys.argv[0]", repr(str(BUILT))))
    done = triton_gke(project, "plan-folder", str(project), "--stack", "mine", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    sync = next(r for r in plan["resources"] if r["type"] == "command:local:Command" and "sync" in r["name"])
    assert f" {BUILT} gs://" in sync["inputs"]["create"], sync["inputs"]["create"]
    project = stack_settings("dev")["gcp:project"]  # Pulumi.mine.yaml is dev's
    assert plan["outputs"]["model_repository"] == f"gs://{project}-mine-triton-models/models"


def test_a_bad_model_repository_dir_is_refused_in_one_line(project: Path) -> None:
    (project / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (project / "__main__.py").write_text(SYSTEM_WITH_OWN_FOLDER.replace("sys.argv[0]", "''"))
    done = triton_gke(project, "plan-folder", str(project), "--stack", "mine")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.endswith("model_repository_dir: '' is not valid; expected the built repository's path"), line
