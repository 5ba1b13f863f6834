"""The container command used on GKE starts a real tritonserver here, and keeps admin APIs locked."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from triton_gke.contracts.triton import ADMIN_KEY_HEADER, cluster_flags, triton_server_args
from triton_gke.k8s.triton import PORTS
from triton_gke.model_repo.build import BuildResult
from triton_gke.sandbox.netns import isolation_available
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.triton_fixtures",)
ADMIN_KEY = "test-admin-key"

pytestmark = pytest.mark.skipif(
    not isolation_available(), reason="needs a network namespace so GKE's fixed ports 8000-8002 are free"
)


@pytest.fixture(scope="module")
def gke_args_server(model_repos: BuildResult, tmp_path_factory: pytest.TempPathFactory):
    repository = tmp_path_factory.mktemp("one-model") / "repo"
    repository.mkdir()
    shutil.copytree(Path(model_repos.cpu_out) / "original", repository / "original")
    flags = cluster_flags(str(repository), gpu=False, admin_key=ADMIN_KEY)
    # The runner names the repository and ports itself and adds what only a local run needs (backend dir, 127.0.0.1).
    with TritonServer(repository, isolate_network=True, flags=flags, ready_timeout_s=120) as server:
        yield server


def test_the_gke_command_line_differs_only_in_repository_and_device(tmp_path):
    gke = triton_server_args("gs://bucket/models", gpu=True, admin_key="k")
    local = triton_server_args(str(tmp_path), gpu=False, admin_key="k")
    changed = [(g, c) for g, c in zip(gke, local, strict=True) if g != c]
    assert changed == [
        ("--model-repository=gs://bucket/models", f"--model-repository={tmp_path}"),
        ("--allow-gpu-metrics=true", "--allow-gpu-metrics=false"),
    ]
    assert f"--http-port={PORTS['http']}" in gke and "--strict-readiness=true" in gke and "--exit-on-error=true" in gke


def _infer_once(server: TritonServer) -> np.ndarray:
    client = httpclient.InferenceServerClient(server.http_url)
    image = httpclient.InferInput("input", [1, 224, 224, 3], "FP32")
    image.set_data_from_numpy(np.zeros((1, 224, 224, 3), dtype=np.float32))
    result = client.infer("original", [image], outputs=[httpclient.InferRequestedOutput("probabilities")])
    return result.as_numpy("probabilities")


def test_the_gke_arguments_reach_ready_and_serve(gke_args_server: TritonServer):
    client = httpclient.InferenceServerClient(gke_args_server.http_url)
    assert client.is_server_ready() and client.is_model_ready("original")
    assert _infer_once(gke_args_server).shape == (1, 1000)


def _post(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=b"{}", headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_admin_apis_need_the_admin_key(gke_args_server: TritonServer):
    index = f"http://{gke_args_server.http_url}/v2/repository/index"
    assert _post(index) == 403
    assert _post(index, {ADMIN_KEY_HEADER: "wrong"}) == 403
    assert _post(index, {ADMIN_KEY_HEADER: ADMIN_KEY}) == 200
    unload = f"http://{gke_args_server.http_url}/v2/repository/models/original/unload"
    assert _post(unload) == 403, "an inference client must not be able to unload a model"
    client = httpclient.InferenceServerClient(gke_args_server.http_url)
    assert client.is_model_ready("original")


def test_metrics_include_latency_summaries_for_the_slo(gke_args_server: TritonServer):
    _infer_once(gke_args_server)
    with urllib.request.urlopen(gke_args_server.metrics_url, timeout=10) as response:
        metrics = response.read().decode()
    assert 'quantile="0.95"' in metrics
