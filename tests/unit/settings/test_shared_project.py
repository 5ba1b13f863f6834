"""Issue 44: two stacks in one Google Cloud project share its one Workload Identity pool, PROJECT.svc.id.goog, where
"workloads running in a specific namespace share the same IAM identity across clusters within a project"
(https://cloud.google.com/kubernetes-engine/fleet-management/docs/best-practices-workload-identity). The shipped stack
files name a project each; a stack whose project another stack file of the project folder names too is warned in
one line (settings/shared_project.py), never refused, and a broken other stack file changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, stack_settings
from triton_gke.settings import from_stack_file
from triton_gke.settings.keys import GCP_PROJECT_ID
from triton_gke.settings.stack import DEPLOYABLE_STACK, shared_project_notice

SHIPPED = ("dev", "staging", "prod")
DEV_FILE = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
DEV_PROJECT = stack_settings("dev")["gcp:project"]
PROD_PROJECT = stack_settings("prod")["gcp:project"]


def stack_file(folder: Path, stack: str, project: str | None, text: str = "") -> Path:
    """folder/Pulumi.STACK.yaml setting gcp:project (JSON-quoted: text to every YAML reader), or `text` as it is."""
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(text or f"config:\n  gcp:project: {json.dumps(project)}\n")
    return path


def dev_in(folder: Path, project: str) -> None:
    """Pulumi.dev.yaml of this checkout, in `project`."""
    stack_file(folder, "dev", None, DEV_FILE.replace(f"gcp:project: {DEV_PROJECT}\n", f"gcp:project: {project}\n"))


def project_warnings(warnings: tuple[str, ...]) -> list[str]:
    return [w for w in warnings if w.startswith("gcp:project: ")]


def test_the_shipped_stacks_each_name_a_valid_project_of_their_own() -> None:
    """Placeholders a user replaces; valid IDs ("6 to 30 characters", lowercase letters, numbers and hyphens, starting
    with a letter, not ending with a hyphen: https://cloud.google.com/resource-manager/docs/creating-managing-projects)
    and distinct, so the shipped stacks plan without this warning."""
    projects = {stack: stack_settings(stack)["gcp:project"] for stack in SHIPPED}
    assert all(GCP_PROJECT_ID.fullmatch(project) for project in projects.values()), projects
    assert len(set(projects.values())) == len(SHIPPED), projects
    for stack in SHIPPED:
        assert project_warnings(from_stack_file(stack).warnings) == [], stack


def test_two_stack_files_naming_one_project_warn_in_one_line_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    dev_in(tmp_path, "shared-project")
    stack_file(tmp_path, "prod", "shared-project")
    (line,) = project_warnings(from_stack_file("dev").warnings)
    print(line)
    assert line.isprintable() and len(line.splitlines()) == 1
    assert "stack 'dev' deploys to project 'shared-project', as stack 'prod' (Pulumi.prod.yaml) does" in line
    assert "shared-project.svc.id.goog" in line and "docs/security.md" in line


def test_stack_files_naming_distinct_projects_warn_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dev_in(tmp_path, "project-one")
    stack_file(tmp_path, "prod", "project-two")
    stack_file(tmp_path, "staging", "project-one-b")  # a longer ID that starts with dev's is another project
    stack_file(tmp_path, "test", "PROJECT-ONE")  # the exact ID only; this one no stack could deploy to
    assert project_warnings(from_stack_file("dev").warnings) == []


def test_a_project_given_on_the_command_line_is_compared_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--set gcp:project (or --config under `pulumi up`) is this stack's project, whatever its file says."""
    monkeypatch.chdir(tmp_path)
    dev_in(tmp_path, "project-one")
    stack_file(tmp_path, "prod", "project-two")
    (line,) = project_warnings(from_stack_file("dev", {"gcp:project": "project-two"}).warnings)
    assert "'project-two'" in line and "'prod'" in line


def test_other_stack_files_that_cannot_be_read_are_left_out_never_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not this stack's config: each of these is the other stack's own `up` to refuse (settings/stack_file.py)."""
    monkeypatch.chdir(tmp_path)
    dev_in(tmp_path, "shared-project")
    stack_file(tmp_path, "broken", None, "config:\n  gcp:project: shared-project\n  gcp:project: again\n")  # twice
    stack_file(tmp_path, "unquoted", None, "config:\n  gcp:project: shared-project\n  triton-gke:regions: NO\n")
    stack_file(tmp_path, "binary", None, "config:\n  gcp:project: shared-project\n\0")
    stack_file(tmp_path, "Capital", "shared-project")  # a name the program does not deploy (settings/stack.py)
    stack_file(tmp_path, "unset", None, "config:\n  triton-gke:gpuSpot: true\n")
    stack_file(tmp_path, "empty", None, "# nothing set\n")
    (tmp_path / "Pulumi.folder.yaml").mkdir()
    os.mkfifo(tmp_path / "Pulumi.fifo.yaml")  # a FIFO is refused before it is opened: no read blocks
    (tmp_path / "Pulumi.dangling.yaml").symlink_to(tmp_path / "nowhere")
    (tmp_path / "Pulumi.big.yaml").write_text("config:\n  gcp:project: shared-project\n" + "#" * 300_000 + "\n")
    assert project_warnings(from_stack_file("dev").warnings) == []
    stack_file(tmp_path, "good", "shared-project")
    (line,) = project_warnings(from_stack_file("dev").warnings)
    assert "'good' (Pulumi.good.yaml)" in line and "broken" not in line and "Capital" not in line


# ---------------------------------------------------------------- generated stacks and projects

STACK_NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
PROJECTS = st.from_regex(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", fullmatch=True)


@st.composite
def folders(draw: st.DrawFn) -> tuple[str, str, dict[str, str]]:
    """(stack, its project, other stack -> the project its file names): the same, a near miss, or another."""
    stack, project = draw(STACK_NAMES), draw(PROJECTS)
    near = [project + "x", project[:-1] + ("a" if project[-1] != "a" else "b"), project.upper(), f" {project}"]
    others = draw(
        st.dictionaries(
            STACK_NAMES.filter(lambda name: name != stack),
            st.one_of(st.just(project), st.sampled_from(near), PROJECTS, st.text(string.printable, max_size=12)),
            max_size=5,
        )
    )
    return stack, project, others


@settings(max_examples=150)
@given(folders())
def test_the_warning_appears_iff_another_stack_file_names_the_exact_project(
    folder: tuple[str, str, dict[str, str]],
) -> None:
    stack, project, others = folder
    assert DEPLOYABLE_STACK.fullmatch(stack)
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        stack_file(Path(tmp), stack, project)
        for other, theirs in others.items():
            stack_file(Path(tmp), other, theirs)
        line = shared_project_notice(project, stack)
    sharing = sorted(other for other, theirs in others.items() if theirs == project)
    assert (line is not None) == bool(sharing), (line, others)
    if line is None:
        return
    assert line.isprintable() and line.startswith(f"gcp:project: stack {stack!r} deploys to project {project!r}")
    named = [other for other in others if f"{other!r} (Pulumi.{other}.yaml)" in line]
    assert sorted(named) == sharing, (line, others)


def test_a_plan_in_a_project_another_stack_file_names_logs_the_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    """The warning reaches the user as every settings warning does: pulumi.log.warn (infra/config.py), which the
    mock runtime's logging carries, as `pulumi up` prints it; the plan itself is made (a warning, not an error)."""
    caplog.set_level(logging.WARNING)
    plan = evaluate("dev", **{"gcp:project": PROD_PROJECT})
    assert plan.of_type("gcp:container/cluster:Cluster")
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("gcp:project: ")]
    assert len(warned) == 1, warned
    assert f"stack 'dev' deploys to project {PROD_PROJECT!r}, as stack 'prod' (Pulumi.prod.yaml) does" in warned[0]
