"""Run the real tritonserver shipped in the nvidia-pytriton wheel (sandbox.triton_wheel), locally, on 127.0.0.1.

    with TritonServer("build/model_repository_cpu") as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)

The server can also read gs://bucket/prefix (pass CLOUD_STORAGE_EMULATOR_ENDPOINT in env to use a
local emulator). isolate_network=True runs it in its own loopback-only network namespace
(sandbox.netns; needs permission for `unshare -n`, see isolation_available()), so nothing it does (GCS
credential or metadata lookups...) can leave the machine. Its ports are then forwarded to 127.0.0.1
on the host, so clients use it exactly like a normal server.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from triton_gke.contracts.triton import HEALTH_PATHS, PORTS, FlagValue, ServerFlags, compose_flags, triton_command
from triton_gke.sandbox.netns import NetworkNamespace
from triton_gke.sandbox.processes import free_port, interrupts_held, send_signal, stop_process
from triton_gke.sandbox.triton_wheel import TritonStartError, library_dir, prepare_backends, tritonserver_binary

_SHM_DIR = Path("/dev/shm")
_counter = itertools.count()
_START_MARK = "===== start "
# Logged as errors on every start on a machine without a GPU; not the reason for anything.
_HARMLESS_ERRORS = ("CudaDriverHelper has not been initialized",)
# Where tritonserver copies a cloud model repository: $TRITON_GCS_MOUNT_DIRECTORY (S3, Azure alike), /tmp when
# unset; it ignores $TMPDIR (triton-inference-server/core src/filesystem/implementations/gcs.h LocalizePath,
# kDefaultMountDirectory in common.h). Set to the server's own tmp folder, which close() removes.
_MOUNT_DIRECTORY_ENV = ("TRITON_GCS_MOUNT_DIRECTORY", "TRITON_AWS_MOUNT_DIRECTORY", "TRITON_AZURE_MOUNT_DIRECTORY")


# Flags whose value ends in a secret: --http-restricted-api / --grpc-restricted-protocol take
# "API[,API...]:HEADER=VALUE", VALUE being the key clients must send
# (https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md
# #limit-endpoint-access-beta).
_SECRET_FLAGS = ("--http-restricted-api=", "--grpc-restricted-protocol=", "--grpc-restricted-api=")
REDACTED = "***"


def redact_command(command: Sequence[str]) -> list[str]:
    """The command line as it may be logged: the value of every restricted-API key replaced by ***."""
    return [_redact_arg(arg) for arg in command]


def _redact_arg(arg: str) -> str:
    if not arg.startswith(_SECRET_FLAGS):
        return arg
    flag, _, value = arg.partition("=")
    apis, colon, header_and_key = value.partition(":")  # API names hold no colon, header names no "="
    header, equals, _ = header_and_key.partition("=")
    return f"{flag}={apis}{colon}{header}={REDACTED}" if colon and equals else f"{flag}={REDACTED}"


# ---------------------------------------------------------------- the command line

# Seconds the wheel's tritonserver lets requests in flight finish after SIGTERM where nothing else is asked (the
# cluster's line, cluster_flags, asks for the stack's value): short, a local server is stopped at once.
LOCAL_EXIT_TIMEOUT_S = 5
# The flags a TritonServer sets from what it owns: the repository it was given, the backend folder it prepared, the
# loopback addresses and ports it bound (its http_url and friends read them). A caller's value for one is replaced.
OWN_FLAGS = (
    "model-repository",
    "backend-directory",
    "http-address",
    "grpc-address",
    "metrics-address",
    "http-port",
    "grpc-port",
    "metrics-port",
)


def wheel_flags(backends: Path, shm_prefix: str, ports: Mapping[str, int] | None = None) -> ServerFlags:
    """What the wheel's tritonserver needs on this machine, wherever it is started (TritonServer, Model Analyzer's
    triton_server_flags): the python backend folder, 127.0.0.1 only, no GPU metrics, its own shared-memory prefix
    (the python backend's shm-region-prefix-name, https://github.com/triton-inference-server/python_backend
    #running-multiple-instances-of-triton-server); `ports`: the ports to bind, by PORTS' names."""
    addresses = {f"{kind}-address": "127.0.0.1" for kind in PORTS}
    bound = {f"{kind}-port": str(port) for kind, port in (ports or {}).items()}
    return compose_flags(
        {"backend-directory": str(backends), **addresses, **bound},
        {
            "allow-gpu-metrics": "false",
            "backend-config": [f"python,shm-region-prefix-name={shm_prefix}"],
            "exit-timeout-secs": str(LOCAL_EXIT_TIMEOUT_S),
        },
    )


def _checked(flags: Mapping[str, FlagValue]) -> Mapping[str, FlagValue]:
    if not isinstance(flags, Mapping):  # a list of "--flag=value" would be a second copy of a flag waiting to happen
        raise TypeError(f"TritonServer flags: a mapping of flag -> value(s), not {type(flags).__name__}")
    return flags


# ---------------------------------------------------------------- the server


class TritonServer:
    """A tritonserver process with its own ports, backend folder, log and shm prefix.

    start() waits for /v2/health/ready; stop() terminates (SIGTERM, then SIGKILL) and removes
    its /dev/shm files; kill() simulates a crash, suspend()/resume() a hang; restart() keeps
    the same ports, so clients can reconnect. Use as a context manager for start()/close().
    """

    def __init__(
        self,
        model_repository: str | Path,
        *,
        isolate_network: bool = False,
        netns: NetworkNamespace | None = None,
        flags: Mapping[str, FlagValue] | None = None,
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 120.0,
        log_verbose: int = 0,
    ) -> None:
        self.model_repository = str(model_repository)
        # tritonserver flags over the local ones (wheel_flags), each replacing the local value: cluster_flags for the
        # GKE command line, {"model-control-mode": "explicit", "load-model": [...]} for the bench.
        self.flags: Mapping[str, FlagValue] = _checked(flags or {})
        self.extra_env = dict(env or {})
        self.ready_timeout_s = ready_timeout_s
        self.log_verbose = log_verbose
        # In the run folder (sandbox.run_folder) while one is open: tempfile's default directory is then that folder.
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-sandbox-"))
        self.tmp_dir = self.workdir / "tmp"  # its $TMPDIR and model copies (sandbox.private_tmp binds /tmp here too)
        self.tmp_dir.mkdir()
        self.log_path = self.workdir / "tritonserver.log"
        self.shm_prefix = f"triton_sandbox_{os.getpid()}_{next(_counter)}_"
        self._process: subprocess.Popen[bytes] | None = None
        self._ports: dict[str, tuple[int, int]] = {}
        self._own_netns = isolate_network and netns is None
        self.netns = netns
        try:
            if self._own_netns:
                self.netns = NetworkNamespace().open()
            self._ports = self._allocate_ports()
            prepare_backends(self.workdir / "backends")
        except BaseException:
            self.close()
            raise

    # ports: inside (what tritonserver binds) and host-visible (what clients use)
    def _allocate_ports(self) -> dict[str, tuple[int, int]]:
        if self.netns is None:
            return {
                kind: (port, port)
                for kind, port in (("http", free_port()), ("grpc", free_port()), ("metrics", free_port()))
            }
        # In its own namespace tritonserver binds the ports it binds on GKE.
        return {kind: (inner, self.netns.forward(inner)) for kind, inner in PORTS.items()}

    @property
    def http_port(self) -> int:
        return self._ports["http"][1]

    @property
    def grpc_port(self) -> int:
        return self._ports["grpc"][1]

    @property
    def metrics_port(self) -> int:
        return self._ports["metrics"][1]

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"  # tritonclient style: no scheme

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """triton_command: the local flags, then the caller's `flags`, then the flags this server owns (OWN_FLAGS)."""
        inside = {kind: inner for kind, (inner, _) in self._ports.items()}
        local = compose_flags(
            {"model-repository": self.model_repository},
            wheel_flags(self.workdir / "backends", self.shm_prefix, inside),
            {"log-verbose": str(self.log_verbose)},
        )
        own = {flag: local[flag] for flag in OWN_FLAGS}
        return triton_command(str(tritonserver_binary()), local, self.flags, own)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # The copied stub hangs the server unless it finds the wheel's libraries; its embedded
        # interpreter finds numpy/onnxruntime only with this venv's bin/ first on PATH.
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(library_dir()), env.get("LD_LIBRARY_PATH")]))
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
        env.update(dict.fromkeys(("TMPDIR", *_MOUNT_DIRECTORY_ENV), str(self.tmp_dir)))
        env.update(self.extra_env)
        return env

    def start(self) -> TritonServer:
        if self.is_running():
            raise RuntimeError("tritonserver is already running")
        with self.log_path.open("ab") as log:
            logged = " ".join(redact_command(self.command()))  # the log is kept in OUT: never the admin key
            log.write(f"\n{_START_MARK}{time.strftime('%H:%M:%S')}: {logged}\n".encode())
            log.flush()
            command = self.netns.wrap(self.command()) if self.netns else self.command()
            with interrupts_held():  # a signal during the start: raised once _process is set
                self._process = subprocess.Popen(
                    command,
                    env=self.environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: stubs are stopped with it
                )
        self.wait_ready(self.ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running():
                code = self._process.returncode if self._process else None
                self._cleanup_shm()
                raise TritonStartError(f"tritonserver exited with code {code} before it was ready\n{self._diagnosis()}")
            if self.health("ready"):
                return
            time.sleep(0.2)
        self.stop()
        raise TritonStartError(f"tritonserver not ready after {timeout_s:.0f} s (stopped it)\n{self._diagnosis()}")

    def health(self, kind: str = "ready") -> bool:
        """GET /v2/health/{live,ready}; no proxies (traffic stays on 127.0.0.1)."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://{self.http_url}{HEALTH_PATHS[kind]}", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM the server's process group, SIGKILL after timeout_s; return its exit code."""
        if self._process is None:
            return None
        # Its process group: the python stubs are stopped with it, and SIGKILLed if they outlive it.
        # SIGCONT comes with SIGTERM, so a suspended server acts on it.
        try:
            code = stop_process(self._process, timeout_s, group=True)
        finally:  # interrupted or not: the process is gone (wait_or_kill), so its shared memory can go too
            self._process = None
            self._cleanup_shm()
        return code

    def kill(self) -> None:
        """SIGKILL now, like a crash or an OOM kill; follow with restart() or stop()."""
        if self._process is not None and self._process.poll() is None:
            self._signal(signal.SIGKILL)
            self._process.wait()

    def suspend(self) -> None:
        """SIGSTOP the server and its stubs: a hung server (ports open, nothing answers)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> TritonServer:
        self.stop()
        return self.start()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._own_netns and self.netns is not None:
                self.netns.close()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_lines(self) -> list[str]:
        """The log of the current (or last) run, without the decorative tables."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        run = text[text.rfind(_START_MARK) :]
        return [line for line in run.splitlines() if line.strip() and not line.startswith(("|", "+-"))]

    def log_errors(self) -> list[str]:
        """Error lines (glog 'E' lines and 'error:' lines) of the current run."""
        return [
            line
            for line in self.log_lines()
            if (line.startswith("E") and line[1:5].isdigit() or line.startswith("error:"))
            and not any(noise in line for noise in _HARMLESS_ERRORS)
        ]

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_lines()[-lines:]) or "(no server log)"

    def _diagnosis(self) -> str:
        errors = "\n".join(self.log_errors()) or "(no error lines)"
        return f"errors in {self.log_path}:\n{errors}\nlog tail:\n{self.log_tail()}"

    def _signal(self, sig: int) -> None:
        if self._process is not None:
            send_signal(self._process, sig, group=True)  # the group start() created for the server

    def _cleanup_shm(self) -> None:
        for path in glob.glob(str(_SHM_DIR / f"{self.shm_prefix}*")):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def __enter__(self) -> TritonServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
