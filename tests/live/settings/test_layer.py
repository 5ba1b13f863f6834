"""The settings layer (settings/) imports no Pulumi: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

from tests.support.checkout import PROJECT_DIR


def test_the_settings_layer_imports_no_pulumi() -> None:
    """Every module of settings/, imported and used for every stack, leaves Pulumi unloaded."""
    modules = sorted(path.stem for path in (PROJECT_DIR / "settings").glob("*.py") if path.stem != "__init__")
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module('triton_gke.settings.' + name)\n"
        "from triton_gke import settings\n"
        "for stack in ('dev', 'staging', 'prod'): settings.from_stack_file(stack)\n"
        "loaded = sorted(m for m in sys.modules if m == 'pulumi' or m.startswith(('pulumi.', 'pulumi_')))\n"
        "print(loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
