"""sandbox.components: the sandbox's tritonserver runs the GKE command line, each flag once, with the local server's
own repository and ports (the command line's composition: tests/unit/contracts/test_server_command.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from triton_gke.contracts.triton import parse_flags, triton_server_args
from triton_gke.sandbox import components


def test_the_gke_command_line_is_kept_but_for_the_local_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(components, "private_tmp_available", lambda: False)  # its probe starts a process
    gcs = SimpleNamespace(internal_endpoint="http://127.0.0.1:9")
    server = components.prepare_triton("gs://b/p", gcs, None, "k")  # type: ignore[arg-type]
    try:
        local = parse_flags(server.command()[1:])
    finally:
        server.close()
    gke = parse_flags(triton_server_args("gs://b/p", gpu=False, admin_key="k")[1:])
    ports = {f"{kind}-port": str(port) for kind, port in (("http", server.http_port), ("grpc", server.grpc_port))}
    assert {flag: local[flag] for flag in gke} == {**gke, **ports, "metrics-port": str(server.metrics_port)}
