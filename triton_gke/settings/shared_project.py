"""A warning, never an error, when another stack of this project deploys to the same Google Cloud project.

The program sees only its own stack's config, so this reads the project folder's other stack files. Pulumi names a
stack's settings file `Pulumi.<stack-name>.yaml`, which "typically resides in the root of the project directory"
(https://www.pulumi.com/docs/iac/concepts/projects/stack-settings-file/); this project sets no `stackConfigDir`, so
they lie beside Pulumi.yaml, in contracts/paths.py project_dir.

Why it matters: GKE makes one workload identity pool per project, PROJECT_ID.svc.id.goog, adds every cluster of the
project to it, and so "workloads running in a specific namespace share the same IAM identity across clusters within a
project" (https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity). Stacks
in one project are then kept apart only by the names of their principals (triton/triton-STACK, policy/principals.py),
and a name is no boundary to whoever may create a ServiceAccount in another stack's cluster (docs/security.md,
"Stacks that share a project"). Each stack in a project of its own has a pool of its own.

Sharing a project is legitimate (a single-project sandbox), so it is a warning. Another stack file that cannot be
read, is not a stack file, names a stack this program does not deploy, or sets no gcp:project is left out: it is
not this stack's config, and that stack's own `up` refuses it (settings/stack.py). Another stack's project set
outside its file (`--config`, an ESC environment) is not seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from triton_gke.settings.errors import ConfigError
from triton_gke.settings.schema import config_schema
from triton_gke.settings.stack_file import read_stack_file

STACK_FILE = re.compile(r"Pulumi\.(?P<stack>.+)\.yaml")
PROJECT_KEY = "gcp:project"


def other_stack_projects(folder: Path, stack: str, deployable: Callable[[str], object]) -> dict[str, str]:
    """Each other deployable stack with a readable file in `folder` that sets gcp:project -> that project.

    deployable: whether a stack name is one the program deploys (settings/stack.py DEPLOYABLE_STACK.fullmatch).
    """
    projects = {}
    for path in sorted(folder.glob("Pulumi.*.yaml")):
        found = STACK_FILE.fullmatch(path.name)
        other = found["stack"] if found else ""
        if other == stack or not deployable(other):
            continue
        project = _project_in(path)
        if project is not None:
            projects[other] = project
    return projects


def shared_project_warning(project: str, stack: str, others: Mapping[str, str]) -> str | None:
    """One line naming `stack`, the other stacks whose files name the same `project`, and why it matters; else None."""
    sharing = sorted(other for other, theirs in others.items() if theirs == project)
    if not sharing:
        return None
    named = " and ".join(f"{other!r} (Pulumi.{other}.yaml)" for other in sharing)
    stacks = "stack" if len(sharing) == 1 else "stacks"
    verb = "does" if len(sharing) == 1 else "do"
    return (
        f"{PROJECT_KEY}: stack {stack!r} deploys to project {project!r}, as {stacks} {named} {verb}: every "
        f"cluster of a project is in its one Workload Identity pool, {project}.svc.id.goog, where a namespace and "
        "Kubernetes service account are one principal in all of them, so these stacks are kept apart only by their "
        "principals' names, which whoever may create a ServiceAccount in one stack's cluster can take "
        '(docs/security.md, "Stacks that share a project"); give each stack its own project'
    )


def _project_in(path: Path) -> str | None:
    """The file's gcp:project as the engine would pass it; None where it sets none or cannot be read as a stack file."""
    project_name, schema_keys = config_schema()
    types = {f"{project_name}:{key}": spec.type for key, spec in schema_keys.items()}
    try:
        config = read_stack_file(path, project_name, types)
    except (ConfigError, OSError):  # not this stack's config: its own `up` refuses it
        return None
    return config.get(PROJECT_KEY)


__all__ = ["other_stack_projects", "shared_project_warning"]
