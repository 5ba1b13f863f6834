"""Run the real tritonserver shipped in the nvidia-pytriton wheel, locally, on 127.0.0.1.

    with TritonServer("build/model_repository_cpu") as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)

Only the python backend is in the wheel (no onnxruntime/TensorRT backends), so local runs
use the CPU twins. The server can also read gs://bucket/prefix (pass
CLOUD_STORAGE_EMULATOR_ENDPOINT in env to use a local emulator).

isolate_network=True runs the server in its own loopback-only network namespace (needs
permission for `unshare -n`; see isolation_available()), so nothing it does (GCS
credential or metadata lookups...) can leave the machine. Its ports are then forwarded to
127.0.0.1 on the host, so clients use it exactly like a normal server.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import importlib.util
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

CLONE_NEWNET = 0x40000000
_SHM_DIR = Path("/dev/shm")
_counter = itertools.count()
_START_MARK = "===== start "
# Logged as errors on every start on a machine without a GPU; not the reason for anything.
_HARMLESS_ERRORS = ("CudaDriverHelper has not been initialized",)


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


class TritonStartError(RuntimeError):
    """tritonserver exited or did not become ready; the message ends with its log tail."""


# ---------------------------------------------------------------- the wheel's files


def _site_dir() -> Path:
    spec = importlib.util.find_spec("pytriton")  # locate without importing (installed --no-deps)
    if spec is None or not spec.submodule_search_locations:
        raise TritonStartError("nvidia-pytriton is not installed: it provides the tritonserver binary")
    return Path(next(iter(spec.submodule_search_locations))).parent


def tritonserver_binary() -> Path:
    return _site_dir() / "pytriton" / "tritonserver" / "bin" / "tritonserver"


def _library_dir() -> Path:
    return _site_dir() / "nvidia_pytriton.libs"


def prepare_backends(target: Path) -> Path:
    """backends/python from the wheel plus the stub for this Python version."""
    root = _site_dir() / "pytriton" / "tritonserver"
    python = target / "python"
    shutil.copytree(root / "backends" / "python", python, ignore=shutil.ignore_patterns("__pycache__"))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise TritonStartError(f"the wheel has no python backend stub for Python {version}")
    shutil.copy2(stub, python / stub.name)
    return target


# ---------------------------------------------------------------- network namespaces

_LO_UP = """
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
print("ready", flush=True)
sys.stdin.read()
"""


def _setns(path: str) -> None:
    """Move the calling thread (or a forked child before exec) into a network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


@functools.cache
def isolation_available() -> bool:
    """True where this process may create and enter network namespaces (root or CAP_SYS_ADMIN)."""
    if not (shutil.which("unshare") and shutil.which("nsenter") and Path("/proc/self/ns/net").exists()):
        return False
    try:
        with NetworkNamespace() as ns:
            thread_ok: list[bool] = []
            t = threading.Thread(target=lambda: thread_ok.append(_try_setns(ns.path)))
            t.start()
            t.join()
            return bool(thread_ok and thread_ok[0])
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return False


def _try_setns(path: str) -> bool:
    try:
        _setns(path)
        return True
    except OSError:
        return False


class NetworkNamespace:
    """A loopback-only network namespace held open by a small helper process.

    Start processes inside it with `ns.wrap(cmd)` (nsenter); reach their ports from the
    host with `ns.forward(port)`. Closing it ends the helper and the forwarders.
    """

    def __init__(self) -> None:
        self._holder: subprocess.Popen[str] | None = None
        self._forwarders: list[_Forwarder] = []

    def __enter__(self) -> NetworkNamespace:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> NetworkNamespace:
        cmd = ["unshare", "-n", "--", sys.executable, "-c", _LO_UP]
        self._holder = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        line = self._holder.stdout.readline() if self._holder.stdout else ""
        if line.strip() != "ready":
            err = self._holder.stderr.read() if self._holder.stderr else ""
            self.close()
            raise RuntimeError(f"cannot create a network namespace: {err.strip() or 'unshare -n failed'}")
        return self

    @property
    def path(self) -> str:
        if self._holder is None:
            raise RuntimeError("network namespace is not open")
        return f"/proc/{self._holder.pid}/ns/net"

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        """The command, run inside this namespace (nsenter execs it: same pid)."""
        return ["nsenter", f"--net={self.path}", "--", *cmd]

    def forward(self, port: int) -> int:
        """Forward a new host port on 127.0.0.1 to `port` inside the namespace; return it."""
        forwarder = _Forwarder(self.path, port)
        self._forwarders.append(forwarder)
        return forwarder.host_port

    def close(self) -> None:
        for forwarder in self._forwarders:
            forwarder.close()
        self._forwarders.clear()
        if self._holder is not None:
            with contextlib.suppress(OSError):
                self._holder.stdin.close()  # the helper exits when stdin closes
            try:
                self._holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                self._holder.wait()
            for stream in (self._holder.stdout, self._holder.stderr):
                if stream:
                    stream.close()
            self._holder = None


class _Forwarder:
    """TCP relay: 127.0.0.1:host_port on the host -> 127.0.0.1:port inside a namespace."""

    def __init__(self, ns_path: str, port: int) -> None:
        self._ns_path, self._port = ns_path, port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host_port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True, name=f"forward-{port}").start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            _setns(self._ns_path)  # this thread only: the upstream socket is created inside
            upstream = socket.create_connection(("127.0.0.1", self._port), timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        _pump(upstream, client)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RD)


# ---------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 120.0,
        log_verbose: int = 0,
    ) -> None:
        self.model_repository = str(model_repository)
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})
        self.ready_timeout_s = ready_timeout_s
        self.log_verbose = log_verbose
        self.workdir = Path(tempfile.mkdtemp(prefix="triton-sandbox-"))
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
        return {
            kind: (inner, self.netns.forward(inner))
            for kind, inner in (("http", 8000), ("grpc", 8001), ("metrics", 8002))
        }

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
        return [
            str(tritonserver_binary()),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={self.workdir / 'backends'}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--http-port={self._ports['http'][0]}",
            f"--grpc-port={self._ports['grpc'][0]}",
            f"--metrics-port={self._ports['metrics'][0]}",
            "--allow-gpu-metrics=false",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            "--exit-timeout-secs=5",
            f"--log-verbose={self.log_verbose}",
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # The copied stub hangs the server unless it finds the wheel's libraries; its embedded
        # interpreter finds numpy/onnxruntime only with this venv's bin/ first on PATH.
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(_library_dir()), env.get("LD_LIBRARY_PATH")]))
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
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
            with opener.open(f"http://{self.http_url}/v2/health/{kind}", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM the server's process group, SIGKILL after timeout_s; return its exit code."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._signal(signal.SIGTERM)
            self._signal(signal.SIGCONT)  # a suspended server must run to act on SIGTERM
            try:
                self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._process.wait()
        self._signal(signal.SIGKILL)  # stubs left behind in the group, if any
        code = self._process.returncode
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
        self.stop()
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
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)  # the group this class created for the server

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


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll until predicate() is true or the timeout passes; return the last result."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
