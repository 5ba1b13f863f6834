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
# user's stack files or builds, which are the project folder's (project_dir()).


def project_dir() -> Path:
    """The Pulumi project folder a command or program acts on: the current working directory, read when called.

    Under `pulumi up` the engine runs the program with the project folder as its working directory: the language
    host gets it as RunRequest.pwd, "The program's working directory" (pulumi/pulumi proto/pulumi/language.proto),
    which the engine sets to the folder of Pulumi.yaml, or to the folder `main:` names ("So that any relative paths
    inside of the program are correct, we still need to pass the pwd of the main program's parent directory",
    pulumi/pulumi pkg/engine/project.go getPwdMain; the project file reference: "By default, the program's working
    directory is assumed to be the location of `Pulumi.yaml`", https://www.pulumi.com/docs/iac/concepts/projects/
    project-file/ `main`). The `triton-gke` commands act on the current folder, as `pulumi` itself does ("At
    runtime, the nearest parent folder containing a `Pulumi.yaml` file determines the current project",
    https://www.pulumi.com/docs/iac/concepts/projects/). In this repository both are the repository root.
    """
    return Path.cwd()


def build_dir() -> Path:
    """The project's build/ folder: the built model repository, plans, sandbox and bench outputs, caches."""
    return project_dir() / "build"


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
