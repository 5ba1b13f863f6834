"""An editor's static resolver finds the rooms: jedi, given only the project's virtualenv, resolves `triton_gke.<room>`
imports to the room's own files, as go-to-definition does in an editor.

Static resolvers read the path entries of a virtualenv's .pth files but cannot follow an import hook, which is how
setuptools' default editable install maps a package-dir layout (pylance-release TROUBLESHOOTING.md, "Editable
install modules not found"; pylance-release#5894). The rooms are now folders of triton_gke/ and the editable install
is one static path line, so a program outside the repository resolves them. jedi asks the virtualenv's interpreter
for its sys.path (a subprocess), hence a live test.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from pathlib import Path

import jedi
import pytest

from tests.support.checkout import PROJECT_DIR

PACKAGE = PROJECT_DIR / "triton_gke"
# Rooms with a module besides __init__.py (dashboards/ is JSON data: its __init__.py only makes it one module).
ROOMS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py") if len(list(p.parent.glob("*.py"))) > 1)


@pytest.fixture(scope="module")
def environment() -> jedi.api.environment.Environment:
    return jedi.create_environment(str(Path(sys.prefix)), safe=False)


def resolve(code: str, environment: jedi.api.environment.Environment, where: Path) -> list[Path]:
    """Where go-to-definition on the last name of `code` leads, as resolved files; `where` is the user's program."""
    where.mkdir(parents=True, exist_ok=True)
    project = jedi.Project(where, smart_sys_path=False)  # nothing of the repository on the path but the venv's own
    script = jedi.Script(code, path=where / "program.py", project=project, environment=environment)
    line = code.count("\n") + 1
    column = len(code.rsplit("\n", 1)[-1]) - 1
    names = script.goto(line, column, follow_imports=True)
    return [Path(name.module_path).resolve() for name in names if name.module_path]


def test_the_editable_install_is_one_plain_path_line() -> None:
    """`pip install --editable .` (make setup) writes the project folder as a path line, no `import` line (a hook)."""
    site = Path(sysconfig.get_paths()["purelib"])
    lines = [line for pth in site.glob("__editable__*triton_gke*.pth") for line in pth.read_text().splitlines()]
    assert [Path(line).resolve() for line in lines] == [PROJECT_DIR.resolve()], lines


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_resolves_to_its_folder(room: str, environment, tmp_path: Path) -> None:
    module = sorted(p.stem for p in (PACKAGE / room).glob("*.py") if p.stem != "__init__")[0]
    found = resolve(f"import triton_gke.{room}.{module}\ntriton_gke.{room}.{module}", environment, tmp_path)
    assert (PACKAGE / room / f"{module}.py").resolve() in found, found


@pytest.mark.parametrize("name", sorted(importlib.import_module("triton_gke")._PUBLIC))
def test_every_public_component_resolves_to_its_definition(name: str, environment, tmp_path: Path) -> None:
    """Both spellings a user writes: from the room's module and from the package (its TYPE_CHECKING imports)."""
    module = importlib.import_module("triton_gke")._PUBLIC[name]
    defined_in = (PROJECT_DIR / (module.replace(".", "/") + ".py")).resolve()
    assert resolve(f"from {module} import {name}\n{name}", environment, tmp_path / "direct") == [defined_in]
    assert resolve(f"from triton_gke import {name}\n{name}", environment, tmp_path / "package") == [defined_in]
