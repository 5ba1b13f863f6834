"""sandbox.components: the GKE command line is kept but for the repository and the local ports."""

from __future__ import annotations

import shutil

import pytest

from triton_gke.contracts.triton import triton_server_args
from triton_gke.sandbox.components import gke_flags

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")


def test_the_gke_command_line_is_kept_but_for_the_repository_and_local_ports() -> None:
    gke = triton_server_args("gs://b/p", gpu=False, admin_key="k")
    in_namespace = ["tritonserver", "--model-repository=gs://b/p", "--http-port=8000", "--grpc-port=8001"]
    in_namespace += ["--metrics-port=8002"]
    on_host = [*in_namespace[:2], "--http-port=41001", "--grpc-port=41002", "--metrics-port=41003"]

    assert gke_flags("gs://b/p", "k", in_namespace) == gke[2:]
    host_flags = gke_flags("gs://b/p", "k", on_host)
    assert [a for a in host_flags if "-port=" in a] == on_host[2:]
    assert [a for a in host_flags if "-port=" not in a] == [a for a in gke[2:] if "-port=" not in a]
