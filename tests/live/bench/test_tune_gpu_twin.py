"""Issue 46: `bench tune --url --search screen` against the real tritonserver serving a GPU twin keeps batching.

The twin (model_repo/gpu_twin.py) serves `original` with the T4 INT8 curve at k = 20 (a batch of 16 costs ~4.5
batch-1 executions: batching pays) under its batching configuration; the screen reads the curve from the twin's own
configuration and predicts the dynamic batcher (bench/metrics/batch_queue.py). Before issue 46 it ranked by M/D/c at
batch 1, where batching off could only look better."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.live.bench.test_tune import TUNING_KEYS
from tests.support.project_folder import make_project_folder
from triton_gke.cli.main import main
from triton_gke.model_repo.gpu_twin import TwinSpec, read_curves, write_twin
from triton_gke.sandbox.triton import TritonServer

K = 20.0
SLO_MS = 100 * K  # the reference's p95 <= 100 ms, times k


def gpu_stack(project: Path) -> str:
    dev = (project / "Pulumi.dev.yaml").read_text(encoding="utf-8")
    dev = "\n".join(line for line in dev.splitlines() if "triton-gke:gpuSpot:" not in line)
    keys = {**TUNING_KEYS, "sloLatencyMs": int(SLO_MS)}
    lines = "".join(f"\n  triton-gke:{key}: {value}" for key, value in keys.items())
    (project / "Pulumi.gputwin.yaml").write_text(f"{dev.rstrip()}{lines}\n")
    return "gputwin"


def test_the_screen_keeps_batching_on_a_gpu_twin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project_folder(tmp_path / "project")
    monkeypatch.chdir(project)
    repository = tmp_path / "twins"
    curve = read_curves()["trt_int8"]
    # The server's own configuration, the tuner's default, is batching OFF: keeping batching means finding it.
    write_twin(repository, TwinSpec("original", curve, K, 1, (1,), 0, 1, gpu_state_file=str(tmp_path / "gpu")))
    explicit = {"model-control-mode": "explicit", "load-model": ["original"]}
    out = tmp_path / "out"
    with TritonServer(repository, flags=explicit, ready_timeout_s=300) as server:
        args = ["bench", "tune", "--url", server.http_url, "--stack", gpu_stack(project), "--search", "screen",
                "--budget-minutes", "3", "--max-candidates", "6", "--seed", "46", "--out", str(out)]  # fmt: skip
        assert main(args) == 0, capsys.readouterr().err[-2000:]
    report = json.loads((out / "tune.json").read_text(encoding="utf-8"))
    rows = [row for rows in report["machine"]["screen"]["measurements"].values() for row in rows]
    assert rows and all(row["model"] == "batcher" for row in rows)  # the batcher's prediction, not M/D/c
    assert report["default"]["max_batch_size"] == 1
    assert report["best"]["max_batch_size"] > 1 and report["recommended"]["max_batch_size"] > 1, report["best"]
    off = [c for c in report["candidates"] if c["max_batch_size"] == 1 and c["capacities"]]
    on = [c for c in report["candidates"] if c["max_batch_size"] > 1 and c["capacities"]]
    for candidate in off:  # where no batching was visited, it is predicted below every batching candidate's best
        assert max(candidate["capacities"]) < max(max(c["capacities"]) for c in on)
