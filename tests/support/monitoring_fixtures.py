"""A live monitoring stack on 127.0.0.1: real tritonserver, real Prometheus, real Locust.

Triton serves two CPU twins of the reference model: `original` and a copy made slower than the
test SLO on purpose. Triton gets the metrics flags of the GKE deployment (k8s.triton). Prometheus
runs the generated prometheus.yml with its kubernetes_sd blocks swapped for file_sd, whose
targets carry the labels the pods would have in the cluster, and the generated rules with a
short test SLO. One headless Locust per model (the project's locustfile) keeps load on both.

Use from a test module with `pytest_plugins = ("tests.support.monitoring_fixtures",)`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.model_repo.build import build_repository
from triton_gke.model_repo.cpu_twin import delayed_copy
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings
from triton_gke.observability.settings import LOCUST_MASTER_PODS, TRITON_PODS, SloSettings
from triton_gke.sandbox.processes import free_port, stop_process
from triton_gke.sandbox.prometheus import LocalPod, LocalPrometheus, local_pod, local_prometheus_config
from triton_gke.sandbox.triton import TritonServer

LOCUSTFILE = PROJECT_DIR / "loadtest" / "locustfile.py"
REGION = "local-test-region"
NORMAL_MODEL = "original"
SLOW_MODEL = "original_slow"
# ResNet-50 on 2 busy cores answers in ~0.2-0.5 s; the slow twin sleeps 4 s more per execution. The SLO sits
# between: the slow twin's p95 is over it by its sleep alone (4000 > 3000 ms, however fast the cores), and the
# normal model keeps 6x headroom (1500 ms, 3x, was tight with the slow twin and Locust on the same 2 cores).
LIVE_SLO = SloSettings(latency_ms=3000, for_minutes=0.25)
INJECTED_DELAY_MS = 4000
SCRAPE_INTERVAL = "1s"
# Only a bound for a run left behind: the fixture stops Locust when the module's tests are done. 180 s was within
# reach of those tests on busy cores (40 s alone; their waits end when the data is there), and the SLO alert's test
# needs the load until its end.
LOAD_SECONDS = 1800


@dataclass(frozen=True)
class LiveStack:
    prometheus: LocalPrometheus
    triton: TritonServer
    slo: SloSettings
    region: str
    pods: dict[str, LocalPod]  # triton, locust-normal, locust-slow
    repository: Path
    normal_model: str = NORMAL_MODEL
    slow_model: str = SLOW_MODEL


def triton_metrics_flags() -> dict[str, str | tuple[str, ...]]:
    """The metrics flags of the GKE deployment's command line, nothing else of it."""
    from triton_gke.contracts.triton import cluster_flags

    flags = cluster_flags("unused", gpu=False)
    return {flag: flags[flag] for flag in ("allow-metrics", "metrics-config")}


def monitoring_triton(repository: Path) -> TritonServer:
    """live_stack's tritonserver, not started: the local flags and the GKE line's metrics flags."""
    return TritonServer(repository, flags=triton_metrics_flags(), ready_timeout_s=240)


class LocustRun:
    """`locust --headless` with the project's locustfile against one model; metrics on 127.0.0.1."""

    def __init__(self, triton_url: str, model: str, workdir: Path, users: int, rps: float) -> None:
        self.metrics_port = free_port()
        self.log_path = workdir / f"locust-{model}.log"
        self.env = {
            **os.environ,
            "model": model,
            "saddr": triton_url,
            "rps": str(rps),
            "protocol": "http",
            "payload": "fp32",
            "metrics_port": str(self.metrics_port),
            "metrics_addr": "127.0.0.1",
            "timeout_s": "30",
        }
        locust = Path(sys.executable).with_name("locust")
        self.command = [str(locust), "-f", str(LOCUSTFILE), "--headless", "-u", str(users), "-r", str(users)]
        self.command += ["-t", f"{LOAD_SECONDS}s", "--only-summary", "--loglevel", "WARNING"]
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> LocustRun:
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self.command, env=self.env, cwd=PROJECT_DIR, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        return self

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, 15)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.is_file() else "(no log)"


def _build_models(root: Path) -> Path:
    settings = ModelRepoSettings(variants=(next(v for v in REFERENCE_VARIANTS if v.name == NORMAL_MODEL),))
    built = build_repository(settings, root / "gpu", root / "cpu")
    delayed_copy(built.cpu_out / NORMAL_MODEL, built.cpu_out / SLOW_MODEL, INJECTED_DELAY_MS)
    return built.cpu_out


def _pods(triton: TritonServer, locusts: dict[str, LocustRun]) -> dict[str, LocalPod]:
    triton_ports = {"http": triton.http_url, "grpc": triton.grpc_url, "metrics": f"127.0.0.1:{triton.metrics_port}"}
    pods = {"triton": local_pod(TRITON_PODS, "triton-local-0", triton_ports, node="local-node-0")}
    for model, run in locusts.items():
        # The web UI port is declared like in the cluster, and never listened on: relabelling must drop it.
        ports = {"web": f"127.0.0.1:{free_port()}", "metrics": f"127.0.0.1:{run.metrics_port}"}
        pods[f"locust-{model}"] = local_pod(LOCUST_MASTER_PODS, f"locust-master-{model}", ports, node="local-node-1")
    return pods


def _prometheus_config(prometheus: LocalPrometheus, root: Path, pods: dict[str, LocalPod]) -> str:
    locusts = [pod for key, pod in pods.items() if key.startswith("locust")]
    return local_prometheus_config(
        root, REGION, "live-test", LIVE_SLO, prometheus.address, [pods["triton"]], locusts, SCRAPE_INTERVAL
    )


@pytest.fixture(scope="module")
def live_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus missing: apt-get install --no-install-recommends prometheus")
    root = tmp_path_factory.mktemp("live_monitoring")
    repository = _build_models(root)
    with contextlib.ExitStack() as stack:
        triton = stack.enter_context(monitoring_triton(repository))
        locusts = {
            "normal": LocustRun(triton.http_url, NORMAL_MODEL, root, users=2, rps=1.5),
            "slow": LocustRun(triton.http_url, SLOW_MODEL, root, users=1, rps=1),
        }
        pods = _pods(triton, locusts)
        prometheus = stack.enter_context(LocalPrometheus())
        prometheus.start(_prometheus_config(prometheus, root, pods))
        for run in locusts.values():
            stack.callback(run.stop)
            run.start()
        yield LiveStack(prometheus, triton, LIVE_SLO, REGION, pods, repository)
