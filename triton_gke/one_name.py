"""One import name per module: a room imported through its top-level link IS `triton_gke.<room>`.

The checkout root holds links `infra/ -> triton_gke/infra/` (and one per room) because the layout asks for
top-level folders, and the editable install puts the checkout on sys.path. Without this module `import infra` would
execute triton_gke/infra/__init__.py a second time as a new module named `infra`: a second, unequal copy of every
class, constant and registry in it (`infra.config.ConfigError` not caught by `except triton_gke.infra.config...`).

Each room's __init__.py calls `one_name(__name__)` first. Under its own name that does nothing. Under a top-level
name it imports the canonical package, puts it in sys.modules under the top-level name, which is what the `import`
statement then returns (see one_name), and maps that name's submodules (`import infra.config`, `python -m
infra.neg_cleanup`) onto the canonical ones through a finder at the front of sys.meta_path. Only names a room was
already imported under are mapped: a user's own package called `settings` is never taken over unless our settings
was imported as `settings` first.

Standard library only, below every room (`.importlinter`): contracts/ calls it too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

PACKAGE = __name__.rpartition(".")[0]  # "triton_gke"

# Top-level name -> the canonical package it stands for ("infra" -> "triton_gke.infra"), for the rooms imported
# under their top-level name in this process (one_name adds them). The finder maps these and nothing else.
_ALIASED: dict[str, str] = {}


def canonical_name(name: str) -> str:
    """The package's own name for a room imported as `name`: `infra` -> `triton_gke.infra`; a canonical name is its
    own. Only the top-level links are aliases, so an alias has no dot."""
    return name if name.startswith(f"{PACKAGE}.") else f"{PACKAGE}.{name}"


def one_name(name: str) -> None:
    """Called first in each room's __init__.py with its `__name__`: make the module being imported under `name`
    the canonical `triton_gke.<room>`.

    The import statement returns sys.modules[name] as it is after the __init__.py ran, not the module it created:
    CPython 3.11 importlib/_bootstrap.py _load_unlocked, "Move the module to the end of sys.modules. We don't ensure
    that the import-related module attributes get set in the sys.modules replacement case": `module =
    sys.modules.pop(spec.name)` after exec_module. The rest of the aliased __init__.py still runs, in the module
    that is dropped; rooms' __init__.py files only import canonical names and define nothing, so that makes no
    second copy of anything.
    """
    canonical = canonical_name(name)
    if canonical == name:
        return
    sys.modules[name] = importlib.import_module(canonical)
    _ALIASED[name] = canonical
    if _FINDER not in sys.meta_path:
        # First: before the path finder, which would find the link's file and execute it again under the alias.
        sys.meta_path.insert(0, _FINDER)


class _AliasLoader(importlib.abc.Loader):
    """Loads `infra.config` as the canonical `triton_gke.infra.config`: importing it, never executing it anew."""

    def __init__(self, canonical: importlib.machinery.ModuleSpec) -> None:
        self.canonical = canonical
        self.own_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.canonical.name)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # module_from_spec has just set the alias's spec on the canonical module (_bootstrap.py _init_module_attrs
        # sets __spec__ unconditionally, the other attributes only where missing): give its own back, which reload,
        # pickle and multiprocessing read.
        module.__spec__ = self.own_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """What runpy executes for `python -m infra.neg_cleanup` (the command line of stacks deployed before the
        package existed, docs/deploying.md): the canonical module's code, asked by its own name (a file loader
        refuses any other)."""
        loader = self.canonical.loader
        get_code = getattr(loader, "get_code", None)
        return get_code(self.canonical.name) if get_code else None


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds `ROOM.sub...` for an aliased ROOM as the canonical `triton_gke.ROOM.sub...`; None for every other
    name, which the other finders then look up as usual."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top, dot, rest = fullname.partition(".")
        canonical_top = _ALIASED.get(top)
        if canonical_top is None:
            return None
        canonical = importlib.util.find_spec(canonical_top + dot + rest)
        if canonical is None:  # no such module: the alias's own ModuleNotFoundError names `infra.missing`
            return None
        is_package = canonical.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(canonical), origin=canonical.origin, is_package=is_package
        )


_FINDER = _AliasFinder()
