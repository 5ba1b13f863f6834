"""A Pulumi project folder of a test's own: the stack program and stack files of this checkout, an empty build/.

The commands and the program act on the current folder (contracts/paths.py project_dir), so a test that rebuilds
build/model_repository with other settings (a Triton image tag, other models) does it in a folder of its own,
and a test running beside it (pytest-xdist) never reads a repository flipped under it. The model cache is
content-addressed and locked per build (model_repo/build.py), so it is shared through a link.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR

# What the program and `triton-gke` read from the project folder: the project and stack files, the program.
PROJECT_FILES = ("Pulumi.yaml", "__main__.py")


def make_project_folder(into: Path) -> Path:
    """into/, holding links to the project's files and stack files, and build/ with the shared model cache."""
    into.mkdir(parents=True, exist_ok=True)
    for path in [PROJECT_DIR / name for name in PROJECT_FILES] + sorted(PROJECT_DIR.glob("Pulumi.*.yaml")):
        (into / path.name).symlink_to(path)
    cache = PROJECT_DIR / "build" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (into / "build").mkdir()
    (into / "build" / "cache").symlink_to(cache, target_is_directory=True)
    return into


def own_tmpdir(into: Path) -> dict[str, str]:
    """TMPDIR=into (created), for a child's environment: the run folders it makes (sandbox/run_folder.py) and the
    orphaned ones it scans for and removes are then its own, never another test's in /tmp."""
    into.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(into)}


@pytest.fixture
def own_project_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder for this test: a project folder of its own (make_project_folder)."""
    folder = make_project_folder(tmp_path / "project")
    monkeypatch.chdir(folder)
    return folder
