"""sandbox.processes without child processes: free_port."""

from __future__ import annotations

import socket

from triton_gke.sandbox.processes import free_port


def test_free_port_can_be_bound_at_once() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.create_server(("127.0.0.1", port)) as server:
        assert server.getsockname()[1] == port
