"""Every documentation page stays short enough to read: at most 300 lines, the README at most 200."""

from __future__ import annotations

import pytest
import yaml

from tests.support.checkout import PROJECT_DIR

DOCS = PROJECT_DIR / "docs"


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
