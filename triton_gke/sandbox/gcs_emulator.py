"""A local Google Cloud Storage emulator (gcp-storage-emulator) for tests and demos.

The emulator runs in its own process, on 127.0.0.1 and a free port, with in-memory
storage, so nothing it holds outlives it. Clients made here talk only to it: they
use anonymous credentials and an explicit endpoint, so Google auth and the metadata
server are never consulted.

    with GcsEmulator() as gcs:
        client = gcs.client()
        client.create_bucket("models")

It can also run inside a loopback-only network namespace (sandbox.netns.NetworkNamespace,
or anything with the same wrap/forward methods), next to a
tritonserver started in that namespace: `endpoint` is then a forwarded port for
clients out here, `internal_endpoint` the address processes in the namespace use.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from triton_gke.sandbox.processes import free_port, interrupts_held, stop_process

HOST = "127.0.0.1"
DEFAULT_PROJECT = "sandbox"
# Inside a fresh namespace every port is free; this is the emulator's usual one.
NAMESPACE_PORT = 9023
# Names of the variables that point each kind of client at the emulator:
# the Python client library reads the first, tritonserver's GCS code the second.
PYTHON_CLIENT_ENV = "STORAGE_EMULATOR_HOST"
TRITON_ENV = "CLOUD_STORAGE_EMULATOR_ENDPOINT"
# Seconds between SIGTERM and SIGKILL: it holds nothing worth a clean shutdown (in-memory storage).
STOP_GRACE_S = 5.0


class EmulatorError(RuntimeError):
    """The emulator did not start or did not answer."""


class Namespace(Protocol):
    """A network namespace to run the emulator in (see sandbox.netns.NetworkNamespace)."""

    def wrap(self, cmd: Sequence[str]) -> list[str]: ...

    def forward(self, port: int) -> int: ...


def emulator_client(endpoint: str, project: str = DEFAULT_PROJECT) -> storage.Client:
    """A storage client bound to `endpoint` that can never reach Google.

    Explicit credentials and project stop the library from looking for
    application-default credentials or asking the metadata server for a project.
    """
    return storage.Client(
        project=project,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


# No proxy handler: a proxy from the environment must never see loopback traffic.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers(endpoint: str) -> bool:
    try:
        with _DIRECT.open(endpoint + "/", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class GcsEmulator:
    """gcp-storage-emulator in a subprocess, as a context manager."""

    def __init__(
        self,
        default_bucket: str | None = None,
        netns: Namespace | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.default_bucket = default_bucket
        self.netns = netns
        self.startup_timeout = startup_timeout
        self.port: int | None = None  # the port the emulator binds (in its namespace)
        self.host_port: int | None = None  # the port clients out here connect to
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def endpoint(self) -> str:
        """URL for clients in this process's network."""
        if self.host_port is None:
            raise EmulatorError("the GCS emulator is not running")
        return f"http://{HOST}:{self.host_port}"

    @property
    def internal_endpoint(self) -> str:
        """URL for processes in the emulator's own namespace (same as endpoint without one)."""
        if self.port is None:
            raise EmulatorError("the GCS emulator is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Variables that send the Python client and tritonserver to this emulator,
        for a process in the emulator's namespace (or anywhere, without one)."""
        return {PYTHON_CLIENT_ENV: self.internal_endpoint, TRITON_ENV: self.internal_endpoint}

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def workdir(self) -> Path | None:
        """The emulator's temporary folder (its log), while it runs."""
        return Path(self._workdir.name) if self._workdir is not None else None

    def client(self, project: str = DEFAULT_PROJECT) -> storage.Client:
        return emulator_client(self.endpoint, project)

    @property
    def log(self) -> str:
        """What the emulator has written so far (for failure messages)."""
        if self._workdir is None:
            return ""
        path = Path(self._workdir.name) / "emulator.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> Self:
        if self._process is not None:
            return self
        self._workdir = tempfile.TemporaryDirectory(prefix="gcs-emulator-")
        # On the host, the port is picked before the child binds it and another
        # process may take it in between: two more ports are tried before giving up.
        attempts = [NAMESPACE_PORT] if self.netns else [free_port(HOST) for _ in range(3)]
        for port in attempts:
            if self._launch(port):
                return self
        log = self.log.strip().splitlines()
        self.stop()
        detail = log[-1] if log else "no output"
        raise EmulatorError(f"gcp-storage-emulator did not start: {detail}")

    def _command(self, port: int) -> list[str]:
        command = [sys.executable, "-m", "gcp_storage_emulator", "start"]
        command += ["--host", HOST, "--port", str(port), "--in-memory", "--quiet"]
        if self.default_bucket:
            command += ["--default-bucket", self.default_bucket]
        return self.netns.wrap(command) if self.netns else command

    def _launch(self, port: int) -> bool:
        assert self._workdir is not None
        # A signal during the start is raised once _process is set (interrupts_held).
        with open(Path(self._workdir.name) / "emulator.log", "ab") as log, interrupts_held():
            # cwd is the temp dir: the emulator writes nothing in memory mode, but
            # if it ever did, it must not land in the caller's working tree.
            self._process = subprocess.Popen(
                self._command(port),
                cwd=self._workdir.name,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.port = port
        self.host_port = self.netns.forward(port) if self.netns else port
        if self._wait_until_ready():
            return True
        self._terminate()
        return False

    def _wait_until_ready(self) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if _answers(self.endpoint):
                return True
            time.sleep(0.05)
        return False

    def _terminate(self) -> None:
        process, self._process = self._process, None
        self.port = self.host_port = None
        if process is not None:
            stop_process(process, STOP_GRACE_S)

    def stop(self) -> None:
        self._terminate()
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
