"""A failed engine build leaves every pod serving the last good version (issue 43, point 2).

With engine-build Jobs, `pulumi up` runs the upload as `sync --stage`, then each region's Job, then the pinning sync,
which waits for every Job's Complete condition (infra/system.py, checked on the plan by
tests/unit/k8s/test_engine_build.py). This runs that order for real: the sync's command lines as the program writes
them (infra/model_upload.py sync_command), the Job's own fetch, build and upload shell lines (k8s/engine_build.py)
with `gcloud` answered by the GCS emulator (tests/support/fake_gcloud.py) and `trtexec` failing, then a real
tritonserver on gs://, which must serve version N. The model's output says which weights answered (y = x + N), and
Triton's reply names the version it loaded.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from google.cloud import storage
from google.protobuf import text_format
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.checkout import PROJECT_DIR
from tests.support.fake_gcloud import install_fake_gcloud
from triton_gke.contracts.paths import TWIN_MODEL_TEMPLATE as TWIN_MODEL_PY
from triton_gke.infra.model_upload import sync_command
from triton_gke.k8s import engine_build
from triton_gke.k8s.engine_build import EngineBuildArgs, build_commands, fetch_commands, upload_commands
from triton_gke.model_repo.engines import PlanModel, engine_filename
from triton_gke.sandbox.gcs_emulator import PYTHON_CLIENT_ENV, TRITON_ENV, GcsEmulator
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.triton import TritonServer

pytestmark = pytest.mark.skipif(not isolation_available(), reason="no permission for `unshare -n` here")

BUCKET = "staged-engines"
PREFIX = "models"
URL = f"gs://{BUCKET}/{PREFIX}"
MODEL = "adder"
TAG = "25.06-py3"
PLAN = engine_filename(TAG, "7.5")
# Served as the CPU twins are (the wheel's tritonserver has the python backend only): the twin's model.py runs the
# version folder's model.onnx, the very file the Job builds its plan from, with ONNX Runtime.
CONFIG = f"""name: "{MODEL}"
backend: "python"
max_batch_size: 8
input {{ name: "x" data_type: TYPE_FP32 dims: [1] }}
output {{ name: "y" data_type: TYPE_FP32 dims: [1] }}
instance_group {{ count: 1 kind: KIND_CPU }}
default_model_filename: "model.py"
"""
# Where google-auth would look for a metadata server: a closed port, so a lookup fails at once (tests/support).
NO_METADATA = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9", "NO_GCE_CHECK": "True"}


def write_adder(repo: Path, weight: float) -> None:
    """The model folder: y = x + weight, version folder 1 (the sync numbers remote versions itself)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        MODEL,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])],
        [numpy_helper.from_array(np.array([weight], np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (repo / MODEL / "1").mkdir(parents=True, exist_ok=True)
    (repo / MODEL / "1" / "model.onnx").write_bytes(model.SerializeToString())
    shutil.copyfile(TWIN_MODEL_PY, repo / MODEL / "1" / "model.py")
    (repo / MODEL / "config.pbtxt").write_text(CONFIG)


def install_trtexec(bin_dir: Path, succeeds: bool) -> None:
    """trtexec as the build step calls it: writes --saveEngine's file, or fails as a build error does."""
    body = (
        'for a in "$@"; do case "$a" in --saveEngine=*) printf engine > "${a#--saveEngine=}";; esac; done'
        if succeeds
        else 'echo "[E] Error[10]: could not find any implementation for node" >&2; exit 1'
    )
    path = bin_dir / "trtexec"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@dataclass
class Deploy:
    """The steps of one `pulumi up` that touch the bucket, in the program's order, on this machine."""

    repo: Path
    work: Path
    env: dict[str, str]

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, shell=True, cwd=PROJECT_DIR, env=self.env, capture_output=True, text=True, timeout=300
        )

    def sync(self, mode: str = "", holds: tuple[str, ...] = ()) -> None:
        """The sync as infra/model_upload.py runs it: "" (upload and pin), "stage" or "pin"."""
        done = self.run(sync_command(sys.executable, self.repo, URL, mode, holds))
        assert done.returncode == 0, done.stderr

    def job(self, monkeypatch: pytest.MonkeyPatch) -> bool:
        """The Job's pod: fetch, build, upload, each in turn, the next only after the last succeeded (init
        containers, https://kubernetes.io/docs/concepts/workloads/pods/init-containers/). True: Complete."""
        monkeypatch.setattr(engine_build, "WORK_DIR", str(self.work))
        args = EngineBuildArgs(
            triton_image_tag=TAG,
            model_repository=URL,
            variants=(PlanModel(MODEL, "FP32", 8, (("x", (1,)),)),),
            accelerator_type="nvidia-tesla-t4",
            compute_capability="7.5",
            writer_email=None,
        )
        for lines in (fetch_commands(args, URL), build_commands(args), upload_commands(args, URL)):
            if self.run(f"bash -c {shlex.quote(chr(10).join(lines))}").returncode != 0:
                return False
        return True

    def up(self, monkeypatch: pytest.MonkeyPatch) -> bool:
        """Stage, the Job, and the pin only if the Job completed (a failed Job fails the update before it)."""
        self.sync("stage")
        completed = self.job(monkeypatch)
        if completed:
            self.sync("pin")
        return completed


@pytest.fixture
def bucket_world(tmp_path: Path) -> Iterator[tuple[NetworkNamespace, GcsEmulator, storage.Client, Deploy]]:
    with NetworkNamespace() as netns, GcsEmulator(netns=netns) as gcs:
        client = gcs.client()
        client.create_bucket(BUCKET)
        bin_dir = tmp_path / "bin"
        install_fake_gcloud(bin_dir)
        env = {
            **os.environ,
            **NO_METADATA,
            PYTHON_CLIENT_ENV: gcs.endpoint,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        (tmp_path / "work").mkdir()
        yield netns, gcs, client, Deploy(tmp_path / "repo", tmp_path / "work", env)


def served(netns: NetworkNamespace, gcs: GcsEmulator, config_name: str | None = None) -> tuple[str, float]:
    """(the version Triton's reply names, y for x = 0) from a fresh tritonserver on the bucket, started with
    --model-config-name when a config name is given (as k8s/triton.py starts a held region's)."""
    flags = {"model-config-name": config_name} if config_name else {}
    with TritonServer(
        URL, netns=netns, env={TRITON_ENV: gcs.internal_endpoint}, ready_timeout_s=240, flags=flags
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        x = httpclient.InferInput("x", [1, 1], "FP32")
        x.set_data_from_numpy(np.zeros((1, 1), np.float32))
        reply = client.infer(MODEL, [x])
        return reply.get_response()["model_version"], float(reply.as_numpy("y")[0, 0])


def names(client: storage.Client) -> list[str]:
    return sorted(b.name[len(PREFIX) + 1 :] for b in client.list_blobs(BUCKET, prefix=f"{PREFIX}/"))


def pinned(client: storage.Client) -> list[int]:
    """The versions the model's config in the bucket pins (version_policy.specific)."""
    text = client.bucket(BUCKET).blob(f"{PREFIX}/{MODEL}/config.pbtxt").download_as_text()
    return list(text_format.Parse(text, mc.ModelConfig()).version_policy.specific.versions)


def test_a_failed_engine_build_leaves_version_n_served_and_a_good_one_pins_n_plus_1(
    bucket_world, monkeypatch: pytest.MonkeyPatch
) -> None:
    netns, gcs, client, deploy = bucket_world
    bin_dir = Path(deploy.env["PATH"].split(os.pathsep, 1)[0])

    write_adder(deploy.repo, 1.0)
    install_trtexec(bin_dir, succeeds=True)
    assert deploy.up(monkeypatch)  # the first deploy: version 1 and its plan
    assert f"{MODEL}/1/{PLAN}" in names(client) and pinned(client) == [1]

    write_adder(deploy.repo, 2.0)  # a new model: version 2
    install_trtexec(bin_dir, succeeds=False)
    assert not deploy.up(monkeypatch)
    # Version 2 is staged beside 1, without a plan; the config still pins 1, whose folder and plan are intact.
    assert {f"{MODEL}/1/model.onnx", f"{MODEL}/1/{PLAN}", f"{MODEL}/2/model.onnx"} <= set(names(client))
    assert f"{MODEL}/2/{PLAN}" not in names(client)
    assert pinned(client) == [1]
    # A pod started now (a preemption, a scale-up, a node upgrade) loads version 1 from the bucket.
    assert served(netns, gcs) == ("1", 1.0)

    install_trtexec(bin_dir, succeeds=True)  # the next `up`, with the build fixed
    assert deploy.up(monkeypatch)
    assert pinned(client) == [2] and f"{MODEL}/2/{PLAN}" in names(client)
    # The sync's files of version 1 go once 2 is pinned; the Job's plan stays (the sync deletes only what it wrote).
    assert [n for n in names(client) if n.startswith(f"{MODEL}/1/")] == [f"{MODEL}/1/{PLAN}"]
    assert served(netns, gcs) == ("2", 2.0)


def test_a_held_region_serves_the_last_version_while_the_others_take_the_new_one(bucket_world) -> None:
    """Per-region pins: the pin's sync with a hold for europe-west4 (as the program runs it for a held region) leaves
    that region's Triton, started with --model-config-name=europe-west4, on version 1, while a server without it
    loads version 2; releasing the hold moves the held region to 2 (triton-inference-server/core
    model_repository_manager.cc GetModelConfigFullPath: configs/NAME.pbtxt where it exists, else config.pbtxt)."""
    netns, gcs, _, deploy = bucket_world
    write_adder(deploy.repo, 1.0)
    deploy.sync()
    write_adder(deploy.repo, 2.0)
    deploy.sync(holds=("europe-west4",))
    assert served(netns, gcs, "europe-west4") == ("1", 1.0)
    assert served(netns, gcs) == ("2", 2.0)
    assert served(netns, gcs, "us-central1") == ("2", 2.0)  # no configs/us-central1.pbtxt: config.pbtxt
    deploy.sync()
    assert served(netns, gcs, "europe-west4") == ("2", 2.0)
