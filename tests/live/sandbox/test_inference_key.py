"""Issue 44, with the real tritonserver (the PyPI wheel's 2.51) and the GKE command line (contracts/triton.py):
inference without the key is refused over HTTP and gRPC (0 served), with it every request is served, and the key
change (docs/security.md) fails no request. One module-scoped run: two small servers, about half a minute.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from triton_gke.contracts.triton import inference_key_header
from triton_gke.sandbox import inference_key as proof
from triton_gke.sandbox.triton import TritonServer

N = 20  # inferences per protocol and case


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory):
    repository = proof.build_repository(tmp_path_factory.mktemp("inference-key"))
    keys = {"a": proof.new_key(), "b": proof.new_key()}
    with ExitStack() as stack:
        server = proof.start_server(repository, keys["a"], "a", stack)
        yield repository, keys, server, stack


def test_without_the_key_nothing_is_served(keyed: tuple[Path, dict[str, str], TritonServer, ExitStack]) -> None:
    _, keys, server, _ = keyed
    header = inference_key_header("a")
    for headers in ({}, {header: "wrong-" + keys["a"]}, {inference_key_header("b"): keys["a"]}):
        served = proof.count_served(lambda: (server,), headers, N)
        assert served.served == {"http": 0, "grpc": 0}, (headers.keys(), served)
    assert server.health("ready"), "the health group stays open: the load balancer's check needs no key"


def test_with_the_key_everything_is_served(keyed: tuple[Path, dict[str, str], TritonServer, ExitStack]) -> None:
    _, keys, server, _ = keyed
    served = proof.count_served(lambda: (server,), {inference_key_header("a"): keys["a"]}, N)
    assert served.served == {"http": N, "grpc": N}, served


def test_the_key_change_fails_no_request_that_carries_both_keys(
    keyed: tuple[Path, dict[str, str], TritonServer, ExitStack],
) -> None:
    repository, keys, server, stack = keyed
    change = proof.key_change(repository, keys, server, N, stack)
    assert change.failed == 0, change
    assert change.during.served == change.after.served == {"http": N, "grpc": N}
    # Why clients send both during the change: the new slot refuses the old key alone.
    assert change.old_key_only_on_new.served == {"http": 0, "grpc": 0}
