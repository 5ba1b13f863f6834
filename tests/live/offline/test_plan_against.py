"""`make plan ARGS='--against FILE'` and `triton-gke plan --against` as processes: a disruptive change is refused
in one line, with a rerun hint that pastes."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.project_folder import make_project_folder
from tests.support.stacks import evaluate
from tests.unit.offline.test_lifecycle import SHIPPED_STACKS
from triton_gke.contracts.exit_codes import EXIT_DISRUPTIVE
from triton_gke.offline.plan_view import plan_records
from triton_gke.offline.runtime import Plan


@pytest.fixture(scope="module")
def shipped_plans() -> dict[str, Plan]:
    return {stack: evaluate(stack) for stack in SHIPPED_STACKS}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the plans run in: a project folder of this module's own, with its model repository built. A plan
    writes its YAML to build/plan/<stack> of the current folder, and the rerun hint is run as printed (no --out to
    add), so neither writes the checkout's build/plan/ while another test plans there."""
    folder = make_project_folder(tmp_path_factory.mktemp("plan-against") / "project")
    (folder / ".venv").symlink_to(PROJECT_DIR / ".venv")  # the hint starts with .venv/bin/triton-gke
    build = [sys.executable, "-m", "triton_gke.offline.build_models", "--stack", "dev"]  # dev and prod: same models
    built = subprocess.run(build, cwd=folder, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return folder


# ---- the command ---------------------------------------------------------------------------------------------------
@pytest.fixture
def run_plan(project: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    return lambda *args: plan_in(project, *args)


def plan_in(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_make_plan_against_a_deployed_plan_refuses_a_disruptive_change_in_one_line(tmp_path, shipped_plans, run_plan):
    applied = tmp_path / "applied.json"
    applied.write_text(json.dumps(plan_records(shipped_plans["dev"])), encoding="utf-8")
    same = run_plan("--stack", "dev", "--against", str(applied))
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[-1].endswith("0 to create, 0 to update, 0 to replace, 0 to delete, 75 unchanged")
    changed = run_plan("--stack", "dev", "--set", "gpuSpot=false", "--against", str(applied))
    assert changed.returncode == EXIT_DISRUPTIVE
    assert len(changed.stderr.splitlines()) == 1 and "--allow-disruption gke-us-central1-gpu" in changed.stderr
    assert any(
        line.startswith("replace   gcp:container/nodePool:NodePool::gke-us-central1-gpu")
        for line in changed.stdout.splitlines()
    )
    allowed = run_plan(
        "--stack", "dev", "--set", "gpuSpot=false", "--against", str(applied),
        "--allow-disruption", "gke-us-central1-gpu",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr


def test_against_another_stacks_plan_or_an_unknown_allowed_name_is_refused(tmp_path, shipped_plans, run_plan):
    """Pulumi never diffs one stack's state against another stack's program: a prod plan against dev is a mistake,
    not 194 replacements. A misspelt --allow-disruption name would allow nothing: it is refused too."""
    prod = tmp_path / "prod.json"
    prod.write_text(json.dumps(plan_records(shipped_plans["prod"])), encoding="utf-8")
    result = run_plan("--stack", "dev", "--against", str(prod))
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "a plan of stack prod of project triton-gke, not stack dev of project triton-gke"
    )
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(plan_records(shipped_plans["dev"])), encoding="utf-8")
    typo = run_plan("--stack", "dev", "--against", str(dev), "--allow-disruption", "gke-us-centrl1-gpu")
    assert typo.returncode == 2 and "'gke-us-centrl1-gpu': no resource of that name" in typo.stderr


def test_a_protected_cluster_is_refused_even_when_everything_is_allowed(tmp_path, shipped_plans, run_plan):
    """prod protects its clusters and bucket (Pulumi's protect: the engine refuses to delete them,
    https://www.pulumi.com/docs/iac/concepts/resources/options/protect/), so --allow-disruption all cannot make
    removing a region pass offline while the real `up` would fail."""
    applied = tmp_path / "prod.json"
    applied.write_text(json.dumps(plan_records(shipped_plans["prod"])), encoding="utf-8")
    result = run_plan(
        "--stack", "prod", "--set", 'regions=["us-central1","europe-west4"]', "--against", str(applied),
        "--allow-disruption", "ALL",
    )  # fmt: skip
    assert result.returncode == EXIT_DISRUPTIVE
    assert "protected" in result.stderr and "gcp:container/cluster:Cluster::gke-asia-east1" in result.stderr


def test_the_rerun_hint_pastes_as_it_is_with_the_settings_and_names_already_given(
    tmp_path, shipped_plans, run_plan, project
):
    """The hint is a shell command: run as printed, it passes. It keeps the --set words (a value with spaces and
    quotes included) and the names already allowed."""
    applied = tmp_path / "prod.json"
    unprotected = evaluate("prod", deletionProtection=False)
    applied.write_text(json.dumps(plan_records(unprotected)), encoding="utf-8")
    regions = '["us-central1", "europe-west4"]'
    result = run_plan(
        "--stack", "prod", "--set", "deletionProtection=false", "--set", f"regions={regions}",
        "--against", str(applied), "--allow-disruption", "gke-asia-east1",
    )  # fmt: skip
    assert result.returncode == EXIT_DISRUPTIVE, result.stderr
    hint = result.stderr.split("or allow them: ", 1)[1].strip()
    words = shlex.split(hint)
    assert words[:2] == [".venv/bin/triton-gke", "plan"] and f"regions={regions}" in words
    assert "gke-asia-east1" in words and "gke-asia-east1-gpu" in words
    rerun = subprocess.run(words, cwd=project, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr


@pytest.mark.parametrize(
    "content,expected",
    [
        ("{", "not valid JSON"),
        ("[1]", "not a plan record"),
        ("[" + "9" * 5000 + "]", "digits"),  # red-team finding: int()'s digit limit was a traceback
        ('{"a": 1}', "expected a JSON array"),
    ],
)
def test_against_a_file_that_is_not_a_plan_is_one_line_naming_it(tmp_path, content, expected, run_plan):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    result = run_plan("--stack", "dev", "--against", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and str(bad) in result.stderr and expected in result.stderr


def test_against_a_fifo_is_refused_without_waiting(tmp_path, run_plan):
    fifo = tmp_path / "plan.fifo"
    import os

    os.mkfifo(fifo)
    result = run_plan("--stack", "dev", "--against", str(fifo))
    assert result.returncode == 2 and "not a regular file" in result.stderr and "Traceback" not in result.stderr


def test_against_names_the_node_recreation_of_a_machine_and_an_image_type_change(tmp_path, shipped_plans, run_plan):
    """`plan --against` as a user runs it: a GPU machine-type change and an image-type change are in-place updates
    that recreate every node (infra/node_recreation.py); each line says so with the estimate. dev's one Triton pod is
    down while its node is recreated, so the GPU pool's is refused (exit 4) until --allow-disruption names the pool, as
    its replacement is. The image type has no stack key (COS_CONTAINERD, infra/cluster.py), so the deployed plan
    carries the other one."""
    applied = tmp_path / "applied.json"
    applied.write_text(json.dumps(plan_records(shipped_plans["dev"])), encoding="utf-8")
    refused = run_plan("--stack", "dev", "--set", "gpuMachineType=n1-standard-8", "--against", str(applied))
    assert refused.returncode == 4 and "--allow-disruption gke-us-central1-gpu" in refused.stderr, refused.stderr
    allow = ("--allow-disruption", "gke-us-central1-gpu")
    machine = run_plan("--stack", "dev", "--set", "gpuMachineType=n1-standard-8", "--against", str(applied), *allow)
    assert machine.returncode == 0, machine.stderr
    (line,) = [ln for ln in machine.stdout.splitlines() if ln.startswith("update")]
    assert line.startswith("update    gcp:container/nodePool:NodePool::gke-us-central1-gpu: nodeConfig.machineType")
    assert "[recreates every node: nodeConfig.machineType" in line and "up to ~51 min" in line
    ubuntu = [dict(r) for r in plan_records(shipped_plans["dev"])]
    for record in ubuntu:
        if record["type"] == "gcp:container/nodePool:NodePool":
            record["inputs"] = {**record["inputs"], "nodeConfig": {**record["inputs"]["nodeConfig"],
                                                                   "imageType": "UBUNTU_CONTAINERD"}}  # fmt: skip
    deployed = tmp_path / "ubuntu.json"
    deployed.write_text(json.dumps(ubuntu), encoding="utf-8")
    image = run_plan("--stack", "dev", "--against", str(deployed), *allow)
    assert image.returncode == 0, image.stderr
    lines = [ln for ln in image.stdout.splitlines() if ln.startswith("update")]
    assert len(lines) == 2 and all("[recreates every node: nodeConfig.imageType" in ln for ln in lines)
    assert image.stdout.splitlines()[-1].endswith("0 to create, 2 to update, 0 to replace, 0 to delete, 73 unchanged")
