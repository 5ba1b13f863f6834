"""The settings' schema: Pulumi.yaml's `config:` section, the one place where settings are declared.

Types, defaults and the set of known keys of the project's namespace come from there
(https://www.pulumi.com/docs/iac/concepts/projects/project-file/#config-options).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROJECT_FILE = PROJECT_DIR / "Pulumi.yaml"


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    default: Any


@cache
def config_schema(project_file: Path = PROJECT_FILE) -> tuple[str, dict[str, Key]]:
    """(project name, declared keys) from Pulumi.yaml."""
    project = yaml.safe_load(project_file.read_text())
    keys = {
        name: Key(name, spec.get("type", "string"), spec.get("default"))
        for name, spec in (project.get("config") or {}).items()
        if ":" not in name
    }
    return project["name"], keys
