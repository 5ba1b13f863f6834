"""The parts of the local sandbox (python -m triton_gke.sandbox.run), each started as it runs on GKE.

Every start_* function either returns a running part or raises ComponentError, whose message is
one line naming the part and the reason; the caller owns the cleanup of what was returned.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from triton_gke.contracts.loadtest import LocustEnvironment, join_headers
from triton_gke.contracts.paths import LOCUSTFILE, project_dir
from triton_gke.contracts.triton import DEFAULT_EXIT_TIMEOUT_S, cluster_flags
from triton_gke.model_repo.sync import SyncError, SyncReport, sync_repository
from triton_gke.observability.settings import LOCUST_MASTER_PODS, TRITON_PODS, SloSettings
from triton_gke.sandbox.gcs_emulator import TRITON_ENV, EmulatorError, GcsEmulator
from triton_gke.sandbox.netns import NetworkNamespace
from triton_gke.sandbox.out_folder import LOCUST_PREFIX, PROMETHEUS_CONFIG
from triton_gke.sandbox.private_tmp import PrivateTmp, private_tmp_available
from triton_gke.sandbox.processes import free_port, interrupts_held, locust_base_environment, stop_process
from triton_gke.sandbox.prometheus import LocalPrometheus, PrometheusError, local_pod, local_prometheus_config
from triton_gke.sandbox.triton import REDACTED, TritonServer, TritonStartError, redact_command

REGION = "sandbox"
# Loading every model from the bucket takes ~10 s here; a busy machine may need much longer.
TRITON_READY_TIMEOUT_S = 240.0
# Where google-cloud-cpp (Triton) and google-auth (Python) would look for a metadata server: a
# closed loopback port, so a lookup that should never happen fails at once and stays local.
NO_METADATA = {"GCE_METADATA_ROOT": "127.0.0.1:9", "GCE_METADATA_HOST": "127.0.0.1:9", "NO_GCE_CHECK": "True"}
# Seconds between SIGTERM and SIGKILL for Locust (the grace it always had).
LOCUST_STOP_GRACE_S = 15.0
_GLOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]+\] ")
# Triton copies each model of a gs:// repository into a folder like this (the path is fixed).
_TRITON_COPY = re.compile(r"^/tmp/folder[A-Za-z0-9]{6}$")


class ComponentError(RuntimeError):
    """A part of the sandbox could not start or run; the message is one line naming it and why."""


def one_line(text: object) -> str:
    return " ".join(str(text).split())


# ---------------------------------------------------------------- storage


def start_emulator(netns: NetworkNamespace | None) -> GcsEmulator:
    emulator = GcsEmulator(netns=netns)
    try:
        return emulator.start()
    except EmulatorError as err:
        emulator.stop()
        reason = str(err).removeprefix("gcp-storage-emulator did not start: ")
        raise ComponentError(f"GCS emulator did not start: {one_line(reason)}") from None


def upload(gcs: GcsEmulator, local_dir: Path, bucket: str, prefix: str) -> SyncReport:
    """Create the bucket and sync the repository into it with the code `pulumi up` runs."""
    url = f"gs://{bucket}/{prefix}"
    try:
        client = gcs.client()
        client.create_bucket(bucket)
        return sync_repository(local_dir, bucket, prefix, client)
    except SyncError as err:
        raise ComponentError(f"upload to {url} failed: {one_line(err)}") from None
    except Exception as err:  # the client's request errors: the emulator stopped answering
        raise ComponentError(f"upload to {url} failed: {type(err).__name__}: {one_line(err)}") from None


# ---------------------------------------------------------------- Triton


def admin_key() -> str:
    """A fresh key for the restricted APIs, like the stack's generated one (letters and digits)."""
    return secrets.token_hex(20)


def prepare_triton(
    repository: str,
    gcs: GcsEmulator,
    netns: NetworkNamespace | None,
    key: str,
    inference_key: str | None = None,
    slot: str = "a",
    exit_timeout_s: int = DEFAULT_EXIT_TIMEOUT_S,
) -> TritonServer:
    """A TritonServer (not started yet) with the GKE command line, reading the bucket through the emulator; with
    `inference_key`, inference needs it in `slot`'s header, as on GKE with inferenceAuth. The server's own
    repository, ports and addresses replace the GKE line's (TritonServer OWN_FLAGS): the same ports inside a network
    namespace, free host ports without one."""
    env = {TRITON_ENV: gcs.internal_endpoint, **NO_METADATA}
    flags = cluster_flags(
        repository,
        gpu=False,
        admin_key=key,
        exit_timeout_s=exit_timeout_s,
        inference_key=inference_key,
        inference_key_slot=slot,
    )
    try:
        server = TritonServer(repository, netns=netns, flags=flags, env=env, ready_timeout_s=TRITON_READY_TIMEOUT_S)
    except (TritonStartError, OSError, RuntimeError) as err:
        raise ComponentError(f"tritonserver could not be prepared: {one_line(err)}") from None
    if private_tmp_available():
        # Its model copies then live in its work folder, which close() removes even after a kill.
        server.netns = PrivateTmp(server.workdir, netns)  # TritonServer only calls wrap() and forward()
    return server


