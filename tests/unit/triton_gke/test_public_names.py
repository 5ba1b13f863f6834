"""The package's public names: __all__ and the TYPE_CHECKING imports editors read are the lazy table, exactly."""

from __future__ import annotations

import ast

import triton_gke
from tests.support.checkout import PROJECT_DIR


def test_all_lists_exactly_the_public_components() -> None:
    assert triton_gke.__all__ == ["__version__", *sorted(triton_gke._PUBLIC)]


def test_the_editor_imports_name_every_public_component_from_its_module() -> None:
    tree = ast.parse((PROJECT_DIR / "triton_gke" / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imports = [node for node in guarded.body if isinstance(node, ast.ImportFrom)]
    spelled = {alias.name: node.module for node in imports for alias in node.names}
    assert spelled == triton_gke._PUBLIC


def test_only_this_checkout_counts_as_one(tmp_path, monkeypatch) -> None:
    """A user's project with its own Makefile and pyproject.toml and the package vendored beside them (`pip install
    --target .`) is no checkout: commands must not write into the package there (red team)."""
    from triton_gke.contracts import paths

    assert paths.checkout_dir() == PROJECT_DIR.resolve()
    vendored = tmp_path / "triton_gke"
    (vendored / "infra").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        (tmp_path / name).write_text("")
    monkeypatch.setattr(paths, "IMPORT_ROOT", tmp_path)
    monkeypatch.setattr(paths, "PACKAGE_DIR", vendored)
    assert paths.checkout_dir() is None
    (tmp_path / "infra").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert paths.checkout_dir() is None  # a link, but not into this package
