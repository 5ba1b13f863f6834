"""A real Prometheus (Debian's `prometheus` package) on 127.0.0.1, running the in-cluster config on local processes.

    prom = LocalPrometheus()
    config = to_file_sd(prometheus_config(region, stack, self_address=prom.address), sd_dir)
    write_file_sd_targets(sd_dir, "triton", [local_pod(TRITON_PODS, "triton-0", {"metrics": "127.0.0.1:8002"})])
    with prom.start(render_yaml(config)):
        prom.query("up")

The TSDB lives in a temporary folder removed on close; nothing listens beyond 127.0.0.1. The config itself is
built in observability.prometheus_config; only its pod discovery is swapped here (file_sd, below).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_gke.observability.prometheus_config import META_PREFIX, meta_label, prometheus_config, render_yaml
from triton_gke.observability.rules import rules_yaml
from triton_gke.observability.settings import (
    DCGM_PODS,
    LOCUST_MASTER_PODS,
    TRITON_PODS,
    MonitoringError,
    PodSelector,
    SloSettings,
)
from triton_gke.sandbox.processes import free_port, interrupts_held, stop_process

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Seconds between SIGTERM and SIGKILL (the grace it always had); its TSDB is removed on close anyway.
STOP_GRACE_S = 10.0


class PrometheusError(RuntimeError):
    """Prometheus did not start, or answered a query with an error (the message says which)."""


def prometheus_binary() -> Path:
    path = shutil.which("prometheus")
    if path is None:
        raise PrometheusError("prometheus is not installed: apt-get install --no-install-recommends prometheus")
    return Path(path)


class LocalPrometheus:
    """A prometheus process with its own port, temporary TSDB and log."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
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
        with self.log_path.open("ab") as log, interrupts_held():  # a signal during the start: raised once it is ours
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
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
        if self._process is not None:
            stop_process(self._process, STOP_GRACE_S)  # started in its own session, but alone: no group to stop
        self._process = None
        with contextlib.suppress(OSError):
            shutil.rmtree(self.workdir)

    def __enter__(self) -> LocalPrometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- file_sd: the in-cluster config, on local processes
# In the cluster every job discovers pods with kubernetes_sd_configs (role: pod). Here each discovery block reads
# a file_sd file instead, whose targets carry the labels kubernetes_sd would give a pod's container ports
# (https://prometheus.io/docs/prometheus/latest/configuration/configuration/#pod): the same relabelling then runs
# on local processes, and on Prometheus builds without kubernetes_sd (Debian's).


def file_sd_path(sd_dir: Path, job: str) -> Path:
    return Path(sd_dir) / f"{job}.json"


def to_file_sd(config: Mapping[str, Any], sd_dir: Path, refresh_interval: str = "5s") -> dict[str, Any]:
    """A copy of `config` whose kubernetes_sd_configs blocks read sd_dir/JOB.json instead."""
    swapped = copy.deepcopy(dict(config))
    for job in swapped.get("scrape_configs", []):
        if job.pop("kubernetes_sd_configs", None) is not None:
            files = [str(file_sd_path(sd_dir, job["job_name"]))]
            job["file_sd_configs"] = [{"files": files, "refresh_interval": refresh_interval}]
    return swapped


@dataclass(frozen=True)
class LocalPod:
    """A process standing in for a pod: its ports map container port names to host:port."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, str]
    node: str = "local-node"
    phase: str = "Running"
    container: str = "main"
    ip: str = "127.0.0.1"
    annotations: Mapping[str, str] = field(default_factory=dict)


def local_pod(selector: PodSelector, name: str, ports: Mapping[str, str], **options: Any) -> LocalPod:
    """A LocalPod that the selector's job would discover."""
    return LocalPod(name, selector.namespace, dict(selector.labels), ports, **options)


def pod_target_groups(pod: LocalPod) -> list[dict[str, Any]]:
    """The file_sd groups kubernetes_sd (role: pod) would produce: one per container port."""
    common = {
        f"{META_PREFIX}namespace": pod.namespace,
        f"{META_PREFIX}pod_name": pod.name,
        f"{META_PREFIX}pod_node_name": pod.node,
        f"{META_PREFIX}pod_phase": pod.phase,
        f"{META_PREFIX}pod_ip": pod.ip,
        f"{META_PREFIX}pod_ready": "true",
        f"{META_PREFIX}pod_container_name": pod.container,
    }
    for key, value in pod.labels.items():
        common[meta_label(key)] = value
        common[meta_label(key).replace("pod_label_", "pod_labelpresent_", 1)] = "true"
    return [
        {"targets": [address], "labels": {**common, **_port_labels(name, address)}}
        for name, address in pod.ports.items()
    ]


def _port_labels(name: str, address: str) -> dict[str, str]:
    port = address.rsplit(":", 1)[-1]
    if not port.isdigit():
        raise MonitoringError("ports", f"{address!r} (port {name!r}) is not host:port")
    return {
        f"{META_PREFIX}pod_container_port_name": name,
        f"{META_PREFIX}pod_container_port_number": port,
        f"{META_PREFIX}pod_container_port_protocol": "TCP",
    }


def write_file_sd_targets(sd_dir: Path, job: str, pods: Sequence[LocalPod]) -> Path:
    """Write (atomically: Prometheus watches the file) the targets of `pods` for `job`."""
    path = file_sd_path(sd_dir, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    groups = [group for pod in pods for group in pod_target_groups(pod)]
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(groups, handle, indent=2)
    os.replace(tmp, path)
    return path


def local_prometheus_config(
    out_dir: Path,
    region: str,
    stack: str,
    slo: SloSettings,
    self_address: str,
    triton_pods: Sequence[LocalPod],
    locust_pods: Sequence[LocalPod],
    interval: str,
) -> str:
    """The in-cluster prometheus.yml for local processes: writes out_dir/rules.yml and the file_sd targets
    (no DCGM exporter without a GPU) and returns the config text, kubernetes_sd swapped for file_sd."""
    rules = Path(out_dir) / "rules.yml"
    rules.write_text(rules_yaml(slo, region), encoding="utf-8")
    sd_dir = Path(out_dir) / "file_sd"
    write_file_sd_targets(sd_dir, TRITON_PODS.job, triton_pods)
    write_file_sd_targets(sd_dir, LOCUST_MASTER_PODS.job, locust_pods)
    write_file_sd_targets(sd_dir, DCGM_PODS.job, [])
    config = prometheus_config(
        region, stack, scrape_interval=interval, rule_files=[str(rules)], self_address=self_address
    )
    return render_yaml(to_file_sd(config, sd_dir, refresh_interval=interval))
