"""`triton-gke plan` as a process: the plan it prints (text and --json), and bad settings refused with exit 2 and
one line naming the key."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import PROJECT
from tests.unit.infra.test_system import CLUSTER, NODE_POOL, PROD_REGIONS
from tests.unit.settings.test_config_fuzz import (
    KEYS,
    NAMES_A_KEY,
    _aliased_strings,
    _write,
    config_values,
    yaml_fragments,
)
from triton_gke.settings.stack_file import MAX_BYTES, MAX_NODES


def refused_plan(setting: str) -> list[str]:
    """`triton-gke plan --stack dev --set SETTING`, which must be refused (exit 2, nothing on stdout, no
    traceback): its stderr lines."""
    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--set", setting],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()


def test_plan_command_refuses_a_region_without_t4():
    lines = refused_plan('regions=["europe-north1"]')
    assert len(lines) == 1 and "europe-north1" in lines[0] and "triton-gke:regions" in lines[0]


def test_plan_command_refuses_operator_monitoring_and_says_what_to_do():
    """Refused in one line before anything is planned: why (no CRDs, pulumi-kubernetes#1712) and what to use instead."""
    lines = refused_plan("monitoringMode=operator")
    assert len(lines) == 1 and lines[0].startswith("error: triton-gke:monitoringMode: 'operator' is not valid; ")
    for said in ("Prometheus Operator CRDs", "pulumi-kubernetes#1712", "use builtin", "k8s:Monitoring component"):
        assert said in lines[0]


PLAN_TIMEOUT_S = 90  # one plan takes ~3-6 s on 2 cores; a hang fails instead of blocking


MEMORY_LIMIT = 4 * 2**30  # address space of one plan subprocess: a blow-up dies instead of swapping


# Run in a child process under an address-space limit, reporting its own CPU time and peak memory: a reading that
# expanded the aliases would die there (or report gigabytes) instead of swapping this machine. CPU seconds of the
# read (time.process_time: user and system CPU, not the time spent waiting for a core,
# https://docs.python.org/3/library/time.html#time.process_time): other work on the machine does not move them.
_MEASURE = """
import resource, sys, time
from pathlib import Path
from triton_gke.settings.stack_file import StackFileError, read_stack_file
started = time.process_time()
try:
    read_stack_file(Path(sys.argv[1]), sys.argv[2], {})
    outcome = "accepted"
except StackFileError as err:
    outcome = str(err)
# Peak RSS of this process's own address space (VmHWM, proc(5)): getrusage's ru_maxrss survives execve(2)
# (getrusage(2)), so it would count the forking pytest process's size, hundreds of MB late in a long run.
peak_mb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) // 1024
print(time.process_time() - started, peak_mb, outcome, sep="\\n")
"""


def test_a_long_string_aliased_thousands_of_times_is_refused_fast_and_in_bounded_memory(tmp_path: Path) -> None:
    path = _write(tmp_path, _aliased_strings(120_000, 19_000))  # 177 KiB, 2.3 billion characters once expanded
    assert path.stat().st_size < MAX_BYTES and MAX_NODES > 19_000
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), PROJECT],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=180,  # only ends a hang: an interpreter's start on busy cores is slow, and not what is measured
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seconds, peak_mb, outcome = done.stdout.splitlines()
    assert outcome.startswith(path.name) and "characters (aliases included)" in outcome, outcome
    assert float(seconds) < 2 and int(peak_mb) < 500, (seconds, peak_mb)  # CPU seconds


# ---------------------------------------------------------------- the real command line, a few examples
def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _plan(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--out", str(out), *args]
    return subprocess.run(
        command,
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=PLAN_TIMEOUT_S,
        preexec_fn=_limit_memory,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_DIR), "HOME": str(out.parent)},
    )


def _assert_planned_or_refused(done: subprocess.CompletedProcess[str], what: str) -> None:
    report = f"{what}\nexit {done.returncode}\nstderr:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr + done.stdout, report
    assert done.returncode in (0, 2), report
    if done.returncode == 2:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), report
        name = lines[0].removeprefix("error: ")
        # A key, the stack file, the --set word, or the model repository the plan would upload (a changed model
        # setting needs `make model-repo` first: offline/plan.py says so in one line).
        assert NAMES_A_KEY.match(name) or name.startswith(("Pulumi.", "--set", "build/model_repository")), report


cli_values = config_values.filter(lambda v: "\x00" not in v and len(v) < 2000)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(KEYS)), value=cli_values)
def test_plan_command_with_any_set_value_plans_or_exits_2(tmp_path_factory: Any, key: str, value: str) -> None:
    out = tmp_path_factory.mktemp("plan")
    _assert_planned_or_refused(_plan(["--set", f"{key}={value}"], out / "plan"), f"--set {key}={value!r}")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(KEYS)), fragment=yaml_fragments.filter(lambda f: "\x00" not in f))
