"""Test helpers live in tests/support/ (or are fixtures): no test file imports anything from tests/conftest.py.

conftest.py is pytest's: its hooks, fixtures and global setup (tests/conftest.py). A helper imported from it ties
every importer to that file's import-time side effects and makes it a second home for helpers.
"""

from __future__ import annotations

import ast

import pytest

from tests.support.checkout import PROJECT_DIR

TESTS_DIR = PROJECT_DIR / "tests"


def conftest_imports(source: str) -> list[str]:
    """The import statements of `source` that reach a conftest module, as `line N`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # `from tests.conftest import x`, `from tests import conftest`
            names = [f"{node.module or ''}.{alias.name}" for alias in node.names] + [node.module or ""]
        else:
            continue
        if any("conftest" in name.split(".") for name in names):
            found.append(f"line {node.lineno}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from tests.conftest import PROJECT_DIR",
        "from tests import conftest",
        "import tests.conftest",
        "from . import conftest",
        "from ..conftest import evaluate",
        "def f():\n    from tests.conftest import evaluate\n",
    ],
)
def test_each_way_of_importing_conftest_is_seen(source: str) -> None:
    assert conftest_imports(source), source


def test_helpers_are_not_conftests() -> None:
    assert conftest_imports("from tests.support.stacks import evaluate\nimport conftest_like") == []


def test_no_test_file_imports_from_a_conftest() -> None:
    files = sorted(TESTS_DIR.rglob("*.py"))
    assert len(files) > 100  # the whole tree is read
    offenders = {
        str(path.relative_to(PROJECT_DIR)): lines
        for path in files
        if path.name != "conftest.py" and (lines := conftest_imports(path.read_text(encoding="utf-8")))
    }
    assert not offenders, f"import helpers from tests/support/ (or use a fixture), not conftest.py: {offenders}"
