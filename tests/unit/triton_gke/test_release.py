"""A package that looks kept (issue 33): the version derived from the release's git tag, a changelog whose newest
release the docs install, and the Apache-2.0 licence declared and shipped.

The version is not written in the source: setuptools-scm derives it from the newest tag vX.Y.Z when the package is
built (pyproject.toml [tool.setuptools_scm]), and triton_gke.__version__ reads the installed distribution's. The
committed provider schema (triton_gke/schema.json) therefore carries no version; the provider serves it with the
installed one. tests/live/triton_gke/test_package.py builds a tagged copy and checks the wheel's version, and
tests/live/triton_gke/test_release_tag.py the tag of the newest release in a clone that has tags.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from fnmatch import fnmatchcase

import pytest
from packaging.version import Version

import triton_gke
from tests.conftest import PROJECT_DIR

CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
LIBRARY = PROJECT_DIR / "docs" / "library.md"
# `@v0.3.0` (a git ref) and `triton_gke-0.3.0-py3-none-any.whl` (a wheel's name).
PINNED = re.compile(r"@v(?P<version>\d+\.\d+\.\d+)\b|triton_gke-(?P<wheel>\d+\.\d+\.\d+)-py3")
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$", re.M)


def pyproject() -> dict:
    return tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))


def releases(text: str) -> list[tuple[str, str | None]]:
    """The changelog's `## [VERSION] - DATE` headings in order (Unreleased has no date)."""
    return [(m["version"], m["date"]) for m in RELEASE.finditer(text)]


def newest_release(text: str) -> str:
    return next(version for version, _ in releases(text) if version != "Unreleased")


def counted_by_describe(tag: str, command: list[str]) -> bool:
    """Whether `git describe` with these --match/--exclude globs considers `tag` (git's wildmatch without a path
    separator in play: *, ? and [!...] as fnmatch reads them)."""
    matches = [command[i + 1] for i, word in enumerate(command) if word == "--match"]
    excludes = [command[i + 1] for i, word in enumerate(command) if word == "--exclude"]
    return any(fnmatchcase(tag, m) for m in matches) and not any(fnmatchcase(tag, e) for e in excludes)


@pytest.mark.parametrize(
    ("tag", "counted"),
    [
        ("v0.3.0", True),
        ("v10.20.30", True),
        ("v01.2.3", True),  # git cannot tell it from v1.2.3's intent; setuptools-scm reads 1.2.3
        ("v1.2", False),
        ("v1.2.3-rc1", False),  # broke the build (the regex refused what describe chose) before --exclude
        ("v1.2.3.4", False),
        ("v1.2.3+build", False),
        ("V1.2.3", False),
        ("1.2.3", False),
        ("issue-33", False),
        ("deploy-prod-2", False),  # became the version "2" before --match
        ("latest", False),
    ],
)
def test_only_release_tags_set_the_version(tag: str, counted: bool) -> None:
    scm = pyproject()["tool"]["setuptools_scm"]
    command = scm["scm"]["git"]["describe_command"]
    assert counted_by_describe(tag, command) is counted
    if counted:  # what describe chooses, the regex must read, or the build fails
        assert re.match(scm["tag"]["regex"], tag)["version"] == tag[1:]


def test_the_version_is_derived_from_annotated_release_tags_by_a_pinned_setuptools_scm() -> None:
    project = pyproject()
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    command = project["tool"]["setuptools_scm"]["scm"]["git"]["describe_command"]
    assert command[:2] == ["git", "describe"] and "--tags" not in command, "annotated tags only, as releases are"
    archival = (PROJECT_DIR / ".git_archival.txt").read_text(encoding="utf-8")
    globs = [f"{word}={command[i + 1]}" for i, word in enumerate(command) if word in ("--match", "--exclude")]
    assert f"describe-name: $Format:%(describe:{','.join(g[2:] for g in globs)})$" in archival, "git archive agrees"
    assert ".git_archival.txt export-subst" in (PROJECT_DIR / ".gitattributes").read_text(encoding="utf-8")
    requires = project["build-system"]["requires"]
    assert all("==" in requirement for requirement in requires), "every build requirement pinned"
    assert {r.split("==")[0] for r in requires} >= {"setuptools", "setuptools-scm", "vcs-versioning", "packaging"}


def test_the_version_is_the_installed_distributions_or_names_itself_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the provider reports to Pulumi (GetPluginInfo, the served schema) is the version pip installed; a tree
    imported without being installed says so instead of inventing one."""
    assert triton_gke.__version__ == importlib.metadata.version("triton-gke")

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert triton_gke._installed_version() == "0+unknown"


def test_the_docs_install_the_newest_release() -> None:
    """Every tag, wheel name or version the docs pin is the newest release in CHANGELOG.md (the tag a user fetches)."""
    release = newest_release(CHANGELOG.read_text(encoding="utf-8"))
    pinned = {m["version"] or m["wheel"] for m in PINNED.finditer(LIBRARY.read_text(encoding="utf-8"))}
    assert pinned == {release}, f"docs/library.md pins {sorted(pinned)}; CHANGELOG.md's newest release is {release}"


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
