"""The inference key with the real tritonserver (issue 44): refused without it, served with it, changed with no
request failing.

Triton checks the key itself (the restricted `inference` API group, contracts/triton.py inference_restrictions): a
request without the slot's header, or with another value, gets HTTP 403 and gRPC UNAVAILABLE ("This API is
restricted" / "This protocol is restricted", server v2.51.0 http_server.cc RespondIfRestricted, infer_handler.cc).
Triton takes one key per API group, so a key change is the order of steps docs/security.md gives: clients send both
slots' keys, the pods roll from slot a to slot b one at a time, then clients drop the old key. Replayed here with two
replicas, one per slot, both serving while requests carrying both keys alternate between them, then the old one
stopped: the moment of a rollout when pods of both slots serve.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_gke.contracts.triton import ServerFlags, cluster_flags, inference_key_header
from triton_gke.sandbox import rollout_model
from triton_gke.sandbox.triton import TritonServer

# Service time of the proof's model: short, these requests are counted, not timed.
SERVICE_MS = 1
PROTOCOLS = ("http", "grpc")


def build_repository(folder: Path) -> Path:
    """The rollout proof's tiny model (rollout_model.py) with a 1 ms service time."""
    rollout_model.build(folder, 1)
    (folder / rollout_model.MODEL / "config.pbtxt").write_text(rollout_model.config_text(SERVICE_MS), encoding="utf-8")
    return folder


def new_key() -> str:
    """A key like the stack's generated ones (40 letters and digits)."""
    return secrets.token_hex(20)


def server_flags(repository: Path, key: str, slot: str) -> ServerFlags:
    """The GKE command line with this slot's inference key (the local server's own repository and ports replace the
    GKE line's: TritonServer OWN_FLAGS)."""
    return cluster_flags(str(repository), gpu=False, admin_key=new_key(), inference_key=key, inference_key_slot=slot)


def new_server(repository: Path, key: str, slot: str) -> TritonServer:
    """A replica (not started) checking `slot`'s key."""
    return TritonServer(repository, flags=server_flags(repository, key, slot), ready_timeout_s=120)


def start_server(repository: Path, key: str, slot: str, stack: ExitStack) -> TritonServer:
    server = new_server(repository, key, slot)
    stack.enter_context(server)
    return server


def infer(
    server: TritonServer,
    protocol: str,
    headers: Mapping[str, str],
    model: str = rollout_model.MODEL,
    dtype: str = "UINT8",
) -> bool:
    """One inference of a zero image ([1,224,224,3] of `dtype`, the load test's input) on `model`; True when Triton
    answered it with the output, False when it refused or failed."""
    module = _client_module(protocol)
    url = server.http_url if protocol == "http" else server.grpc_url
    try:
        client = module.InferenceServerClient(url)
        try:
            tensor = module.InferInput("input", [1, 224, 224, 3], dtype)
            tensor.set_data_from_numpy(np.zeros((1, 224, 224, 3), dtype=np.uint8 if dtype == "UINT8" else np.float32))
            outputs = [module.InferRequestedOutput("probabilities")]
            result = client.infer(model, [tensor], outputs=outputs, headers=dict(headers) or None)
            return result.as_numpy("probabilities") is not None
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - refused (403, UNAVAILABLE) or failed: not served, which is what is counted
        return False


def _client_module(protocol: str):  # noqa: ANN202 - tritonclient.http or tritonclient.grpc
    import tritonclient.grpc
    import tritonclient.http

    return tritonclient.http if protocol == "http" else tritonclient.grpc


@dataclass(frozen=True)
class Served:
    """How many of `sent` inferences Triton answered, per protocol."""

    sent: int
    served: Mapping[str, int]

    def line(self) -> str:
        return ", ".join(f"{p} {self.served[p]}/{self.sent}" for p in PROTOCOLS)


def count_served(
    servers: Callable[[], Sequence[TritonServer]], headers: Mapping[str, str], n: int, **model: str
) -> Served:
    """n inferences per protocol, each to the next of `servers()` (asked again before every request); `model`: infer's
    model and dtype."""
    served = {}
    for protocol in PROTOCOLS:
        turn: Iterator[int] = itertools.count()
        served[protocol] = sum(infer(_next(servers(), next(turn)), protocol, headers, **model) for _ in range(n))
    return Served(n, served)


def _next(servers: Sequence[TritonServer], i: int) -> TritonServer:
    return servers[i % len(servers)]


@dataclass(frozen=True)
class KeyChange:
    """The key change replayed: requests carrying both keys while a slot-a and a slot-b replica serve, then after the
    slot-a replica stopped; and, for contrast, requests carrying only the old key to the slot-b replica."""

    during: Served  # both replicas serving, requests alternating between them
    after: Served  # only the slot-b replica left
    old_key_only_on_new: Served

    @property
    def failed(self) -> int:
        return sum(self.during.sent - s for s in self.during.served.values()) + sum(
            self.after.sent - s for s in self.after.served.values()
        )


def both_keys(keys: Mapping[str, str]) -> dict[str, str]:
    """What a client sends during a key change: every slot's key, each in its header."""
    return {inference_key_header(slot): key for slot, key in keys.items()}


def key_change(repository: Path, keys: Mapping[str, str], old: TritonServer, n: int, stack: ExitStack) -> KeyChange:
    """Start the slot-b replica beside `old` (slot a), send n inferences per protocol with both keys over both, stop
    `old`, send n more to what is left."""
    new = start_server(repository, keys["b"], "b", stack)
    headers = both_keys(keys)
    during = count_served(lambda: (old, new), headers, n)
    old.stop()
    after = count_served(lambda: (new,), headers, n)
    old_only = count_served(lambda: (new,), {inference_key_header("a"): keys["a"]}, n)
    return KeyChange(during, after, old_only)
