"""triton_gke/one_name.py: a room imported through the checkout's top-level link is `triton_gke.<room>` itself.

The links are read from the checkout root, so a new one is covered; a room whose __init__.py lacks the call gives a
second module under its top-level name, and its case fails. Every test runs with its own copy of the finder's table
and sys.meta_path, and drops the top-level names it imported, so the rest of the session never sees them.
"""

from __future__ import annotations

import ast
import importlib
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke import one_name
from triton_gke.contracts.paths import PACKAGE_DIR

LINKS = sorted(p.name for p in PROJECT_DIR.iterdir() if p.is_symlink() and p.resolve().parent == PACKAGE_DIR)


def first_submodule(room: str) -> str | None:
    """A module of the room (its first plain module, else its first subpackage), None for a room of __init__ only."""
    folder = PACKAGE_DIR / room
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))
    packages = sorted(p.parent.name for p in folder.glob("*/__init__.py"))
    return next(iter(modules + packages), None)


@pytest.fixture(autouse=True)
def own_aliases(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, one_name._AliasFinder)])
    monkeypatch.setattr(one_name, "_ALIASED", {})
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.partition(".")[0] in LINKS:  # a top-level name (ours or a test's own package): never canonical
            del sys.modules[name]


def test_the_checkout_links_every_room() -> None:
    """The enumeration sees the links (a broken one would make every case below vacuous)."""
    assert {"infra", "settings", "contracts", "bench", "dashboards"} <= set(LINKS)


@pytest.mark.parametrize("room", LINKS)
def test_a_room_and_a_submodule_by_the_top_level_name_are_the_canonical_modules(room: str) -> None:
    canonical = importlib.import_module(f"triton_gke.{room}")
    assert importlib.import_module(room) is canonical, f"triton_gke/{room}/__init__.py must call one_name first"
    assert canonical.__spec__.name == f"triton_gke.{room}"
    sub = first_submodule(room)
    if sub is not None:
        aliased = importlib.import_module(f"{room}.{sub}")
        assert aliased is importlib.import_module(f"triton_gke.{room}.{sub}")
        assert aliased.__spec__.name == f"triton_gke.{room}.{sub}"  # the alias's spec is not left on it
        assert getattr(canonical, sub) is aliased


@pytest.mark.parametrize("room", LINKS)
def test_each_room_calls_one_name_first_and_defines_nothing_else(room: str) -> None:
    """Under a top-level name the rest of __init__.py still runs, in a module then dropped (one_name's docstring):
    harmless only while it is imports of the room's own modules and __all__."""
    body = ast.parse((PACKAGE_DIR / room / "__init__.py").read_text(encoding="utf-8")).body
    body = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]  # docstring
    body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    assert [ast.unparse(n) for n in body[:2]] == ["from triton_gke.one_name import one_name", "one_name(__name__)"]
    for node in body[2:]:
        own_import = isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"triton_gke.{room}.")
        exports = isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]
        assert own_import or exports, ast.unparse(node)


def test_a_missing_submodule_is_missing_under_the_name_asked() -> None:
    importlib.import_module("infra")
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("infra.no_such_module")
    assert caught.value.name == "infra.no_such_module"


def test_a_users_own_package_of_a_room_name_is_not_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only names a room was imported under are mapped: `infra` aliased, the user's own `settings` stays theirs."""
    (tmp_path / "settings").mkdir()
    (tmp_path / "settings" / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "settings" / "local.py").write_text("MINE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.import_module("infra") is importlib.import_module("triton_gke.infra")
    assert importlib.import_module("settings").MINE and importlib.import_module("settings.local").MINE
    assert one_name._FINDER.find_spec("settings.stack") is None


def test_python_m_under_the_top_level_name_runs_the_canonical_code() -> None:
    """runpy (python -m) asks the finder's loader for code: the canonical module's, from its own file. The command
    lines of stacks deployed before the package existed run `python -m infra.neg_cleanup` (docs/deploying.md)."""
    importlib.import_module("contracts")
    ran = runpy.run_module("contracts.exit_codes", run_name="not_main")
    canonical = importlib.import_module("triton_gke.contracts.exit_codes")
    assert ran["__file__"] == canonical.__file__ and ran["EXIT_BAD_INPUT"] == canonical.EXIT_BAD_INPUT


def test_the_canonical_name_is_left_alone() -> None:
    one_name.one_name("triton_gke.infra")
    assert one_name._ALIASED == {} and one_name._FINDER not in sys.meta_path
    assert one_name.canonical_name("infra") == "triton_gke.infra"
