"""model_repo.sync against a real GCS emulator: idempotence, ordering, interruption, errors."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from model_repo.sync import SyncError, sync_repository
from sandbox.gcs_emulator import PYTHON_CLIENT_ENV, GcsEmulator

# Fixtures: gcs_emulator, gcs_client, bucket_name, small_repo, big_repo.
pytest_plugins = ("tests.gcs_fixtures",)

PREFIX = "models"
REPO_ROOT = Path(__file__).resolve().parents[1]


class StopSync(Exception):
    """Raised by a progress callback to interrupt a sync at a chosen point."""


def sync(repo: Path, client: storage.Client, bucket: str, **kwargs):
    return sync_repository(repo, bucket, PREFIX, client, **kwargs)


def local_md5s(root: Path) -> dict[str, str]:
    """Relative path -> base64 MD5, computed independently of the code under test."""
    return {
        p.relative_to(root).as_posix(): base64.b64encode(
            hashlib.md5(p.read_bytes(), usedforsecurity=False).digest()
        ).decode()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def bucket_objects(client: storage.Client, bucket: str, prefix: str = "") -> dict[str, storage.Blob]:
    """Name (below prefix) -> object, for every object under prefix."""
    return {b.name[len(prefix) :]: b for b in client.list_blobs(bucket, prefix=prefix or None)}


def bucket_md5s(client: storage.Client, bucket: str, prefix: str = "") -> dict[str, str]:
    return {name: b.md5_hash for name, b in bucket_objects(client, bucket, prefix).items()}


def generations(client: storage.Client, bucket: str, prefix: str = f"{PREFIX}/") -> dict[str, int]:
    return {name: blob.generation for name, blob in bucket_objects(client, bucket, prefix).items()}


def assert_matches(client: storage.Client, bucket: str, repo: Path) -> None:
    assert bucket_md5s(client, bucket, f"{PREFIX}/") == local_md5s(repo)


def assert_safe_partial_state(client: storage.Client, bucket: str, repo: Path) -> None:
    """What Triton may see mid-sync: no object differs from its source, and a
    model's config is there only once all of that model's other files are."""
    source = local_md5s(repo)
    present = bucket_md5s(client, bucket, f"{PREFIX}/")
    for name, md5 in present.items():
        assert source.get(name) == md5, f"{name} is half-written or stale"
    for name in present:
        if name.endswith("/config.pbtxt"):
            model = name.split("/")[0] + "/"
            assert all(n in present for n in source if n.startswith(model)), name


def completed_files(calls: list[tuple[str, int, int]]) -> list[str]:
    return [name for name, done, total in calls if done == total]


# --- the client stays local ----------------------------------------------------------


def test_client_talks_only_to_the_emulator(gcs_emulator: GcsEmulator, gcs_client: storage.Client) -> None:
    assert os.environ[PYTHON_CLIENT_ENV] == gcs_emulator.endpoint
    api_base_url = gcs_client._connection.API_BASE_URL
    assert api_base_url == gcs_emulator.endpoint
    assert isinstance(gcs_client._credentials, AnonymousCredentials)


# --- idempotence by content hash -------------------------------------------------------


def test_first_sync_uploads_everything_and_matches_by_hash(gcs_client, bucket_name, small_repo) -> None:
    report = sync(small_repo, gcs_client, bucket_name)

    assert sorted(report.uploaded) == sorted(local_md5s(small_repo))
    assert report.deleted == [] and report.unchanged == 0
    assert report.bytes_uploaded == sum(p.stat().st_size for p in small_repo.rglob("*") if p.is_file())
    assert_matches(gcs_client, bucket_name, small_repo)


def test_second_sync_without_change_sends_nothing(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    before = generations(gcs_client, bucket_name)

    report = sync(small_repo, gcs_client, bucket_name)

    assert (report.uploaded, report.deleted, report.bytes_uploaded) == ([], [], 0)
    assert report.unchanged == len(local_md5s(small_repo))
    assert generations(gcs_client, bucket_name) == before  # no object rewritten


def test_changed_file_is_the_only_one_sent(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    before = generations(gcs_client, bucket_name)
    labels = small_repo / "resnet50" / "labels.txt"
    labels.write_bytes(b"cow\nelk\n")  # same size and a fresh mtime: only the hash differs

    report = sync(small_repo, gcs_client, bucket_name)

    assert report.uploaded == ["resnet50/labels.txt"]
    assert report.bytes_uploaded == labels.stat().st_size
    after = generations(gcs_client, bucket_name)
    assert {n for n in after if after[n] != before[n]} == {"resnet50/labels.txt"}
    assert_matches(gcs_client, bucket_name, small_repo)


def test_removed_files_delete_only_their_objects(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "labels.txt").unlink()
    shutil.rmtree(small_repo / "preprocess")

    report = sync(small_repo, gcs_client, bucket_name)

    # A removed model loses its config first, so Triton never sees it half-deleted.
    assert report.deleted == ["preprocess/config.pbtxt", "preprocess/1/model.py", "resnet50/labels.txt"]
    assert report.uploaded == []
    assert_matches(gcs_client, bucket_name, small_repo)


def test_objects_outside_the_prefix_are_untouched(gcs_client, bucket_name, small_repo) -> None:
    bucket = gcs_client.bucket(bucket_name)
    # "models-old/" shares the prefix's first letters; "models.txt" sits beside it.
    outside = {"other/config.pbtxt": b"x", "models-old/m/1/model.onnx": b"y", "models.txt": b"z"}
    for name, content in outside.items():
        bucket.blob(name).upload_from_string(content)
    before = {name: bucket.get_blob(name).generation for name in outside}

    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "labels.txt").unlink()
    sync(small_repo, gcs_client, bucket_name)

    for name, content in outside.items():
        blob = bucket.get_blob(name)
        assert blob is not None and blob.generation == before[name]
        assert blob.download_as_bytes() == content
    assert_matches(gcs_client, bucket_name, small_repo)


def test_dry_run_reports_without_changing_the_bucket(gcs_client, bucket_name, small_repo) -> None:
    report = sync(small_repo, gcs_client, bucket_name, dry_run=True)

    assert sorted(report.uploaded) == sorted(local_md5s(small_repo))
    assert bucket_md5s(gcs_client, bucket_name) == {}


# --- ordering ---------------------------------------------------------------------------


def test_configs_are_uploaded_after_the_files_of_their_model(gcs_client, bucket_name, small_repo) -> None:
    calls: list[tuple[str, int, int]] = []
    report = sync(small_repo, gcs_client, bucket_name, progress=lambda *c: calls.append(c))

    assert completed_files(calls) == report.uploaded
    # The bucket's own record agrees: generations grow with upload time.
    gens = generations(gcs_client, bucket_name)
    for config in [n for n in gens if n.endswith("/config.pbtxt")]:
        model = config.split("/")[0] + "/"
        others = [g for n, g in gens.items() if n.startswith(model) and n != config]
        assert others and max(others) < gens[config], config


# --- large files ------------------------------------------------------------------------


def test_large_file_streams_in_chunks_with_progress(gcs_client, bucket_name, big_repo) -> None:
    chunk = 1024 * 1024
    calls: list[tuple[str, int, int]] = []
    tracemalloc.start()
    try:
        sync(big_repo, gcs_client, bucket_name, progress=lambda *c: calls.append(c), chunk_size=chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    big = [(done, total) for name, done, total in calls if name == "resnet50_big/1/model.onnx"]
    total = (big_repo / "resnet50_big/1/model.onnx").stat().st_size
    assert [d for d, _ in big] == [*range(chunk, total, chunk), total]
    assert {t for _, t in big} == {total}
    # Only a few chunks were ever in memory, never the 30 MB file.
    assert peak < total / 3, f"peak {peak} bytes"
    assert_matches(gcs_client, bucket_name, big_repo)


# --- interruption -------------------------------------------------------------------------


def test_sync_interrupted_after_some_files_completes_on_rerun(gcs_client, bucket_name, small_repo) -> None:
    done: list[str] = []

    def stop_after_two(name: str, sent: int, total: int) -> None:
        if sent == total:
            done.append(name)
            if len(done) == 2:
                raise StopSync

    with pytest.raises(StopSync):
        sync(small_repo, gcs_client, bucket_name, progress=stop_after_two)
    assert_safe_partial_state(gcs_client, bucket_name, small_repo)
    assert len(bucket_md5s(gcs_client, bucket_name)) == 2

    report = sync(small_repo, gcs_client, bucket_name)

    assert sorted(report.uploaded) == sorted(set(local_md5s(small_repo)) - set(done))
    assert_matches(gcs_client, bucket_name, small_repo)


def test_sync_interrupted_inside_a_large_file_leaves_no_partial_object(gcs_client, bucket_name, big_repo) -> None:
    def stop_mid_file(name: str, sent: int, total: int) -> None:
        if sent < total:
            raise StopSync

    with pytest.raises(StopSync):
        sync(big_repo, gcs_client, bucket_name, progress=stop_mid_file)
    present = bucket_md5s(gcs_client, bucket_name, f"{PREFIX}/")
    assert "resnet50_big/1/model.onnx" not in present
    assert "resnet50_big/config.pbtxt" not in present
    assert_safe_partial_state(gcs_client, bucket_name, big_repo)

    sync(big_repo, gcs_client, bucket_name)
    assert_matches(gcs_client, bucket_name, big_repo)


def run_cli(*args: str, endpoint: str) -> subprocess.Popen[str]:
    env = {**os.environ, PYTHON_CLIENT_ENV: endpoint, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "model_repo.sync", *args],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_cli_killed_mid_upload_then_rerun_ends_identical(gcs_emulator, gcs_client, bucket_name, big_repo) -> None:
    url = f"gs://{bucket_name}/{PREFIX}"
    cli = run_cli(str(big_repo), url, endpoint=gcs_emulator.endpoint)
    assert cli.stdout is not None
    for line in cli.stdout:
        if "MiB (" in line:  # a chunk of the 30 MB file has reached the bucket
            cli.send_signal(signal.SIGKILL)
            break
    cli.communicate(timeout=30)
    assert cli.returncode == -signal.SIGKILL
    assert_safe_partial_state(gcs_client, bucket_name, big_repo)

    rerun = run_cli(str(big_repo), url, endpoint=gcs_emulator.endpoint)
    out, err = rerun.communicate(timeout=60)

    assert rerun.returncode == 0, err
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"synced {big_repo} -> {url}: uploaded ") and "unchanged" in summary
    assert_matches(gcs_client, bucket_name, big_repo)
    third, _ = run_cli(str(big_repo), url, endpoint=gcs_emulator.endpoint).communicate(timeout=60)
    assert f"uploaded 0 files (0 B), deleted 0, unchanged {len(local_md5s(big_repo))}" in third


def test_file_edited_during_sync_is_refused_not_uploaded(gcs_client, bucket_name, small_repo) -> None:
    victim = small_repo / "resnet50" / "labels.txt"  # sent 4th, after model.onnx

    def edit_victim_once(name: str, sent: int, total: int) -> None:  # on the 1st file done
        if sent == total and victim.read_bytes() == b"cat\ndog\n":
            victim.write_bytes(b"cow\nelk\n")

    with pytest.raises(SyncError, match=r"labels\.txt") as caught:
        sync(small_repo, gcs_client, bucket_name, progress=edit_victim_once)
    assert "\n" not in str(caught.value)
    assert "resnet50/labels.txt" not in bucket_md5s(gcs_client, bucket_name, f"{PREFIX}/")
    assert "resnet50/config.pbtxt" not in bucket_md5s(gcs_client, bucket_name, f"{PREFIX}/")

    sync(small_repo, gcs_client, bucket_name)
    assert_matches(gcs_client, bucket_name, small_repo)


# --- bad input --------------------------------------------------------------------------------


def one_line_error(excinfo: pytest.ExceptionInfo[SyncError]) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message
    return message


def test_missing_bucket_is_named(gcs_client, small_repo) -> None:
    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, "no-such-bucket-here")
    assert "gs://no-such-bucket-here" in one_line_error(caught)


def test_missing_local_dir_is_named(gcs_client, bucket_name, tmp_path) -> None:
    with pytest.raises(SyncError) as caught:
        sync(tmp_path / "nowhere", gcs_client, bucket_name)
    assert str(tmp_path / "nowhere") in one_line_error(caught)


def test_empty_local_dir_is_refused_and_deletes_nothing(gcs_client, bucket_name, small_repo, tmp_path) -> None:
    sync(small_repo, gcs_client, bucket_name)
    empty = tmp_path / "empty"
    (empty / "resnet50").mkdir(parents=True)

    with pytest.raises(SyncError) as caught:
        sync(empty, gcs_client, bucket_name)

    assert "is empty" in one_line_error(caught) and str(empty) in str(caught.value)
    assert_matches(gcs_client, bucket_name, small_repo)


def test_unreadable_file_is_named_before_anything_is_sent(gcs_client, bucket_name, small_repo) -> None:
    # A dangling link (a weights file moved away); chmod 000 would not stop root here.
    broken = small_repo / "resnet50" / "1" / "weights.bin"
    broken.symlink_to(small_repo / "moved-away.bin")

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert str(broken) in one_line_error(caught)
    assert bucket_md5s(gcs_client, bucket_name) == {}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["{repo}", "gs://no-such-bucket-here/models"], "gs://no-such-bucket-here"),
        (["{repo}/missing", "gs://{bucket}/models"], "{repo}/missing"),
        (["{repo}", "s3://{bucket}/models"], "gs://BUCKET/PREFIX"),
        (["{repo}"], "destination"),
    ],
    ids=["missing-bucket", "missing-dir", "not-a-gs-url", "missing-argument"],
)
def test_cli_bad_input_exits_2_with_one_line(gcs_emulator, bucket_name, small_repo, args, named) -> None:
    fill = {"repo": small_repo, "bucket": bucket_name}
    cli = run_cli(*(a.format(**fill) for a in args), endpoint=gcs_emulator.endpoint)
    out, err = cli.communicate(timeout=60)

    assert cli.returncode == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert named.format(**fill) in err
