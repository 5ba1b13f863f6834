"""bench/runners/remote.py: the model configuration a candidate is loaded with, and the one-line refusals of `bench tune
--url` (the live tests against a real tritonserver: tests/live/bench/test_tune_remote.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from triton_gke.bench.runners.remote import Remote, RemoteError, current, edited
from triton_gke.bench.tuners import tune

# GET v2/models/original/config of the CPU twin on tritonserver 2.51.0 (the fields the tuner reads and writes).
SERVED = {
    "name": "original",
    "max_batch_size": 64,
    "dynamic_batching": {"preferred_batch_size": [64], "max_queue_delay_microseconds": 20000},
    "instance_group": [{"name": "original_0", "kind": "KIND_CPU", "count": 1}],
    "parameters": {},
}


def test_a_candidate_is_the_servers_configuration_with_its_values() -> None:
    config = edited(SERVED, 0, 1, 1, 2, 1, tune.INTRA_PARAMETER)
    assert config["max_batch_size"] == 1 and config["instance_group"][0]["count"] == 2
    assert config["dynamic_batching"]["preferred_batch_size"] == [1]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 0
    assert config["parameters"] == {"intra_op_thread_count": {"string_value": "1"}}
    assert config["name"] == "original" and SERVED["max_batch_size"] == 64  # the server's copy is untouched
    assert current(SERVED, tune.INTRA_PARAMETER) == (20000, 64, 64, 1, None)
    assert current(config, tune.INTRA_PARAMETER) == (0, 1, 1, 2, 1)
    assert tune.remote_edit(SERVED, tune.Candidate(*current(SERVED, tune.INTRA_PARAMETER))) == {
        **SERVED,
        "dynamic_batching": {"preferred_batch_size": [64], "max_queue_delay_microseconds": 20000},
    }


class Answers(BaseHTTPRequestHandler):
    """A stand-in Triton: its readiness, one model's configuration, and loads answered as `load_status` says. A load
    with a "config" makes it serve that configuration, unless `ignores_loads` (a server that kept an override)."""

    load_status = 503
    loads: list[dict] = []
    serving: dict = SERVED
    ignores_loads = False

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v2/health/ready":
            self._answer(200, {})
        elif self.path == "/v2/models/original/config":
            self._answer(200, Answers.serving)
        else:
            self._answer(400, {"error": "Request for unknown model: 'other' is not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        Answers.loads.append(body)
        if Answers.load_status == 200 and "config" in body.get("parameters", {}) and not Answers.ignores_loads:
            Answers.serving = json.loads(body["parameters"]["config"])
        if Answers.load_status == 200:
            self._answer(200, {})
        else:
            self._answer(503, {"error": "explicit model load / unload is not allowed if polling is enabled"})


@pytest.fixture
def stand_in() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Answers.loads, Answers.serving, Answers.ignores_loads = [], SERVED, False
    yield f"127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_server_that_refuses_loads_is_refused_in_one_line(stand_in: str) -> None:
    Answers.load_status = 503
    with pytest.raises(RemoteError) as caught:
        Remote(stand_in, "original").connect()
    assert str(caught.value) == (
        f"--url {stand_in}: the server does not load models through its API: it answered 503 explicit model load / "
        "unload is not allowed if polling is enabled (start it with --model-control-mode=explicit)"
    )
    assert Answers.loads == [{"parameters": {"config": json.dumps(SERVED)}}]  # one load of its own configuration


def test_a_server_that_loads_gets_each_configuration_as_json(stand_in: str) -> None:
    Answers.load_status = 200
    remote = Remote(stand_in, "original")
    assert remote.connect() == SERVED
    with remote.serve(edited(SERVED, 0, 1, 1, 1, None, tune.INTRA_PARAMETER), "no batching") as endpoint:
        assert endpoint.http == stand_in and endpoint.pid is None
        assert Answers.serving["max_batch_size"] == 1
    remote.restore()
    assert json.loads(Answers.loads[1]["parameters"]["config"])["max_batch_size"] == 1
    assert json.loads(Answers.loads[2]["parameters"]["config"]) == SERVED  # the restore: what it served before
    assert Answers.serving == SERVED
    assert remote.loads[1:] == ["no batching", "the server's own configuration again (restored)"]


def test_a_restore_the_server_did_not_take_is_one_line(stand_in: str) -> None:
    """Read back after the restore: a server still serving a candidate is not reported as restored."""
    Answers.load_status = 200
    remote = Remote(stand_in, "original")
    remote.connect()
    with remote.serve(edited(SERVED, 0, 1, 1, 2, None, tune.INTRA_PARAMETER), "no batching"):
        Answers.ignores_loads = True
    with pytest.raises(RemoteError) as caught:
        remote.restore()
    assert str(caught.value) == (
        f"--url {stand_in}: model 'original' still serves other dynamic_batching, instance_group, max_batch_size"
    )


def test_an_unknown_model_and_no_server_are_one_line(stand_in: str) -> None:
    with pytest.raises(RemoteError, match=r"^--url [^\n]*: model 'other': the server answered 400 Request for unknown"):
        Remote(stand_in, "other").connect()
    with pytest.raises(RemoteError, match=r"^--url 127\.0\.0\.1:9: Triton is not reachable [^\n]*$"):
        Remote("127.0.0.1:9", "original").connect()


@pytest.mark.parametrize("argv", [["--url", "http://x:1/v2"], ["--url", ""], ["--grpc-url", "127.0.0.1:8001"]])
def test_bad_url_options_exit_2_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert tune.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --") and err.count("\n") == 1