def has_private_tmp(server: TritonServer) -> bool:
    return isinstance(server.netns, PrivateTmp)


def launch_triton(server: TritonServer) -> None:
    """Start it and wait until every model is loaded (--strict-readiness)."""
    try:
        server.start()
    except TritonStartError:
        where, reason = server.model_repository, _reason(server)
        raise ComponentError(f"tritonserver could not load the model repository from {where}: {reason}") from None


def _reason(server: TritonServer) -> str:
    """The server's first real error line, without glog's prefix; its last line if none."""
    lines = server.log_errors() or server.log_lines()[-1:] or ["(no log)"]
    return one_line(_GLOG_PREFIX.sub("", lines[0]))


def masked_command(server: TritonServer, key: str) -> list[str]:
    """The command line for the report: restricted-API keys redacted, and this key wherever else it appears."""
    return [a.replace(key, REDACTED) for a in redact_command(server.command())]


def model_copies(server: TritonServer) -> list[Path]:
    """Folders in the host's /tmp Triton downloaded the models into (from its python stubs' command lines).

    Triton removes them when it exits cleanly; after a SIGKILL they would stay. Only for a server
    without a private /tmp (where the copies are in its work folder anyway).
    """
    if server.pid is None or has_private_tmp(server):
        return []
    import psutil  # the 'local' extra: imported when used, so --help needs no extra

    folders = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(server.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                command = child.cmdline()
                if len(command) > 1 and command[0].endswith("triton_python_backend_stub"):
                    folder = Path(command[1]).parent.parent  # FOLDER/<version>/model.py
                    if _TRITON_COPY.match(str(folder)):
                        folders.add(folder)
    return sorted(folders)


def stop_triton(server: TritonServer, copies: Sequence[Path], log_copy: Path) -> None:
    """Stop the server and its stubs, keep its whole log (shutdown included), remove its model copies."""
    server.stop()
    with contextlib.suppress(OSError):
        shutil.copyfile(server.log_path, log_copy)
    server.close()  # its temporary folder, log included
    for folder in copies:
        shutil.rmtree(folder, ignore_errors=True)


def repository_index(server: TritonServer, headers: Mapping[str, str]) -> tuple[int, list[dict[str, str]]]:
    """HTTP status and models of the model-repository index (a restricted API: it needs the admin key)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
    url = f"http://{server.http_url}/v2/repository/index"
    request = urllib.request.Request(url, data=b"{}", headers=dict(headers), method="POST")
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, []
    except (OSError, ValueError):
        return 0, []


# ---------------------------------------------------------------- Prometheus


class SandboxPrometheus(LocalPrometheus):
    """LocalPrometheus whose TSDB may live in a folder that outlives it (--keep-data)."""

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__()
        self.data_dir = data_dir

    def command(self) -> list[str]:
        command = super().command()
        if self.data_dir is None:
            return command
        return [f"--storage.tsdb.path={self.data_dir}" if a.startswith("--storage.tsdb.path=") else a for a in command]


@dataclass(frozen=True)
class ScrapeTargets:
    """host:port of every port a pod would declare: Triton's three, the Locust master's metrics."""

    triton: Mapping[str, str]
    locust: Mapping[str, str]


def prometheus_files(
    out_dir: Path, prometheus: LocalPrometheus, stack: str, slo: SloSettings, targets: ScrapeTargets, interval: str
) -> str:
    """Write the rules and file_sd targets under out_dir; return the generated prometheus.yml.

    The config is the in-cluster one (region 'sandbox'), with kubernetes_sd swapped for file_sd
    targets carrying the labels the pods would have, so the same relabelling picks the metrics ports.
    """
    triton = local_pod(TRITON_PODS, "triton-sandbox-0", targets.triton)
    locust = local_pod(LOCUST_MASTER_PODS, "locust-master-sandbox", targets.locust)
    text = local_prometheus_config(out_dir, REGION, stack, slo, prometheus.address, [triton], [locust], interval)
    (out_dir / PROMETHEUS_CONFIG).write_text(text, encoding="utf-8")
    return text


def start_prometheus(prometheus: LocalPrometheus, config_text: str) -> LocalPrometheus:
    try:
        return prometheus.start(config_text)
    except PrometheusError as err:
        lines = [line for line in str(err).splitlines()[1:] if line.strip()] or str(err).splitlines()[:1]
        raise ComponentError(f"Prometheus did not start: {one_line(lines[-1])}") from None


def wait_for_first_scrape(prometheus: LocalPrometheus, job: str, timeout_s: float) -> float:
    """Seconds until Prometheus scraped `job` successfully, so the start of a short load is recorded."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        with contextlib.suppress(PrometheusError):
            if prometheus.query(f'up{{job="{job}"}} == 1'):
                return time.monotonic() - started
        time.sleep(0.25)
    raise ComponentError(f"Prometheus did not scrape {job} within {timeout_s:.0f} s: {_scrape_error(prometheus, job)}")


def _scrape_error(prometheus: LocalPrometheus, job: str) -> str:
    try:
        active = [t for t in prometheus.targets()["activeTargets"] if t["labels"].get("job") == job]
    except PrometheusError as err:
        return one_line(err)
    if not active:
        return "no target discovered (check the file_sd targets and relabelling)"
    return one_line(active[0].get("lastError") or f"target {active[0].get('scrapeUrl')} not scraped yet")


# ---------------------------------------------------------------- Locust


@dataclass(frozen=True)
class LoadSettings:
    model: str
    protocol: str
    payload: str
    rps_per_user: int
    users: int
    duration_s: int
    # The stack's locustRate (0: unset, rps_per_user x users applies) and locustArrival, as in the cluster.
    # locustRateSteps is not run here: a shape sets its own length, the sandbox runs for duration_s.
    rate: int = 0
    arrival: str = "poisson"

    def describe(self) -> str:
        rate = f"{self.rate} req/s in all" if self.rate else f"{self.users} users x {self.rps_per_user} req/s"
        return f"{rate} ({self.arrival} arrivals, at most {self.users} in flight)"


class LocustLoad:
    """`locust --headless` with the project's locustfile, configured like the cluster's ConfigMap."""

    def __init__(
        self, load: LoadSettings, triton: TritonServer, out_dir: Path, headers: Mapping[str, str] | None = None
    ) -> None:
        self.load = load
        self.headers = dict(headers or {})  # the inference key's header, as the cluster's Locust sends it
        self.metrics_port = free_port()
        self.csv_prefix = out_dir / LOCUST_PREFIX  # the names out_folder.py lists as the run's own
        self.log_path = out_dir / f"{LOCUST_PREFIX}.log"
        self.saddr = triton.http_url if load.protocol == "http" else triton.grpc_url
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def metrics_address(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    def environment(self) -> dict[str, str]:
        # Every key the locustfile reads is set here or left unset: an ambient value must not leak into the load test.
        env = locust_base_environment()
        locust = LocustEnvironment(
            model=self.load.model,
            saddr=self.saddr,
            # As the stack's ConfigMap has them: the locustfile turns rps per user into arrivals at rps x users
            # (or at `rate` when set), drawn by the stack's arrival process, so users do not fire in lockstep.
            rps=self.load.rps_per_user,
            rate=self.load.rate or None,
            arrival=self.load.arrival,
            protocol=self.load.protocol,
            payload=self.load.payload,
            metrics_port=self.metrics_port,
            metrics_addr="127.0.0.1",
            inference_headers=join_headers(self.headers) or None,
        )
        return env | locust.to_env()

    def command(self) -> list[str]:
        users = str(self.load.users)
        return [
            str(Path(sys.executable).with_name("locust")),
            *("-f", str(LOCUSTFILE), "--headless", "-u", users, "-r", users),
            *("-t", f"{self.load.duration_s}s", "--csv", str(self.csv_prefix)),
            # The report's counts: --json-file is written at exit, complete (sandbox/report.py locust_results).
            *("--json-file", str(self.csv_prefix)),
            # Failed requests are results for the report; a non-zero exit then means Locust itself failed.
            *("--exit-code-on-error", "0", "--only-summary", "--loglevel", "WARNING"),
        ]

    def start(self) -> LocustLoad:
        with self.log_path.open("wb") as log:
            try:
                with interrupts_held():  # a signal during the start: raised once _process is set
                    self._process = subprocess.Popen(
                        self.command(),
                        cwd=project_dir(),
                        env=self.environment(),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # stopped by us, not by a Ctrl-C meant for the sandbox
                    )
            except OSError as err:
                raise ComponentError(f"Locust did not start: {one_line(err)}") from None
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def wait(self, every_s: float, tick: Callable[[float], None]) -> None:
        """Wait for Locust to finish its run, calling tick(elapsed) every `every_s` seconds."""
        assert self._process is not None
        started = time.monotonic()
        limit = self.load.duration_s + 60  # its own start and shutdown on busy cores
        while True:
            try:
                self._process.wait(timeout=every_s)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > limit:
                    raise ComponentError(f"Locust still running {limit:.0f} s after it started; stopped it") from None
                tick(elapsed)
        if self._process.returncode != 0:
            raise ComponentError(f"Locust failed (exit code {self._process.returncode}): {self.last_log_line()}")

    def last_log_line(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        return one_line(lines[-1]) if lines else "(no output)"

    def stop(self) -> None:
        if self._process is not None:
            # Its own session keeps a Ctrl-C meant for the sandbox away from it; it is still stopped alone.
            stop_process(self._process, LOCUST_STOP_GRACE_S)
