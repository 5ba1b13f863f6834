"""bench tune --url: tuning a Triton the tuner did not start, through its model-control API.

Each candidate configuration is loaded into the running server with Triton's model repository extension: POST
v2/repository/models/NAME/load with a "config" parameter, "a JSON representation of the model configuration ...
used for loading the model instead of the one in the model directory" (the extension's Load API,
https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md). The
configuration to edit is the server's own, read from GET v2/models/NAME/config (the KServe v2 model configuration
endpoint Triton serves). When the tuning ends, the model is loaded once more with the configuration the server had
before the tuner's first load, and read back: a load without "config" may keep the last override, as Triton reloads a
loaded model only when it sees its repository changed (triton-inference-server/server#2853; #8562 documents unloading
before a reload), and `make test` once found max_batch_size 1 after such a "restore".

A server in the default model-control mode NONE answers load requests with an error ("Model load and unload
requests using the model control protocol will have no affect and will return an error response", Triton's model
management guide, https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/
model_management.html); tritonserver 2.51.0 answers HTTP 503 "explicit model load / unload is not allowed if
polling is enabled" (seen here). The tuner tries one load of the server's own configuration before any
measurement and refuses in one line when it is not allowed.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from triton_gke.bench.runners import runner

MAX_BODY = 1 << 20  # a model configuration is a few KiB; an answer past 1 MiB is not Triton's
TIMEOUT_S = 300.0  # a load of the CPU twin takes seconds; ResNet-50 on a busy machine up to minutes

# What the tuner changes in a configuration (edited below): after the restore the server must serve the original's.
RESTORED_KEYS = ("max_batch_size", "dynamic_batching", "instance_group", "parameters")


class RemoteError(RuntimeError):
    """The running server cannot be tuned (not reachable, no such model, loading not allowed); one line."""


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy: the address is reached directly


def _call(url: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    """(HTTP status, body text) of a GET (body None) or a JSON POST; OSError when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with _opener().open(request, timeout=TIMEOUT_S) as response:
            return response.status, response.read(MAX_BODY).decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read(MAX_BODY).decode("utf-8", "replace")


def _error_text(text: str) -> str:
    try:
        found = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:200] or "no body"
    return " ".join(str(found.get("error", found) if isinstance(found, dict) else found).split())[:200]


@dataclass
class Remote:
    """A running Triton serving `model` at `http` (host:port), and the loads the tuning made through its API."""

    http: str
    model: str
    grpc: str | None = None
    original: dict[str, Any] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)  # the label of every configuration loaded through the API

    @property
    def base(self) -> str:
        return f"http://{self.http}"

    def read_config(self) -> dict[str, Any]:
        try:
            status, text = _call(f"{self.base}/v2/models/{self.model}/config")
        except OSError as err:
            raise RemoteError(f"--url {self.http}: Triton is not reachable ({getattr(err, 'reason', err)})") from None
        if status != 200:
            answer = f"{status} {_error_text(text)}"
            raise RemoteError(f"--url {self.http}: model {self.model!r}: the server answered {answer}")
        try:
            config = json.loads(text)
        except ValueError:
            raise RemoteError(f"--url {self.http}: the model configuration it answered is not JSON") from None
        if not isinstance(config, dict) or not config.get("instance_group"):
            raise RemoteError(f"--url {self.http}: the model configuration it answered has no instance_group")
        return config

    def stats(self) -> dict[str, Any] | None:
        """The model's statistics (GET /v2/models/NAME/stats, Triton's statistics extension,
        server docs/protocol/extension_statistics.md); None when the server answers none."""
        try:
            status, text = _call(f"{self.base}/v2/models/{self.model}/stats")
            found = json.loads(text) if status == 200 else None
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def load(self, config: dict[str, Any] | None, label: str) -> float:
        """Load the model with `config` (None: the repository's own); seconds it took. RemoteError when refused."""
        body: dict[str, Any] = {"parameters": {"config": json.dumps(config)}} if config is not None else {}
        started = time.monotonic()
        try:
            status, text = _call(f"{self.base}/v2/repository/models/{self.model}/load", body)
        except OSError as err:
            raise RemoteError(f"--url {self.http}: the load request failed ({getattr(err, 'reason', err)})") from None
        if status != 200:
            raise RemoteError(
                f"--url {self.http}: the server does not load models through its API: it answered {status} "
                f"{_error_text(text)} (start it with --model-control-mode=explicit)"
            )
        self.loads.append(label)
        return time.monotonic() - started

    def connect(self) -> dict[str, Any]:
        """Read the server's configuration of the model and check it may be loaded: one load of that same
        configuration (a no-op change). RemoteError in one line otherwise."""
        try:
            runner.check_reachable(self.http)
        except runner.BenchError as err:
            raise RemoteError(str(err).replace("--saddr", "--url", 1)) from None
        self.original = self.read_config()
        self.load(self.original, "the server's own configuration (a check that loading is allowed)")
        return self.original

    def restore(self) -> None:
        """Load the configuration the server had before the tuning, and check it is what the server now serves."""
        self.load(self.original, "the server's own configuration again (restored)")
        served = self.read_config()
        changed = sorted(key for key in RESTORED_KEYS if served.get(key) != self.original.get(key))
        if changed:
            raise RemoteError(f"--url {self.http}: model {self.model!r} still serves other {', '.join(changed)}")

    @contextlib.contextmanager
    def serve(self, config: dict[str, Any], label: str) -> Iterator[runner.Endpoint]:
        ready = self.load(config, label)
        yield runner.Endpoint(self.http, self.grpc or self.http, None, None, ready)


def edited(config: dict[str, Any], delay_us: int, preferred: int, largest: int, instances: int,
           threads: int | None, parameter: str) -> dict[str, Any]:  # fmt: skip
    """The server's model configuration with a candidate's batching, instances and (when set) thread parameter."""
    found = copy.deepcopy(config)
    found["max_batch_size"] = largest
    batching = found.setdefault("dynamic_batching", {})
    batching["preferred_batch_size"] = [preferred]
    batching["max_queue_delay_microseconds"] = delay_us
    found["instance_group"][0]["count"] = instances
    if threads is not None:
        found.setdefault("parameters", {})[parameter] = {"string_value": str(threads)}
    return found


def current(config: dict[str, Any], parameter: str) -> tuple[int, int, int, int, int | None]:
    """(delay us, preferred batch, max batch, instances, threads or None) of a model configuration."""
    batching = config.get("dynamic_batching") or {}
    preferred = batching.get("preferred_batch_size") or [config.get("max_batch_size", 0)]
    threads = ((config.get("parameters") or {}).get(parameter) or {}).get("string_value")
    return (
        int(batching.get("max_queue_delay_microseconds", 0)),
        int(preferred[0]),
        int(config.get("max_batch_size", 0)),
        int(config["instance_group"][0].get("count", 1)),
        int(threads) if threads and threads.isdigit() else None,
    )
