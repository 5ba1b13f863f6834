"""The model repository builder against real processes: a uint8 twin served by tritonserver, the CLI's exit
status, and concurrent or killed builds of one target."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from tests.support.checkout import PROJECT_DIR
from tests.support.onnx_models import small_onnx
from triton_gke.model_repo.build import BuildResult, lock_path
from triton_gke.model_repo.resnet50 import UINT8_SCALE
from triton_gke.sandbox.processes import wait_for
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.model_builds",)

REPO_ROOT = PROJECT_DIR


def test_uint8_model_casts_and_scales_in_the_graph(uint8_repos: BuildResult) -> None:
    """The UINT8 model gives what the FP32 model gives for the same pixels scaled to [0, 1]."""
    pixels = np.random.default_rng(3).integers(0, 256, (2, 224, 224, 3), dtype=np.uint8)
    fp32 = ort.InferenceSession(str(uint8_repos.out / "original" / "1" / "model.onnx"))
    uint8 = ort.InferenceSession(str(uint8_repos.out / "original_uint8" / "1" / "model.onnx"))
    # The graph's own arithmetic (Cast, then * float32(1/255)): x / 255 can differ from it in the last bit, which
    # the random network amplifies past the tolerance on an output now and then.
    scaled = pixels.astype(np.float32) * np.float32(UINT8_SCALE)
    expected = fp32.run(["probabilities"], {"input": scaled})[0]
    got = uint8.run(["probabilities"], {"input": pixels})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_uint8_twin_serves_uint8_requests_on_a_real_server(uint8_repos: BuildResult) -> None:
    pixels = np.random.default_rng(4).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    expected = ort.InferenceSession(str(uint8_repos.out / "original_uint8" / "1" / "model.onnx")).run(
        ["probabilities"], {"input": pixels}
    )[0]
    flags = {"model-control-mode": "explicit", "load-model": ["original_uint8"]}
    with TritonServer(uint8_repos.cpu_out, flags=flags, ready_timeout_s=240) as server:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        request = httpclient.InferInput("input", list(pixels.shape), "UINT8")
        request.set_data_from_numpy(pixels)
        result = client.infer("original_uint8", [request], outputs=[httpclient.InferRequestedOutput("probabilities")])
        np.testing.assert_allclose(result.as_numpy("probabilities"), expected, rtol=1e-4, atol=1e-6)
        wrong = httpclient.InferInput("input", list(pixels.shape), "FP32")
        wrong.set_data_from_numpy(pixels.astype(np.float32))
        with pytest.raises(Exception, match="UINT8|TYPE_UINT8|data-type|datatype"):
            client.infer("original_uint8", [wrong])


def test_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "triton_gke.model_repo",
            "--out",
            str(tmp_path / "repo"),
            "--onnx",
            str(tmp_path / "nope.onnx"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: source: model file not found: {tmp_path / 'nope.onnx'}"]
    assert not (tmp_path / "repo").exists()


# ---------------------------------------------------------------- builds of one target at the same time
def start_build(tmp_path: Path, model: Path, stderr: IO[str] | int = subprocess.PIPE) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "triton_gke.model_repo",
        "--out",
        str(tmp_path / "out" / "repo"),
        "--variants",
        "original",
    ]
    command += ["--cpu-out", str(tmp_path / "out" / "cpu"), "--onnx", str(model), "--cache-dir", str(tmp_path / "c")]
    return subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)


def assert_one_clean_repository(tmp_path: Path) -> None:
    for name in ("repo", "cpu"):
        assert sorted(p.name for p in (tmp_path / "out" / name).iterdir()) == [".model_repo.json", "original"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cpu", "repo"]  # no staging, old or lock


def test_a_build_waits_while_another_holds_the_target_then_both_finish(tmp_path: Path) -> None:
    # Two `make plan`s at once: before the lock, both renamed their staging folder onto the target and one
    # crashed with "OSError: Directory not empty". Here a third party holds the lock, as a running build does,
    # so both real builds must queue behind it (deterministic), then run one after the other.
    model = small_onnx(tmp_path / "small.onnx")
    (tmp_path / "out").mkdir()
    with open(lock_path(tmp_path / "out" / "cpu"), "w") as holder:
        holder.write(f"{os.getpid()}\n")
        holder.flush()
        fcntl.flock(holder, fcntl.LOCK_EX)
        logs = [tmp_path / f"build{i}.err" for i in range(2)]
        builds = []
        for log in logs:
            with log.open("w") as err:  # the build writes its own copy of the handle
                builds.append(start_build(tmp_path, model, stderr=err))
        waiting = f"waiting for another build of {tmp_path / 'out' / 'cpu'} (pid {os.getpid()}) to finish"

        # Until both say they wait at the lock (build.py prints it with flush=True), not a fixed sleep that a
        # slow import on 2 busy cores could outlast; 120 s only bounds a build that never gets there.
        def both_waiting_or_one_exited() -> bool:
            return all(waiting in log.read_text() for log in logs) or any(b.poll() is not None for b in builds)

        waited = wait_for(both_waiting_or_one_exited, timeout_s=120, interval_s=0.2)
        assert [b.poll() for b in builds] == [None, None], [log.read_text() for log in logs]
        assert waited, [log.read_text() for log in logs]
        assert not (tmp_path / "out" / "repo").exists()  # nothing written while it waits
        lock_path(tmp_path / "out" / "cpu").unlink()  # as a finishing build does
    results = [(b.communicate(timeout=240)[0], e.read_text(), b.returncode) for b, e in zip(builds, logs, strict=True)]

    for stdout, stderr, code in results:
        assert code == 0, stderr
        assert waiting in stderr
        assert "Traceback" not in stderr and "model repository" in stdout
    assert_one_clean_repository(tmp_path)


def test_concurrent_builds_of_one_target_all_succeed(tmp_path: Path) -> None:
    model = small_onnx(tmp_path / "small.onnx")
    builds = [start_build(tmp_path, model) for _ in range(3)]
    results = [(*b.communicate(timeout=300), b.returncode) for b in builds]

    assert [(code, "Traceback" in stderr) for _, stderr, code in results] == [(0, False)] * 3, results
    assert_one_clean_repository(tmp_path)


def test_a_build_killed_half_way_leaves_nothing_that_blocks_the_next(tmp_path: Path) -> None:
    # kill -9 releases the flock (the kernel drops it with the process); its staging folder is removed next time.
    model = small_onnx(tmp_path / "small.onnx")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".repo.staging-killed").mkdir()
    (tmp_path / "out" / ".repo.staging-killed" / "half.onnx").write_bytes(b"\0")
    with open(lock_path(tmp_path / "out" / "repo"), "w") as stale:  # a lock file whose holder is gone
        stale.write("999999\n")

    build = start_build(tmp_path, model)
    _, stderr = build.communicate(timeout=240)

    assert build.returncode == 0 and "waiting" not in stderr, stderr
    assert_one_clean_repository(tmp_path)
