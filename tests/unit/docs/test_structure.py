"""docs/architecture.md's structure block is the package as its imports make it: current, no cycle, nothing upward."""

from __future__ import annotations

from tests.support import structure


def test_the_documented_structure_is_current() -> None:
    document = structure.DOC.read_text(encoding="utf-8")
    assert structure.with_block(document, structure.render(structure.measure())) == document, (
        "docs/architecture.md's structure block is stale: run .venv/bin/python -m tests.support.structure --write"
    )


def test_no_import_cycle_and_no_upward_arrow() -> None:
    measured = structure.measure()
    assert measured.cycles == ()
    assert measured.upward == []
    assert {"infra", "k8s", "model_repo", "contracts", "cli"} <= set(measured.floors)  # the rooms are seen


def test_a_loop_between_two_modules_is_found() -> None:
    """The cycle finder on a graph of its own: a -> b -> c -> a and d -> a give one cycle of three."""
    import grimp

    g = grimp.ImportGraph()
    for module in ("p.a", "p.b", "p.c", "p.d"):
        g.add_module(module)
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")):
        g.add_import(importer=importer, imported=imported)
    assert structure.module_cycles(g) == (("p.a", "p.b", "p.c"),)
