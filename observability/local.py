"""Run a real Prometheus (Debian's `prometheus` package) on 127.0.0.1, for tests and the sandbox.

    prom = LocalPrometheus()
    config = to_file_sd(prometheus_config(region, stack, self_address=prom.address), sd_dir)
    with prom.start(render_yaml(config)):
        prom.query("up")

The TSDB lives in a temporary folder removed on close; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PrometheusError(RuntimeError):
    """Prometheus did not start, or answered a query with an error (the message says which)."""


def prometheus_binary() -> Path:
    path = shutil.which("prometheus")
    if path is None:
        raise PrometheusError("prometheus is not installed: apt-get install --no-install-recommends prometheus")
    return Path(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPrometheus:
    """A prometheus process with its own port, temporary TSDB and log."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="prometheus-sandbox-"))
        self.config_path = self.workdir / "prometheus.yml"
        self.log_path = self.workdir / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def command(self) -> list[str]:
        return [
            str(prometheus_binary()),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={self.address}",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ]

    def start(self, config_text: str, ready_timeout_s: float = 30) -> LocalPrometheus:
        self.config_path.write_text(config_text, encoding="utf-8")
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PrometheusError(f"prometheus exited with code {self._process.returncode}:\n{self.log_tail()}")
            if self._ready():
                return self
            time.sleep(0.1)
        self.close()
        raise PrometheusError(f"prometheus not ready after {ready_timeout_s:.0f} s:\n{self.log_tail()}")

    def _ready(self) -> bool:
        try:
            with _NO_PROXY.open(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/PATH; returns `data`, raises PrometheusError with Prometheus' error text."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with _NO_PROXY.open(url, timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as err:
            body = json.load(err)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (empty when nothing matches)."""
        return self.api("query", query=expr)["result"]

    def targets(self) -> dict[str, list[dict[str, Any]]]:
        return self.api("targets")

    def firing(self, alertname: str) -> list[dict[str, str]]:
        """Labels of the firing instances of an alert (ALERTS{alertstate="firing"})."""
        return [r["metric"] for r in self.query(f'ALERTS{{alertname="{alertname}", alertstate="firing"}}')]

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.is_file():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:]) or "(empty log)"

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        with contextlib.suppress(OSError):
            shutil.rmtree(self.workdir)

    def __enter__(self) -> LocalPrometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
