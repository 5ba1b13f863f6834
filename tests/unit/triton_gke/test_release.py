"""A package that looks kept (issue 33): one version everywhere, a changelog whose newest release is that version,
its annotated tag, and the Apache-2.0 licence declared and shipped.

The version stays static in pyproject.toml rather than derived from git tags (setuptools-scm): the provider's schema
carries the version (triton_gke/schema.json, committed and checked against what the provider infers), so a version
that changed with every commit after a tag would change the committed schema with every commit, and a clone without
tags would build a different one. These tests hold the static version to the changelog, and
tests/live/triton_gke/test_release_tag.py to its git tag.
"""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from packaging.version import Version

import triton_gke
from tests.conftest import PROJECT_DIR

CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$", re.M)


def pyproject() -> dict:
    return tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))


def releases(text: str) -> list[tuple[str, str | None]]:
    """The changelog's `## [VERSION] - DATE` headings in order (Unreleased has no date)."""
    return [(m["version"], m["date"]) for m in RELEASE.finditer(text)]


def newest_release(text: str) -> str:
    return next(version for version, _ in releases(text) if version != "Unreleased")


def test_one_version_everywhere() -> None:
    version = pyproject()["project"]["version"]
    schema = json.loads((PROJECT_DIR / "triton_gke" / "schema.json").read_text(encoding="utf-8"))
    assert triton_gke.__version__ == version
    assert schema["version"] == version  # what `pulumi package add` stamps on the generated SDK
    assert newest_release(CHANGELOG.read_text(encoding="utf-8")) == version, "CHANGELOG.md's newest release"


def test_changelog_keeps_the_format() -> None:
    """Keep a Changelog: Unreleased first, then releases newest first, each with its date, none twice."""
    found = releases(CHANGELOG.read_text(encoding="utf-8"))
    assert found[0] == ("Unreleased", None)
    dated = found[1:]
    assert dated and all(date for _, date in dated), "every release has a date"
    versions = [Version(v) for v, _ in dated]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [date for _, date in dated]
    assert dates == sorted(dates, reverse=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("## [Unreleased]\n\n## [1.2.0] - 2027-01-02\n## [1.1.0] - 2026-12-01\n", "1.2.0"),
        ("## [Unreleased]\n- x\n## [0.3.0] - 2027-01-02\n", "0.3.0"),
    ],
)
def test_newest_release_reads_the_first_dated_heading(text: str, expected: str) -> None:
    assert newest_release(text) == expected


def test_licence_is_declared_and_is_the_apache_text() -> None:
    project = pyproject()["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (PROJECT_DIR / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
