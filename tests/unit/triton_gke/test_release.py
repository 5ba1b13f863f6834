"""A package that looks kept (issues 33, 48): one static version every clone, archive and wheel reads, a changelog
whose newest release is that version, and the Apache-2.0 licence declared and shipped.

The version's one home is pyproject.toml's `[project] version` (static PEP 621 metadata: no git tag is needed, and a
clone has none). Its readers: the installed distribution's metadata (built from it), triton_gke.__version__ and
`triton-gke --version` (which read that metadata), the provider schema's version (triton_gke/schema.json, served to
Pulumi), CHANGELOG.md's newest dated release and the install lines of docs/library.md. `test_every_reader_agrees`
checks them all against the home; `test_a_changelog_bumped_alone_is_caught` shows the check catching such a mutant.
tests/live/triton_gke/test_release_clone.py builds the wheel in a fresh clone, which has no tags.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import re
import tomllib

import pytest
from packaging.version import Version

import triton_gke
from tests.support.checkout import PROJECT_DIR
from triton_gke import provider
from triton_gke.cli import main as cli

CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
LIBRARY = PROJECT_DIR / "docs" / "library.md"
# `@v0.3.0` (a git ref) and `triton_gke-0.3.0-py3-none-any.whl` (a wheel's name).
PINNED = re.compile(r"@v(?P<version>\d+\.\d+\.\d+)\b|triton_gke-(?P<wheel>\d+\.\d+\.\d+)-py3")
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$", re.M)


def pyproject() -> dict:
    return tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))


def static_version() -> str:
    """The home: pyproject.toml's [project] version."""
    return pyproject()["project"]["version"]


def releases(text: str) -> list[tuple[str, str | None]]:
    """The changelog's `## [VERSION] - DATE` headings in order (Unreleased has no date)."""
    return [(m["version"], m["date"]) for m in RELEASE.finditer(text)]


def newest_release(text: str) -> str:
    return next(version for version, _ in releases(text) if version != "Unreleased")


def console_version() -> str:
    """What `triton-gke --version` prints, run in-process (the dispatcher answers before importing any command)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["--version"]) == 0
    return out.getvalue().removeprefix("triton-gke ").strip()


def disagreements(version: str, readers: dict[str, str | set[str]]) -> list[str]:
    """The readers whose version is not `version` (a reader that names several, as the docs do, must name only it)."""
    wrong = []
    for name, found in readers.items():
        if found != ({version} if isinstance(found, set) else version):
            wrong.append(f"{name} says {sorted(found) if isinstance(found, set) else found}")
    return wrong


def readers(changelog: str, library: str, schema: dict) -> dict[str, str | set[str]]:
    """Every place the version is read, as it reads it (the schema's semver turned back into the release's X.Y.Z)."""
    return {
        "the installed metadata (make setup)": importlib.metadata.version("triton-gke"),
        "triton_gke.__version__": triton_gke.__version__,
        "triton-gke --version": console_version(),
        # Served as semver (provider.pulumi_version); X.Y.Z and -dev.N read back as PEP 440.
        "triton_gke/schema.json": str(Version(schema["version"])) if "version" in schema else "none",
        "CHANGELOG.md's newest dated release": newest_release(changelog),
        "docs/library.md's install lines": {m["version"] or m["wheel"] for m in PINNED.finditer(library)},
    }


def _committed() -> tuple[str, str, dict]:
    return (
        CHANGELOG.read_text(encoding="utf-8"),
        LIBRARY.read_text(encoding="utf-8"),
        json.loads(provider.SCHEMA_FILE.read_text(encoding="utf-8")),
    )


def test_the_version_is_static_and_needs_no_git_tag() -> None:
    project = pyproject()
    assert Version(project["project"]["version"]) and "version" not in project["project"].get("dynamic", [])
    assert "setuptools_scm" not in project.get("tool", {}), "no tag-derived version beside the static one"
    requires = project["build-system"]["requires"]
    assert all("==" in requirement for requirement in requires), "every build requirement pinned"
    assert not any(r.startswith(("setuptools-scm", "setuptools_scm")) for r in requires)


def test_every_reader_agrees_with_the_static_version() -> None:
    """An installed metadata that disagrees means the virtualenv predates pyproject.toml: `make setup` installs again
    (its stamp depends on pyproject.toml)."""
    version = static_version()
    changelog, library, schema = _committed()
    assert disagreements(version, readers(changelog, library, schema)) == [], f"pyproject.toml says {version}"
    assert json.loads(provider.SCHEMA_FILE.read_text(encoding="utf-8"))["version"] == provider.pulumi_version(version)


def test_a_changelog_bumped_alone_is_caught() -> None:
    """The mutant the issue names: a release heading added to CHANGELOG.md without bumping pyproject.toml."""
    changelog, library, schema = _committed()
    bumped = Version(static_version())
    heading = f"## [{bumped.major}.{bumped.minor + 1}.0] - 2099-01-01\n\n"
    mutant = changelog.replace("## [Unreleased]\n", "## [Unreleased]\n\n" + heading, 1)
    assert newest_release(mutant) != static_version()
    found = disagreements(static_version(), readers(mutant, library, schema))
    assert found == [f"CHANGELOG.md's newest dated release says {bumped.major}.{bumped.minor + 1}.0"], found


def test_the_version_is_the_installed_distributions_or_names_itself_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the provider reports to Pulumi (GetPluginInfo, the served schema) is the version pip installed; a tree
    imported without being installed says so instead of inventing one."""
    assert triton_gke.__version__ == importlib.metadata.version("triton-gke")

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert triton_gke._installed_version() == "0+unknown"


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
