"""The component reference (docs/reference/) is what triton_gke.reference generates from the committed schema.

A changed Args regenerates triton_gke/schema.json (`triton-gke provider --write-schema`, checked by
tests/unit/triton_gke/test_provider.py); this test then fails until the pages are regenerated too:
`.venv/bin/python -m triton_gke.reference`.
"""

from __future__ import annotations

import copy

import yaml

from tests.support.checkout import PROJECT_DIR
from triton_gke import reference

PAGES = PROJECT_DIR / "docs" / "reference"
REGENERATE = "regenerate with `.venv/bin/python -m triton_gke.reference`"


def test_committed_pages_are_the_generated_ones() -> None:
    generated = reference.render(reference.committed_schema())
    committed = {path.name: path.read_text(encoding="utf-8") for path in PAGES.glob("*.md")}
    assert sorted(committed) == sorted(generated), REGENERATE
    drifted = [name for name in generated if committed[name] != generated[name]]
    assert drifted == [], REGENERATE


def test_every_schema_property_is_on_its_page() -> None:
    schema = reference.committed_schema()
    for token, resource in schema["resources"].items():
        page = (PAGES / reference.page_name(token)).read_text(encoding="utf-8")
        for name in [*resource["inputProperties"], *resource["properties"]]:
            row = f"| `{name}` | `{reference.snake_case(name)}` | `{reference.pascal_case(name)}` |"
            assert row in page, name
        for name in resource["requiredInputs"]:
            assert f"| `{name}` |" in page and "| yes |" in page


def test_a_schema_change_changes_the_pages() -> None:
    """The drift check can fail: an input renamed in the schema renders a different page."""
    schema = copy.deepcopy(reference.committed_schema())
    ((token, resource),) = schema["resources"].items()
    resource["inputProperties"]["minimumReplicas"] = resource["inputProperties"].pop("minReplicas")
    pages = reference.render(schema)
    assert (
        pages[reference.page_name(token)] != reference.render(reference.committed_schema())[reference.page_name(token)]
    )
    assert "`minimumReplicas`" in pages[reference.page_name(token)]


def test_types_defaults_and_casing_are_rendered() -> None:
    schema = {
        "name": "p",
        "version": "1.0.0",
        "resources": {
            "p:index:ThingOne": {
                "isComponent": True,
                "description": "A thing.",
                "inputProperties": {
                    "queueTimeTargetUs": {"type": "integer", "default": 5, "plain": True, "description": "a|b"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "shape": {"$ref": "#/types/p:index:Shape"},
                },
                "requiredInputs": ["shape"],
                "properties": {"out": {"type": "string", "secret": True}},
                "required": ["out"],
            }
        },
        "types": {"p:index:Shape": {"type": "string", "enum": [{"value": "round"}], "description": "A shape."}},
    }
    pages = reference.render(schema)
    page = pages["thing-one.md"]
    assert (
        "| `queueTimeTargetUs` | `queue_time_target_us` | `QueueTimeTargetUs` | integer | no | plain | `5` | a\\|b |"
        in page
    )
    assert "| `tags` | `tags` | `Tags` | list<string> | no |" in page
    assert "| `shape` | `shape` | `Shape` | `p:index:Shape` | yes |" not in page  # types are named by their last part
    assert "| `shape` | `shape` | `Shape` | `Shape` | yes |" in page
    assert "### Shape" in page and '- `"round"`' in page
    assert "| `out` | `out` | `Out` | string | yes | secret |" in page
    assert "[ThingOne](thing-one.md)" in pages["index.md"]


def test_pages_are_in_the_site_and_linked_from_the_library_page() -> None:
    nav = yaml.load((PROJECT_DIR / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)["nav"]
    listed = {page for section in nav for item in (section.values()) for page in _pages(item)}
    for path in PAGES.glob("*.md"):
        assert f"reference/{path.name}" in listed, path.name
    assert "(reference/index.md)" in (PROJECT_DIR / "docs" / "library.md").read_text(encoding="utf-8")


def _pages(item: object) -> list[str]:
    if isinstance(item, str):
        return [item]
    if isinstance(item, list):
        return [page for entry in item for page in _pages(entry)]
    if isinstance(item, dict):
        return [page for value in item.values() for page in _pages(value)]
    return []
