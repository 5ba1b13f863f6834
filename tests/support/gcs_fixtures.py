"""Pytest fixtures for tests that need Google Cloud Storage: a real local emulator.

Load them explicitly in a test module (tests/conftest.py is not ours):

    pytest_plugins = ("tests.support.gcs_fixtures",)
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import storage

from tests.support.onnx_models import onnx_model
from triton_gke.sandbox.gcs_emulator import PYTHON_CLIENT_ENV, GcsEmulator

BIG_FILE_SIZE = 30 * 1000 * 1000
# Where google-auth would look for a metadata server: a closed loopback port, so a
# lookup that should never happen fails at once instead of leaving the machine.
_NO_METADATA = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9", "NO_GCE_CHECK": "True"}


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    """One emulator for the session; STORAGE_EMULATOR_HOST points at it throughout."""
    with GcsEmulator() as emulator, pytest.MonkeyPatch.context() as patch:
        patch.setenv(PYTHON_CLIENT_ENV, emulator.endpoint)
        for name, value in _NO_METADATA.items():
            patch.setenv(name, value)
        yield emulator


@pytest.fixture(scope="session")
def gcs_client(gcs_emulator: GcsEmulator) -> storage.Client:
    return gcs_emulator.client()


@pytest.fixture
def bucket_name(gcs_client: storage.Client) -> str:
    """A fresh, empty bucket per test, so tests never see each other's objects."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    gcs_client.create_bucket(name)
    return name


def write_small_repo(root: Path) -> Path:
    """A few-file model repository shaped like Triton's (configs, versions, extras)."""
    rng = random.Random(7)
    files = {
        "resnet50/config.pbtxt": b'name: "resnet50"\nmax_batch_size: 8\n',
        "resnet50/1/model.onnx": onnx_model(rng.randbytes(64 * 1024)),
        "resnet50/labels.txt": b"cat\ndog\n",
        "preprocess/config.pbtxt": b'name: "preprocess"\nbackend: "python"\n',
        "preprocess/1/model.py": b"class TritonPythonModel:\n    pass\n",
        "empty_model/1/empty.bin": b"",
    }
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    return write_small_repo(tmp_path / "repo")


@pytest.fixture(scope="session")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small repository plus one model with a 30 MB file (read-only for tests)."""
    root = write_small_repo(tmp_path_factory.mktemp("big") / "repo")
    model = root / "resnet50_big"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.onnx").write_bytes(onnx_model(random.Random(1).randbytes(BIG_FILE_SIZE)))
    (model / "config.pbtxt").write_bytes(b'name: "resnet50_big"\n')
    return root
