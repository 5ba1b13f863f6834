"""The rooms' import rules (.importlinter, docs/architecture.md) hold, and an import that breaks one fails the lint.

The broken cases run on a copy of the repository's rooms, so nothing here edits the checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR
from triton_gke.offline.import_contracts import package_dirs


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.offline.import_contracts", "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def copy_of_rooms(into: Path) -> Path:
    """The package's sources, its pyproject.toml and .importlinter, without results, caches or data."""
    ignore = shutil.ignore_patterns("__pycache__", "results", "records", "data", "*.json", "*.csv", "*.png")
    for name in ("pyproject.toml", ".importlinter"):
        shutil.copy(PROJECT_DIR / name, into / name)
    shutil.copytree(PROJECT_DIR / "triton_gke", into / "triton_gke", ignore=ignore, symlinks=True)
    for folder in package_dirs(PROJECT_DIR).values():
        if folder.name != "triton_gke":
            shutil.copytree(folder, into / folder.name, ignore=ignore)
    return into


@pytest.fixture(scope="module")
def rooms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_of_rooms(tmp_path_factory.mktemp("rooms"))


def test_the_repository_keeps_every_import_contract() -> None:
    result = lint(PROJECT_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "module,line,contract",
    [
        # settings/ must stay Pulumi-free: `make plan` and the sandbox read settings without the engine.
        ("settings/values.py", "import pulumi", "never import Pulumi"),
        # a lower room importing a higher one: model_repo is below settings, contracts below everything.
        ("model_repo/build.py", "from triton_gke.settings import catalogue", "Rooms import only rooms below them"),
        ("contracts/triton.py", "from triton_gke.infra import cluster", "Rooms import only rooms below them"),
        # the locustfile ships alone into the Locust image: no other room may come with it.
        ("loadtest/arrivals.py", "from triton_gke.contracts import loadtest", "ship alone"),
    ],
)
def test_a_forbidden_import_breaks_the_lint(rooms: Path, module: str, line: str, contract: str) -> None:
    target = rooms / module
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
