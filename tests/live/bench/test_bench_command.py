"""`triton-gke bench` and `bench pa-rates` as processes: refusals without a traceback, an unreachable target."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.runners import pa_rates, runner


def test_command_line_refusal_has_no_traceback() -> None:
    command = [sys.executable, "-m", "triton_gke.bench", "--max-rps", "1e12"]
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "error: --max-rps 1e+12: expected a rate of at most 1e+06 requests/s\n"


def test_pa_rates_bad_option_is_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.bench.runners.pa_rates", "--rates", "25,,30", "--out", "unused"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and not Path(PROJECT_DIR / "unused").exists()
    assert result.stderr.splitlines() == [
        "error: triton-gke bench pa-rates: --rates '25,,30': expected comma-separated numbers (see --help)"
    ]


def test_a_missing_stack_file_has_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "triton_gke.bench", "--stack", "nope", "--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, "error: --stack 'nope': Pulumi.nope.yaml: no such stack file\n")


def test_an_unreachable_or_unready_saddr_is_refused_before_any_locust(tmp_path: Path) -> None:
    import http.server
    import threading

    from triton_gke.sandbox.processes import free_port

    closed = free_port()
    with pytest.raises(runner.BenchError, match=rf"^--saddr 127.0.0.1:{closed}: Triton is not reachable"):
        runner.check_reachable(f"127.0.0.1:{closed}", timeout_s=1)

    class Answer(http.server.BaseHTTPRequestHandler):
        code = 503

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(Answer.code if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saddr = f"127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(runner.BenchError, match=r"Triton is not ready \(/v2/health/ready answered 503\)"):
            runner.check_reachable(saddr, timeout_s=2)
        Answer.code = 200
        runner.check_reachable(saddr, timeout_s=2)  # ready: no error
        runner.check_reachable(saddr, "grpc", timeout_s=2)  # gRPC: the TCP connection only
    finally:
        server.shutdown()
        server.server_close()
    command = [sys.executable, "-m", "triton_gke.bench", "--target", "stack", "--saddr", f"127.0.0.1:{closed}"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "o")], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.startswith(f"error: --saddr 127.0.0.1:{closed}: Triton is not")
    assert done.stderr.count("\n") == 1 and "[1/" not in done.stdout + done.stderr


def test_pa_rates_meta_says_how_the_folder_was_made(tmp_path: Path) -> None:
    import datetime
    import json

    started = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)
    pa_rates.write_meta(tmp_path / "meta.json", ["--rates", "25,30", "--out", "a b"], started)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["command"] == "triton-gke bench pa-rates --rates 25,30 --out 'a b'"
    assert meta["started_utc"] == "2026-11-30T10:00:00+00:00"
    assert meta["commit"] and meta["cores"] >= 1 and meta["cpu_model"] and meta["onnxruntime"]
