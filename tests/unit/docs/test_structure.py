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
    assert measured.unlayered == ["__init__"]  # the package's root re-exports; every room sits in a layer
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


def test_an_arrow_against_the_layers_is_counted() -> None:
    """settings (a lower layer) importing bench (a higher one), and two siblings of one layer, are both upward."""
    measured = structure.measure()
    arrows = dict(measured.arrows) | {"settings": ("bench",), "capacity": ("model_repo",)}
    bent = structure.Structure(measured.floors, arrows, measured.lines, measured.cycles, measured.layers)
    assert sorted(bent.upward) == [("capacity", "model_repo"), ("settings", "bench")]


def test_every_room_name_is_banned_as_a_top_level_import() -> None:
    """The top-level room folders are links, and the project folder is on the path: `from bench.runners import
    runner` is the same module (triton_gke/one_name.py) but one import-linter cannot see and the wheel lacks. ruff's
    banned-api refuses each room's bare name."""
    import tomllib

    banned = tomllib.loads((structure.PROJECT_DIR / "pyproject.toml").read_text())["tool"]["ruff"]["lint"][
        "flake8-tidy-imports"
    ]["banned-api"]
    package = structure.PROJECT_DIR / "triton_gke"
    rooms = {p.name for p in package.iterdir() if p.is_dir() and (structure.PROJECT_DIR / p.name).is_symlink()}
    assert rooms and set(banned) == rooms
