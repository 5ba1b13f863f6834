"""`triton-gke gpu-check` where it cannot run: one line and exit 2 for each missing piece, before anything is built.
nvidia-smi and trtexec cannot be installed here; where a refusal needs one of them to exist, a two-line script on
PATH prints what the real tool prints (nvidia-smi's CSV query answer; trtexec's first line, NVIDIA/TensorRT #4036)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.onnx_models import small_onnx
from triton_gke.model_repo.build import build_repository
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings

TRITON_GKE = Path(sys.executable).parent / "triton-gke"


@pytest.fixture(scope="module")
def plan_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("gpu-check")
    variants = tuple(v for v in REFERENCE_VARIANTS if v.name in ("original", "trt_int8"))
    settings = ModelRepoSettings(
        variants=variants, source=str(small_onnx(tmp / "m.onnx")), plan_compute_capabilities=("7.5",)
    )
    return build_repository(settings, tmp / "repo", cache_dir=tmp / "cache").out


def _tool(folder: Path, name: str, output: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%b\\n' '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


# trtexec as far as the check needs one: its version line for --help; a build writes the --saveEngine file; a run
# prints printEpilog's summary lines (NVIDIA/TensorRT samples/common/sampleReporting.cpp). Each call is logged.
FAKE_TRTEXEC = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls.log"
echo "&&&& RUNNING TensorRT.trtexec [TensorRT v101100] # trtexec $*"
for arg in "$@"; do
  case "$arg" in --saveEngine=*) printf plan > "${arg#--saveEngine=}" ;; esac
done
case "$*" in *--loadEngine=*)
  echo "[12/03/2026-10:00:00] [I] Throughput: 212.5 qps"
  echo "[12/03/2026-10:00:00] [I] Latency: min = 4.5 ms, max = 6 ms, mean = 4.7 ms, median = 4.7 ms, percentile(90%) = 5 ms, percentile(95%) = 5.5 ms, percentile(99%) = 6 ms" ;;
esac
"""  # noqa: E501


def _tools(folder: Path) -> Path:
    folder.mkdir()
    _tool(folder, "nvidia-smi", "Tesla T4, 7.5, 580.95.05")
    (folder / "trtexec").write_text(FAKE_TRTEXEC)
    (folder / "trtexec").chmod(0o755)
    return folder


def _gpu_check(repository: Path, tools: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # PATH: the fake tools and the basic system folders, never the machine's own (a CI machine might have a GPU).
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}
    command = [str(TRITON_GKE), "gpu-check", "--repository", str(repository), "--out", str(tmp_path / "out")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def _refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        ({}, "error: no NVIDIA GPU here: nvidia-smi is not on PATH"),
        ({"nvidia-smi": "Tesla T4, 7.5, 580.95.05"}, "error: no trtexec on PATH"),
        (
            {"nvidia-smi": "Tesla T4, 7.5, 580.95.05", "trtexec": "&&&& RUNNING TensorRT.trtexec [TensorRT v110401]"},
            "error: trtexec is TensorRT 11, but 25.06-py3 is TensorRT 10: run in nvcr.io/nvidia/tensorrt:25.06-py3",
        ),
        ({"nvidia-smi": "No devices were found"}, "not NAME, MAJOR.MINOR, DRIVER"),
        (
            {"nvidia-smi": "Tesla T4, 7.5, 580.95.05\nNVIDIA L4, 8.9, 580.95.05"},
            "nvidia-smi lists 2 GPUs; make one visible",
        ),
    ],
    ids=["no GPU", "no trtexec", "another TensorRT", "nvidia-smi without a GPU", "two GPUs"],
)
def test_each_missing_piece_is_one_line_and_nothing_is_written(
    plan_repository: Path, tmp_path: Path, tools: dict[str, str], said: str
) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    for name, output in tools.items():
        _tool(folder, name, output)
    line = _refusal(_gpu_check(plan_repository, folder, tmp_path))
    assert said in line, line
    assert not (tmp_path / "out").exists()


def test_a_repository_without_plans_names_the_setting(tmp_path: Path) -> None:
    settings = ModelRepoSettings(variants=REFERENCE_VARIANTS[:2], source=str(small_onnx(tmp_path / "m.onnx")))
    repository = build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache").out
    (tmp_path / "tools").mkdir()
    line = _refusal(_gpu_check(repository, tmp_path / "tools", tmp_path))
    assert "no TensorRT plan model" in line and "tritonBuildEngines=true" in line, line


def test_a_bad_out_is_refused_before_any_build(plan_repository: Path, tmp_path: Path) -> None:
    tools = _tools(tmp_path / "tools")
    (tmp_path / "out").write_text("my notes")
    line = _refusal(_gpu_check(plan_repository, tools, tmp_path))
    assert "--out" in line and "not an empty folder" in line, line
    assert (tmp_path / "out").read_text() == "my notes"
    assert (tools / "calls.log").read_text().split() == ["--help"]  # asked its version, built nothing


def test_a_whole_check_writes_trtexecs_figures(plan_repository: Path, tmp_path: Path) -> None:
    """With trtexec's lines standing in for a GPU: every plan model built with the Job's command, run at batch 1 and
    at its largest batch; the record holds trtexec's figures and its exact version; the README says images/s."""
    tools = _tools(tmp_path / "tools")
    done = _gpu_check(plan_repository, tools, tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert record["tensorrt_version"] == "10.11.0" and record["gpu"]["compute_capability"] == "7.5"
    (plan,) = record["plans"]
    assert plan["model"] == "trt_int8" and plan["plan_file"] == "model.25.06.cc75.plan" and plan["plan_bytes"] == 4
    assert sorted(plan["runs"]) == ["1", "64"] and plan["runs"]["64"]["percentiles_ms"]["99"] == 6.0
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "| trt_int8 | INT8 |" in readme and "212.5 qps = 13600 images/s" in readme
    calls = (tools / "calls.log").read_text().splitlines()
    assert calls[1].startswith("--onnx=model.onnx --saveEngine=model.25.06.cc75.plan --minShapes=pixels:1x3x32x32")


def test_bytes_that_are_not_utf8_are_recorded_not_raised(plan_repository: Path, tmp_path: Path) -> None:
    tools = _tools(tmp_path / "tools")
    script = (
        (tools / "trtexec").read_text().replace('echo "[12/03/2026', "printf '\\377\\376\\n'; echo \"[12/03/2026", 1)
    )
    (tools / "trtexec").write_text(script)
    done = _gpu_check(plan_repository, tools, tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads((tmp_path / "out" / "gpu_check.json").read_text())["plans"][0]["failed"] is None


def test_an_out_inside_the_repository_is_refused(plan_repository: Path, tmp_path: Path) -> None:
    tools = _tools(tmp_path / "tools")
    command = [str(TRITON_GKE), "gpu-check", "--repository", str(plan_repository), "--out", str(plan_repository / "r")]
    done = subprocess.run(
        command, env={**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=120
    )
    assert "inside the repository" in _refusal(done) and not (plan_repository / "r").exists()
