"""The wheel ships every package of triton_gke: pyproject.toml lists them one by one (package-dir maps the checkout
root), so a new sub-package that is not listed installs without its files. Fresh-clone run of 3f9ce76: the metric
registry (bench/metrics/registry/) was missing from the list and every installed `triton-gke bench` failed to import."""

from __future__ import annotations

import tomllib

from tests.support.checkout import PROJECT_DIR

NOT_SHIPPED = {"triton_gke.plugin"}  # pyproject.toml's package-data comment: the plugin folder installs the repository


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(PROJECT_DIR).parts)
        for init in (PROJECT_DIR / "triton_gke").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - NOT_SHIPPED == listed, (sorted(found - listed), sorted(listed - found))
