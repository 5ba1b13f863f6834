"""The rooms' import rules (.importlinter, docs/architecture.md) hold, and an import that breaks one fails the lint.

The broken cases run on a copy of the repository's rooms, so nothing here edits the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """`make lint`'s import check, run in `root`: lint-imports reads root/.importlinter and, with root first on the
    path, walks root/triton_gke/ itself (the rooms are its folders: no view of links to build)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [str(LINT_IMPORTS), "--no-cache", "--no-logo"]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)


def copy_of_rooms(into: Path) -> Path:
    """The package's sources and .importlinter, without results, caches or data."""
    ignore = shutil.ignore_patterns("__pycache__", "results", "records", "data", "*.json", "*.csv", "*.png")
    shutil.copy(PROJECT_DIR / ".importlinter", into / ".importlinter")
    shutil.copytree(PROJECT_DIR / "triton_gke", into / "triton_gke", ignore=ignore, symlinks=True)
    return into


@pytest.fixture(scope="module")
def rooms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_of_rooms(tmp_path_factory.mktemp("rooms"))


def test_the_repository_keeps_every_import_contract() -> None:
    result = lint(PROJECT_DIR)
    assert "triton_gke.infra.cluster" in graph_modules(PROJECT_DIR)  # the rooms are seen, not an empty package
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "module,line,contract",
    [
        # settings/ must stay Pulumi-free: `make plan` and the sandbox read settings without the engine.
        ("settings/values.py", "import pulumi", "neither Pulumi nor its rooms"),
        # the sandbox runs Triton's own command line from contracts/, not the Pulumi components'.
        ("sandbox/run.py", "from triton_gke.k8s import triton", "neither Pulumi nor its rooms"),
        # a lower room importing a higher one: model_repo is below settings, contracts below everything.
        ("model_repo/build.py", "from triton_gke.settings import catalogue", "Rooms import only rooms below them"),
        ("contracts/triton.py", "from triton_gke.infra import cluster", "Rooms import only rooms below them"),
        ("contracts/paths.py", "from triton_gke.cli import one_line", "Rooms import only rooms below them"),
        # the bench measures without the Pulumi SDK: a GPU choice or cost from infra/ would bring it (issue 45).
        ("bench/metrics/cost.py", "from triton_gke.infra import gpu_choice", "bench imports neither Pulumi"),
        ("bench/runners/runner.py", "import pulumi", "bench imports neither Pulumi"),
        # the locustfile ships alone into the Locust image: no other room may come with it.
        ("loadtest/arrivals.py", "from triton_gke.contracts import loadtest", "ship alone"),
    ],
)
def test_a_forbidden_import_breaks_the_lint(rooms: Path, module: str, line: str, contract: str) -> None:
    target = rooms / "triton_gke" / module
    original = target.read_text()
    try:
        target.write_text(original + f"\n{line}  # added by the test\n")
        result = lint(rooms)
    finally:
        target.write_text(original)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout
    assert module.split("/")[0] in broken


def graph_modules(root: Path) -> set[str]:
    """The modules grimp (import-linter's graph builder) finds in root's triton_gke, as lint-imports builds it."""
    code = "import grimp, sys; print('\\n'.join(sorted(grimp.build_graph('triton_gke', cache_dir=None).modules)))"
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())
