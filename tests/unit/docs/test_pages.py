"""The documentation site builds cleanly, and every page stays short enough to read.

`mkdocs build --strict` (mkdocs.yml: Material theme, `strict: true`, every link and nav check raised to a warning)
into a temporary folder: any warning fails the build, so a broken link, a missing anchor or a page left out of
`nav` fails this test. Pages: at most 300 lines each, the README at most 200 (issue 22).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

PROJECT_DIR = Path(__file__).resolve().parent.parent
DOCS = PROJECT_DIR / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_MAX_LINES = 200
PAGE_MAX_LINES = 300


class _Loader(yaml.SafeLoader):
    """mkdocs.yml as text: its `!!python/name:` tags (Material's mermaid fence) read as plain strings."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: loader.construct_scalar(node))


def _config() -> dict:
    return yaml.load((PROJECT_DIR / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506


def _nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_site_builds_strictly_without_a_warning(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, not a build warning
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    for page in _nav_pages(_config()["nav"]):
        assert (tmp_path / "site" / Path(page).with_suffix("") / "index.html").is_file() or page == "index.md", page


def test_the_configuration_is_strict_material_over_docs() -> None:
    config = _config()
    assert config["strict"] is True
    assert config["docs_dir"] == "docs"
    assert config["theme"]["name"] == "material"


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(_nav_pages(_config()["nav"])) == pages


@pytest.mark.parametrize("page", sorted(str(path.relative_to(PROJECT_DIR)) for path in DOCS.rglob("*.md")))
def test_each_page_is_at_most_300_lines(page: str) -> None:
    lines = len((PROJECT_DIR / page).read_text(encoding="utf-8").splitlines())
    assert lines <= PAGE_MAX_LINES, f"{page}: {lines} lines"


def test_the_readme_is_at_most_200_lines() -> None:
    lines = len((PROJECT_DIR / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md: {lines} lines"


def test_bench_readme_is_at_most_300_lines() -> None:
    lines = len((PROJECT_DIR / "bench" / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= PAGE_MAX_LINES, f"bench/README.md: {lines} lines"
