"""The newest release has its annotated git tag (issue 33): the version is derived from it (setuptools-scm), and
`pip install ...@vX.Y.Z` and `pulumi package add ...@vX.Y.Z` in docs/library.md name it. Runs git, so it lives under
tests/live/."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import PROJECT_DIR
from tests.unit.triton_gke.test_release import CHANGELOG, newest_release


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)


def test_the_release_has_its_annotated_tag() -> None:
    """v{version} is an annotated tag on a commit of this history. A clone without tags (a tarball, a shallow or
    single-branch clone, a submission that carries commits only) cannot show it: skipped there, not failed."""
    if shutil.which("git") is None or git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    if not git("tag", "--list").stdout.strip():
        pytest.skip("this clone has no tags")
    tag = f"v{newest_release(CHANGELOG.read_text(encoding='utf-8'))}"
    assert git("cat-file", "-t", tag).stdout.strip() == "tag", f"{tag}: missing, or a lightweight tag"
    assert git("merge-base", "--is-ancestor", f"{tag}^{{commit}}", "HEAD").returncode == 0, f"{tag} is not in HEAD"
