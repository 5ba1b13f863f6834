"""Check the rooms' import rules (.importlinter) with import-linter, over the package as it installs.

grimp, import-linter's graph builder, finds a package's modules by walking the package's folder; setuptools'
package-dir map (pyproject.toml) installs the rooms as triton_gke.<room> from folders beside triton_gke/, so the
walk would see none of them. This builds that installed view, a folder of links, and lints it.

    make lint   (it runs this module; --root DIR checks another checkout)
Exit 0 when every contract is kept, 1 when one is broken (import-linter's report names it and the import).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
PACKAGE = "triton_gke"


def package_dirs(root: Path) -> dict[str, Path]:
    """Each top-level subpackage of triton_gke and its folder, from pyproject.toml's package-dir map."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {name.split(".", 1)[1]: root / folder for name, folder in mapping.items() if name.count(".") == 1}


def installed_view(root: Path, into: Path) -> Path:
    """A folder holding triton_gke/ as the wheel lays it out, made of links to the repository's folders."""
    package = into / PACKAGE
    package.mkdir()
    (package / "__init__.py").symlink_to(root / PACKAGE / "__init__.py")
    for module in (root / PACKAGE).glob("*.py"):
        if module.name != "__init__.py":
            (package / module.name).symlink_to(module)
    for room, folder in package_dirs(root).items():
        (package / room).symlink_to(folder, target_is_directory=True)
    return into


def lint(root: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="triton-gke-imports-") as tmp:
        view = installed_view(root, Path(tmp))
        # The view first on the path, so grimp locates triton_gke there and not through the editable install.
        env = {**os.environ, "PYTHONPATH": str(view)}
        code = (
            "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports("
            f"config_filename={str(root / '.importlinter')!r}, no_cache=True, no_logo=True))"
        )
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make lint (import contracts)", description=__doc__)
    parser.add_argument("--root", type=Path, default=PROJECT_DIR, help="the repository to check (default: this one)")
    args = parser.parse_args(argv)
    return lint(args.root.resolve())


if __name__ == "__main__":
    sys.exit(main())
