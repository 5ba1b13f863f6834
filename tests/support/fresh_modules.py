"""A second, private copy of a module, executed after a test changed a home it reads (issue 45).

A reader binds a home's value when it is imported (`from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS`, a table
built from it), so changing the home under a module already imported shows nothing. fresh_copy executes the module's
source again into a new module object that sys.modules never sees: it reads the home as it is now, and every other
test keeps the imported module (its classes, its errors) untouched.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType


def fresh_copy(name: str) -> ModuleType:
    """A new module object run from `name`'s source, importing what it imports from sys.modules as usual."""
    # Imported first: dataclasses look a class's module up in sys.modules (string annotations) while the copy runs.
    importlib.import_module(name)
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