def test_plan_command_with_any_stack_file_plans_or_exits_2(tmp_path_factory: Any, key: str, fragment: str) -> None:
    out = tmp_path_factory.mktemp("plan")
    dev = yaml.safe_load((PROJECT_DIR / "Pulumi.dev.yaml").read_text())["config"]
    dev.pop(f"{PROJECT}:{key}", None)  # the dev stack's settings, this key replaced (twice would be a duplicate)
    config_file = out / "Pulumi.generated.yaml"
    config_file.write_text(f"{yaml.safe_dump({'config': dev})}  {PROJECT}:{key}: {fragment}\n")
    done = _plan(["--config-file", str(config_file)], out / "plan")
    _assert_planned_or_refused(done, config_file.read_text())


# Run directly, a command names itself as the console script does; through make, as the make target
# (TRITON_GKE_MAKE_TARGET: tests/unit/cli/test_one_line.py covers that wording).
@pytest.mark.parametrize(
    "module,prog", [("triton_gke.offline.plan", "triton-gke plan"), ("triton_gke.sandbox.run", "triton-gke sandbox")]
)
@pytest.mark.parametrize("option", ["--bogus", "--stack", "--json=1"])
def test_a_bad_option_is_one_line_and_exit_2(module: str, prog: str, option: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, option], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=PLAN_TIMEOUT_S
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {prog}: "), done.stderr
    assert "usage:" not in done.stderr and "Traceback" not in done.stderr


def test_plan_command_refuses_a_bad_allowlist_in_one_line_with_exit_2():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "triton_gke.offline.plan",
            "--stack",
            "staging",
            "--set",
            'lbSourceRanges=["10.0.0.300/24"]',
        ],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "triton-gke:lbSourceRanges" in line and "10.0.0.300/24" in line


@pytest.mark.parametrize("setting", ["modelMaxBatchSize=100000", "modelInstanceCount=1000"])
def test_the_plan_refuses_in_one_line_with_exit_2(setting: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--set", setting],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    key, value = setting.split("=")
    assert f"{PROJECT}:{key}: {value} is not valid" in lines[0] and "16 GB" in lines[0]


@pytest.mark.parametrize("share", [0, 100, -5])
def test_a_share_that_leaves_a_protocol_nothing_is_refused_in_one_line(share: int) -> None:
    import subprocess
    import sys

    from tests.support.checkout import PROJECT_DIR

    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "staging", "--set", f"lbHttpSharePercent={share}"],
        cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "triton-gke:lbHttpSharePercent" in result.stderr


def test_plan_json_lists_every_resource_with_type_name_parent_inputs(tmp_path: Path) -> None:
    result = subprocess.run(  # --out: its YAML not in the shared build/plan/prod
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "prod", "--json", "--out", str(tmp_path)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    records = json.loads(result.stdout)
    assert all({"type", "name", "parent", "inputs"} <= set(r) for r in records)
    clusters = [r for r in records if r["type"] == CLUSTER]
    assert sorted(c["inputs"]["location"] for c in clusters) == sorted(PROD_REGIONS)
    pools = [r for r in records if r["type"] == NODE_POOL and r["inputs"]["nodeConfig"].get("guestAccelerators")]
    assert sorted(p["parent"] for p in pools) == sorted(f"gke-{r}" for r in PROD_REGIONS)


def test_plan_text_shows_the_tree_and_counts(tmp_path: Path) -> None:
    result = subprocess.run(  # --out: its YAML not in the shared build/plan/dev
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--out", str(tmp_path)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "gcp:container/nodePool:NodePool  gke-us-central1-gpu" in result.stdout
    assert 'gpuDriverVersion="LATEST"' in result.stdout
    assert "Resources by type:" in result.stdout and "in all" in result.stdout


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)


def test_the_testers_command_is_refused_and_the_yaml_outside_kept(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "configs").mkdir(parents=True)
    (victim / "configs" / "keep.yaml").write_text("mine: true\n")
    stack = os.path.relpath(victim, PROJECT_DIR / "build" / "plan")  # build/plan/<stack> is the victim folder

    result = run("triton_gke.offline.plan", "--stack", stack, "--config-file", "Pulumi.dev.yaml")

    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"error: stack {stack!r}: not a Pulumi stack name (letters, digits, '-', '_' and '.', not starting with "
        "'.', at most 100 characters)"
    ]
    assert (victim / "configs" / "keep.yaml").read_text() == "mine: true\n"


@pytest.mark.parametrize("module", ["triton_gke.offline.plan", "triton_gke.offline.build_models"])
def test_a_path_as_stack_is_a_stack_name_error_not_a_missing_file(module: str) -> None:
    result = run(module, "--stack", "../etc/passwd")

    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "stack '../etc/passwd': not a Pulumi stack name" in result.stderr
    assert "no such stack file" not in result.stderr
