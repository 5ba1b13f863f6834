"""The production data path, locally: model repository -> sync -> gs:// bucket -> Triton.

The CPU twins are synced with model_repo.sync into a GCS emulator, and a real tritonserver
is started with --model-repository=gs://BUCKET/PREFIX. Emulator and server share one
loopback-only network namespace, so nothing Triton's GCS client does (credential or
metadata lookups) can leave the machine; this test process reaches both through ports
forwarded to 127.0.0.1. The model has random weights: this checks serving, not accuracy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from triton_gke.model_repo.build import BuildResult
from triton_gke.model_repo.resnet50 import synthetic_images
from triton_gke.model_repo.sync import SyncReport, sync_repository
from triton_gke.sandbox.gcs_emulator import TRITON_ENV, GcsEmulator
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.triton_fixtures",)

pytestmark = pytest.mark.skipif(not isolation_available(), reason="no permission for `unshare -n` here")

BUCKET = "triton-models"
PREFIX = "repository/v1"


@dataclass(frozen=True)
class GcsTriton:
    server: TritonServer
    gcs: GcsEmulator
    sync: SyncReport
    client: httpclient.InferenceServerClient


@pytest.fixture(scope="module")
def gcs_triton(model_repos: BuildResult) -> Iterator[GcsTriton]:
    """Emulator + tritonserver in one namespace, the bucket filled by model_repo.sync."""
    with NetworkNamespace() as netns, GcsEmulator(netns=netns) as gcs:
        gcs.client().create_bucket(BUCKET)
        report = sync_repository(model_repos.cpu_out, BUCKET, PREFIX, gcs.client())
        server = TritonServer(
            f"gs://{BUCKET}/{PREFIX}",
            netns=netns,
            env={TRITON_ENV: gcs.internal_endpoint},
            ready_timeout_s=240,
        )
        with server:
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
            yield GcsTriton(server, gcs, report, client)


def infer_top1(client: httpclient.InferenceServerClient, model: str, images: np.ndarray) -> list[int]:
    request = httpclient.InferInput("input", list(images.shape), "FP32")
    request.set_data_from_numpy(images)
    # Name the output: without it, tritonclient 2.73 cannot reshape a 2.51 server's reply.
    result = client.infer(model, [request], outputs=[httpclient.InferRequestedOutput("probabilities")])
    return result.as_numpy("probabilities").argmax(axis=1).tolist()


def onnxruntime_top1(model_file: Path, images: np.ndarray) -> list[int]:
    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    return session.run(["probabilities"], {"input": images})[0].argmax(axis=1).tolist()


def test_every_model_loads_from_the_bucket(gcs_triton: GcsTriton, model_repos: BuildResult) -> None:
    assert gcs_triton.server.model_repository == f"gs://{BUCKET}/{PREFIX}"
    assert gcs_triton.sync.deleted == [] and gcs_triton.sync.unchanged == 0
    assert all(f"{m}/config.pbtxt" in gcs_triton.sync.uploaded for m in model_repos.models)

    index = {m["name"]: m.get("state") for m in gcs_triton.client.get_model_repository_index()}

    assert index == dict.fromkeys(model_repos.models, "READY")
    assert gcs_triton.client.is_server_ready()


def test_inference_from_the_bucket_matches_onnxruntime(gcs_triton: GcsTriton, model_repos: BuildResult) -> None:
    images = synthetic_images(2, seed=5)
    for model in model_repos.models:
        served = infer_top1(gcs_triton.client, model, images)
        assert served == onnxruntime_top1(model_repos.cpu_out / model / "1" / "model.onnx", images), model


def test_emulator_and_server_share_a_namespace_apart_from_ours(gcs_triton: GcsTriton) -> None:
    def netns(pid: int | str) -> str:
        return os.readlink(f"/proc/{pid}/ns/net")

    server_ns = netns(gcs_triton.server.pid)
    assert server_ns == netns(gcs_triton.gcs.pid)
    assert server_ns != netns("self")
