"""`triton-gke gpu-check` where it cannot run: one line and exit 2 for each missing piece, before anything is built.
nvidia-smi and trtexec cannot be installed here; where a refusal needs one of them to exist, a two-line script on
PATH prints what the real tool prints (nvidia-smi's CSV query answer; trtexec's first line, NVIDIA/TensorRT #4036)."""

from __future__ import annotations

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
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


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
    ],
    ids=["no GPU", "no trtexec", "another TensorRT", "nvidia-smi without a GPU"],
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
