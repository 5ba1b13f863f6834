"""The lowest room, contracts/, imports only the standard library: checked in a fresh interpreter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.support.checkout import PROJECT_DIR

PROJECT_PACKAGES = ("settings", "infra", "k8s", "model_repo", "observability", "loadtest", "policy", "offline")


PROJECT_PACKAGES += ("sandbox", "bench", "cli", "capacity")


# ---------------------------------------------------------------- the room itself
def test_contracts_import_only_the_standard_library() -> None:
    """The lowest room: every module, imported in a fresh interpreter, loads no project package and no Pulumi."""
    modules = sorted(p.stem for p in (PROJECT_DIR / "contracts").glob("*.py"))
    for path in (PROJECT_DIR / "contracts").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                sibling = name == "triton_gke.contracts" or name.startswith("triton_gke.contracts.")
                below = name == "triton_gke.one_name"  # the one module under contracts/ (.importlinter)
                assert top in sys.stdlib_module_names or top == "__future__" or sibling or below, (path.name, name)
    dotted = ["contracts" if m == "__init__" else f"contracts.{m}" for m in modules]
    code = (
        "import importlib, json, sys\n"
        f"for name in {dotted!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        "print(json.dumps(sorted({m.split('.')[1] for m in sys.modules if m.startswith('triton_gke.')})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    top_level, rooms = (set(json.loads(line)) for line in result.stdout.splitlines())
    assert rooms == {"contracts", "one_name"}, rooms  # `contracts` is triton_gke.contracts (one_name.py)
    loaded = top_level | rooms
    assert not loaded & set(PROJECT_PACKAGES), loaded & set(PROJECT_PACKAGES)
    assert not {m for m in loaded if m == "pulumi" or m.startswith("pulumi_")}
