"""The package's public names: __all__ and the TYPE_CHECKING imports editors read are the lazy table, exactly."""

from __future__ import annotations

import ast

import triton_gke
from tests.conftest import PROJECT_DIR


def test_all_lists_exactly_the_public_components() -> None:
    assert triton_gke.__all__ == ["__version__", *sorted(triton_gke._PUBLIC)]


def test_the_editor_imports_name_every_public_component_from_its_module() -> None:
    tree = ast.parse((PROJECT_DIR / "triton_gke" / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imports = [node for node in guarded.body if isinstance(node, ast.ImportFrom)]
    spelled = {alias.name: node.module for node in imports for alias in node.names}
    assert spelled == triton_gke._PUBLIC
