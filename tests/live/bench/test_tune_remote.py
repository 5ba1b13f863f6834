"""`triton-gke bench tune --url`: tuning a tritonserver the tuner did not start, through its model-control API.

A real tritonserver serving the CPU twin of `original` runs beside the test, started as a user would start one
(--model-control-mode=explicit); the tuner loads each candidate configuration into it with POST
v2/repository/models/original/load and its "config" parameter (bench/runners/remote.py). What it loaded is checked in
the server's own log, not only in the tuner's report. A server in the default mode (NONE) refuses loads: the tuner says
so in one line and exits 2 before measuring anything."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.live.bench.test_tune import tuning_stack
from tests.support.project_folder import make_project_folder
from triton_gke.bench.runners import runner
from triton_gke.cli.main import main
from triton_gke.sandbox.triton import TritonServer
from triton_gke.settings import from_stack_file


def twin(tmp_path: Path) -> Path:
    settings = from_stack_file("dev")
    variant = next(v for v in settings.model_repo.variants if v.name == "original")
    return runner.build_sandbox_repository(settings.model_repo, [variant], tmp_path / "twin")


def max_batch(server: TritonServer) -> int:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/original/config", timeout=30) as response:
        return json.loads(response.read())["max_batch_size"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder of the test's own, the working directory, as a user's checkout is."""
    folder = make_project_folder(tmp_path / "project")
    monkeypatch.chdir(folder)
    return folder


def test_tune_url_loads_each_configuration_into_the_running_server(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repository = twin(tmp_path)
    out = tmp_path / "out"
    explicit = {"model-control-mode": "explicit", "load-model": ["original"]}
    with TritonServer(repository, flags=explicit, ready_timeout_s=300) as server:
        args = ["bench", "tune", "--url", server.http_url, "--stack", tuning_stack(project), "--max-candidates", "2",
                "--budget-minutes", "1", "--step-seconds", "1", "--start-rps", "4", "--max-rps", "8",
                "--min-requests", "4", "--out", str(out)]  # fmt: skip
        assert main(args) == 0, capsys.readouterr().err[-2000:]
        assert max_batch(server) == 64  # the server's own configuration is loaded again at the end
        server_log = server.log_path.read_text(encoding="utf-8", errors="replace")
    report = json.loads((out / "tune.json").read_text(encoding="utf-8"))
    loads = report["machine"]["remote"]["loads"]
    candidates = [c["label"] for c in report["candidates"]]
    assert len(candidates) == 2 and all(label in loads for label in candidates)  # both loaded through the API
    assert loads[0].startswith("the server's own") and loads[-1].startswith("the server's own configuration again")
    # The server's own account: one load at its start, then the tuner's loads of both configurations (the log of one
    # run held 5 "successfully loaded" lines for the start's load and the tuner's 5: one that changes nothing may be
    # skipped).
    assert server_log.count("successfully loaded 'original'") >= 1 + len(candidates)
    assert all(c["capacities"] for c in report["candidates"])


@pytest.mark.usefixtures("project")
def test_tune_url_refuses_a_server_that_does_not_load_models_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repository = twin(tmp_path)
    with TritonServer(repository, ready_timeout_s=300) as server:  # the default model-control mode, NONE
        code = main(["bench", "tune", "--url", server.http_url, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: --url {server.http_url}: the server does not load models through its API: it "
                          "answered 503 explicit model load / unload is not allowed")  # fmt: skip
    assert not (tmp_path / "out").exists()
