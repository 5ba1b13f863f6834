"""The build manifest through the real commands: an edited cache entry and an edited repository are refused by
`triton-gke model-repo` and `model_repo.sync` (GCS emulator)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.cloud import storage

from tests.support.checkout import PROJECT_DIR
from tests.unit.model_repo.test_manifest import REBUILD, build_small, cache_files, edit_in_place

pytest_plugins = ("tests.support.gcs_fixtures",)


def test_a_cache_entry_changed_since_it_was_cached_is_refused_in_one_line(tmp_path: Path) -> None:
    build_small(tmp_path)
    entry = cache_files(tmp_path)[0]
    edit_in_place(entry)
    out = tmp_path / "again"
    command = [sys.executable, "-m", "model_repo", "--out", str(out), "--onnx", str(tmp_path / "small.onnx")]
    command += ["--cache-dir", str(tmp_path / "cache")]

    result = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)

    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {entry}: changed since it was cached") and line.endswith(REBUILD)
    assert not out.exists()


def test_the_sync_cli_uploads_nothing_from_an_edited_repository(
    tmp_path: Path, gcs_client: storage.Client, bucket_name: str
) -> None:
    result = build_small(tmp_path)
    edit_in_place(result.cpu_out / "trt_int8" / "1" / "model.onnx")
    command = [sys.executable, "-m", "triton_gke.model_repo.sync", str(result.cpu_out), f"gs://{bucket_name}/models"]

    sync = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)

    assert sync.returncode == 2 and "Traceback" not in sync.stderr
    [line] = sync.stderr.splitlines()
    int8_file = result.cpu_out / "trt_int8" / "1" / "model.onnx"  # the first INT8 folder in sorted order
    assert line == f"error: {int8_file}: changed since the build (SHA-256 differs from the manifest); {REBUILD}"
    assert list(gcs_client.list_blobs(bucket_name)) == []
    build_small(tmp_path)  # the same folders, rebuilt: now it goes up
    ok = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert any(b.name.endswith("trt_int8/1/model.onnx") for b in gcs_client.list_blobs(bucket_name))
