"""The settings' schema: Pulumi.yaml's `config:` section, the one place where settings are declared.

Types, defaults and the set of known keys of the project's namespace come from there
(https://www.pulumi.com/docs/iac/concepts/projects/project-file/#config-options).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from triton_gke.contracts.paths import PROJECT_FILE
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.stack_file import read_yaml_file

# PROJECT_FILE (contracts/paths.py) is the package's own Pulumi.yaml, shipped in the wheel: the schema, never a
# user's stack files or builds, which are the project folder's (contracts/paths.py project_dir).


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    default: Any


@cache
def config_schema(project_file: Path = PROJECT_FILE) -> tuple[str, dict[str, Key]]:
    """(project name, declared keys) from Pulumi.yaml."""
    project = read_yaml_file(project_file, "a Pulumi project file", ConfigError)
    keys = {
        name: Key(name, spec.get("type", "string"), spec.get("default"))
        for name, spec in (project.get("config") or {}).items()
        if ":" not in name
    }
    return project["name"], keys


def overrides_from(pairs: list[str]) -> dict[str, str]:
    """`--set key=value` pairs; a key without a namespace belongs to this project, as with `pulumi config set`."""
    project_name, _ = config_schema()
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        overrides[key if ":" in key else f"{project_name}:{key}"] = value
    return overrides
