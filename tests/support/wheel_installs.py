"""A wheel installed in a fresh virtualenv with only its declared ranges (no constraints file), by uv.

Two resolutions: "highest", what `pip install WHEEL` gives a user today, and "lowest-direct", the lower bound of
every range the wheel declares. uv's lowest-direct takes the lowest version of the *direct* requirements only
(https://docs.astral.sh/uv/concepts/resolution/#resolution-strategy: "the lowest compatible versions for all direct
dependencies, while using the latest compatible versions for all other dependencies"). A wheel named on the command
line is the direct one and its own Requires-Dist are transitive (lowest-direct alone installed pulumi 3.272.0 for
`pulumi>=3.200`), so both installs also pass the wheel's Requires-Dist, read from its METADATA, as requirements of
their own: then the declared ranges are the direct ones.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

RESOLUTIONS = ("highest", "lowest-direct")
# uv's environment variables that point it at an index or a certificate store are kept (a machine may reach PyPI only
# through a mirror); every other UV_* one (UV_CONSTRAINT, UV_OVERRIDE, UV_RESOLUTION, UV_EXCLUDE_NEWER, UV_CACHE_DIR,
# ...: https://docs.astral.sh/uv/reference/environment/) could change what gets installed, so it is dropped.
UV_KEPT = {"UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_NATIVE_TLS", "UV_HTTP_TIMEOUT"}


@dataclass(frozen=True)
class Installed:
    resolution: str
    python: Path  # the virtualenv's bin/python
    requirements: tuple[Requirement, ...]  # what the wheel declares (its Requires-Dist for no extra)
    versions: dict[str, Version]  # canonical name -> installed version, every package of the virtualenv
    seconds: float  # the install alone (uv venv and uv pip install), for the report


def uv() -> Path:
    """The uv of the interpreter running the tests (requirements.txt pins it)."""
    return Path(sys.executable).parent / "uv"


def uv_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in UV_KEPT}


def declared_requirements(wheel: Path) -> tuple[Requirement, ...]:
    """The wheel's Requires-Dist that apply without an extra (its base dependencies), as written in its METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    return tuple(r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""}))


def _uv(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(uv()), *arguments], cwd=cwd, capture_output=True, text=True, timeout=900, env=uv_environment()
    )
    assert result.returncode == 0, f"uv {' '.join(arguments)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def install(wheel: Path, root: Path, resolution: str, cache: Path) -> Installed:
    """A fresh virtualenv under `root` with the wheel and what `resolution` picks within its declared ranges.

    --no-config: no uv.toml or pyproject.toml of the machine or of a parent folder takes part
    (https://docs.astral.sh/uv/reference/cli/#uv-pip-install--no-config). uv pip install writes no bytecode unless
    asked (--compile-bytecode, https://docs.astral.sh/uv/reference/cli/#uv-pip-install--compile-bytecode): Python
    compiles what the tests import on first import. `cache` is the caller's own folder (the two installs share the
    downloads of one run, nothing is read from an earlier run).
    """
    assert resolution in RESOLUTIONS, resolution
    requirements = declared_requirements(wheel)
    declared = root / "declared.txt"
    declared.write_text("".join(f"{r}\n" for r in requirements))
    venv = root / "venv"
    started = time.monotonic()
    _uv(["venv", "--no-config", "--quiet", "--python", sys.executable, str(venv)], root)
    python = venv / "bin" / "python"
    common = ["--no-config", "--quiet", "--python", str(python), "--cache-dir", str(cache)]
    _uv(["pip", "install", *common, "--resolution", resolution, str(wheel), "-r", str(declared)], root)
    seconds = time.monotonic() - started
    listed = _uv(["pip", "list", "--no-config", "--python", str(python), "--format", "json"], root).stdout
    versions = {canonicalize_name(p["name"]): Version(p["version"]) for p in json.loads(listed)}
    return Installed(resolution, python, requirements, versions, seconds)


def lower_bound(requirement: Requirement) -> Version | None:
    """The version of the range's `>=` clause, None without one."""
    bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return max(bounds) if bounds else None


def unreached_lower_bounds(installed: Installed) -> list[str]:
    """One line per declared requirement whose lower bound the install did not get (or that has none)."""
    problems = []
    for requirement in installed.requirements:
        bound = lower_bound(requirement)
        got = installed.versions.get(canonicalize_name(requirement.name))
        if bound is None:
            problems.append(f"{requirement}: no lower bound (>=) declared")
        elif got != bound:
            problems.append(
                f"{requirement}: {installed.resolution} installed {got}, not the declared lower bound {bound} "
                "(it does not exist, or the other declared ranges exclude it): raise the bound to what installs"
            )
    return problems


def report(installed: Installed, names: tuple[str, ...]) -> str:
    """One line: the resolution, the install's seconds, the versions of `names`."""
    shown = ", ".join(f"{n} {installed.versions.get(canonicalize_name(n))}" for n in names)
    return f"wheel install ({installed.resolution}, no constraints): {installed.seconds:.0f} s; {shown}"
