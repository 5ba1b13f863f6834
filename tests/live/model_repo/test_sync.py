"""model_repo.sync against a real GCS emulator: ownership, atomic updates, ordering, interruption, errors.

Expected bucket contents are derived here from the source files and Triton's documented layout, not
from the sync's own planning code: non-config objects are compared by MD5 with the local files, a
synced config.pbtxt must parse to the local config with only its version_policy replaced by a pin.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.checkout import PROJECT_DIR
from tests.support.gcs_fixtures import write_small_repo
from tests.support.gcs_proxy import PausingProxy
from tests.support.onnx_models import onnx_model
from triton_gke.model_repo.build import BuildResult
from triton_gke.model_repo.sync import RECORD_NAME, SyncError, sync_repository
from triton_gke.sandbox.gcs_emulator import PYTHON_CLIENT_ENV, TRITON_ENV, GcsEmulator
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.processes import wait_for
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.gcs_fixtures", "tests.support.triton_fixtures")


PREFIX = "models"


REPO_ROOT = PROJECT_DIR


# Objects other people keep in the same bucket: beside the prefix, sharing its first letters, and inside it.
STRANGERS = {
    "datasets/train.csv": b"a,b\n1,2\n",
    "models-old/m/1/model.onnx": b"y",
    "models.txt": b"z",
    f"{PREFIX}/other-team/model.bin": b"theirs",
    f"{PREFIX}/notes.txt": b"keep me",
}


class StopSync(Exception):
    """Raised by a callback to interrupt a sync at a chosen point."""


def sync(repo: Path, client: storage.Client, bucket: str, **kwargs):
    return sync_repository(repo, bucket, PREFIX, client, **kwargs)


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def seed_strangers(client: storage.Client, bucket: str) -> None:
    for name, content in STRANGERS.items():
        client.bucket(bucket).blob(name).upload_from_string(content)


def snapshot(client: storage.Client, bucket: str) -> dict[str, tuple[str, int]]:
    return {b.name: (b.md5_hash, b.generation) for b in client.list_blobs(bucket)}


def bucket_md5s(client: storage.Client, bucket: str, prefix: str = f"{PREFIX}/") -> dict[str, str]:
    return {b.name[len(prefix) :]: b.md5_hash for b in client.list_blobs(bucket, prefix=prefix)}


def generations(client: storage.Client, bucket: str, prefix: str = f"{PREFIX}/") -> dict[str, int]:
    return {b.name[len(prefix) :]: b.generation for b in client.list_blobs(bucket, prefix=prefix)}


def strangers_intact(client: storage.Client, bucket: str) -> bool:
    return all(client.bucket(bucket).blob(n).download_as_bytes() == c for n, c in STRANGERS.items())


def parse_config(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


@dataclass(frozen=True)
class Build:
    """One model as Triton would serve it from a local folder: config (policy aside) and served files."""

    config: mc.ModelConfig
    served: dict[str, str]  # "<version>/<file>" -> md5, for the version Triton loads
    extras: dict[str, str]  # files beside config.pbtxt -> md5, label files aside
    labels: dict[str, str]  # output -> md5 of the file its label_filename names


def split_labels(config: mc.ModelConfig, files: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """Output -> md5 of its label file, and those files' names. Triton reads label_filename relative to the
    model folder (Model::Init, https://github.com/triton-inference-server/core/blob/main/src/model.cc)."""
    labels = {o.name: files.get(o.label_filename, "missing") for o in config.output if o.label_filename}
    names = {o.label_filename for o in config.output if o.label_filename}
    for output in config.output:
        output.ClearField("label_filename")  # compared by content, not by the name it is synced under
    return labels, names


def local_builds(repo: Path) -> dict[str, Build]:
    """Every model of a source folder; Triton's default policy serves the highest numeric version."""
    builds = {}
    for folder in sorted(p for p in repo.iterdir() if (p / "config.pbtxt").is_file()):
        files = {p.relative_to(folder).as_posix(): md5(p.read_bytes()) for p in folder.rglob("*") if p.is_file()}
        versions = [int(rel.split("/")[0]) for rel in files if rel.split("/")[0].isdigit() and "/" in rel]
        top = max(versions)
        served = {rel: h for rel, h in files.items() if rel.split("/")[0] == str(top) and "/" in rel}
        config = parse_config((folder / "config.pbtxt").read_text())
        config.ClearField("version_policy")
        labels, label_files = split_labels(config, files)
        extras = {r: h for r, h in files.items() if "/" not in r and r != "config.pbtxt" and r not in label_files}
        builds[folder.name] = Build(config, served, extras, labels)
    return builds


def bucket_builds(client: storage.Client, bucket: str) -> dict[str, tuple[list[int], Build]]:
    """Every model with a config in the bucket: its pinned versions and what those pins select."""
    objects = {b.name[len(PREFIX) + 1 :]: b for b in client.list_blobs(bucket, prefix=f"{PREFIX}/")}
    result = {}
    for name in objects:
        model, _, rest = name.partition("/")
        if rest != "config.pbtxt":
            continue
        config = parse_config(objects[name].download_as_text())
        assert config.version_policy.WhichOneof("policy_choice") == "specific", name
        pins = sorted(config.version_policy.specific.versions)
        config.ClearField("version_policy")
        under = {n[len(model) + 1 :]: b.md5_hash for n, b in objects.items() if n.startswith(f"{model}/")}
        labels, label_files = split_labels(config, under)
        served = {r: h for r, h in under.items() if r.split("/")[0] in {str(p) for p in pins} and r not in label_files}
        extras = {r: h for r, h in under.items() if "/" not in r and r != "config.pbtxt" and r not in label_files}
        result[model] = (pins, Build(config, served, extras, labels))
    return result


def unpinned(build: Build, pins: list[int]) -> Build:
    """The build with its version folder renamed to 'served' so builds with different pins compare."""
    assert len(pins) == 1
    served = {"v/" + rel.split("/", 1)[1]: h for rel, h in build.served.items()}
    return Build(build.config, served, build.extras, build.labels)


def assert_mirrors(client: storage.Client, bucket: str, repo: Path) -> None:
    """The models under the prefix are exactly the source's, each config pinned to its own weights."""
    want = local_builds(repo)
    have = bucket_builds(client, bucket)
    assert set(have) == set(want)
    for model, (pins, build) in have.items():
        assert unpinned(build, pins) == unpinned(want[model], [1]), model
    # No leftover of the sync's own beside them: only models' objects, the record and strangers.
    names = set(bucket_md5s(client, bucket))
    strangers = {n[len(PREFIX) + 1 :] for n in STRANGERS if n.startswith(f"{PREFIX}/")}
    mine = {n for n in names if n != RECORD_NAME and n not in strangers}
    expected = {
        f"{m}/{rel}" for m, (pins, build) in have.items() for rel in ["config.pbtxt", *build.served, *build.extras]
    }
    assert mine - expected == {f"{m}/{n}" for m, n in bucket_label_files(client, bucket)}
    assert expected <= mine


def bucket_label_files(client: storage.Client, bucket: str) -> set[tuple[str, str]]:
    """(model, file) for every label file a config in the bucket names."""
    found = set()
    for blob in client.list_blobs(bucket, prefix=f"{PREFIX}/"):
        model, _, rest = blob.name[len(PREFIX) + 1 :].partition("/")
        if rest == "config.pbtxt":
            outputs = parse_config(blob.download_as_text()).output
            found |= {(model, o.label_filename) for o in outputs if o.label_filename}
    return found


def completed_files(calls: list[tuple[str, int, int]]) -> list[str]:
    return [name for name, done, total in calls if done == total]


# --- the client stays local ----------------------------------------------------------
def test_client_talks_only_to_the_emulator(gcs_emulator: GcsEmulator, gcs_client: storage.Client) -> None:
    assert os.environ[PYTHON_CLIENT_ENV] == gcs_emulator.endpoint
    api_base_url = gcs_client._connection.API_BASE_URL
    assert api_base_url == gcs_emulator.endpoint
    assert isinstance(gcs_client._credentials, AnonymousCredentials)


# --- first sync, idempotence -------------------------------------------------------------
def test_first_sync_uploads_the_models_with_pinned_configs(gcs_client, bucket_name, small_repo) -> None:
    report = sync(small_repo, gcs_client, bucket_name)

    assert sorted(report.uploaded) == [
        "preprocess/1/model.py",
        "preprocess/config.pbtxt",
        "resnet50/1/model.onnx",
        "resnet50/config.pbtxt",
        "resnet50/labels.txt",
    ]
    # empty_model/ has no config.pbtxt: not a model, left out and said so.
    assert report.left_out == ["empty_model/ (no config.pbtxt: not a model)"]
    assert report.versions == {"preprocess": [1], "resnet50": [1]}  # a first sync keeps the numbers
    assert report.deleted == [] and report.unchanged == 0
    assert_mirrors(gcs_client, bucket_name, small_repo)


def test_second_sync_without_change_sends_nothing(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    before = generations(gcs_client, bucket_name)

    report = sync(small_repo, gcs_client, bucket_name)

    assert (report.uploaded, report.deleted, report.bytes_uploaded) == ([], [], 0)
    assert report.unchanged == 5
    assert generations(gcs_client, bucket_name) == before  # no object rewritten, the record neither


def test_changed_weights_go_to_a_new_version_and_the_old_one_goes(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    before = generations(gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"new weights"))

    report = sync(small_repo, gcs_client, bucket_name)

    # Weights first, then the config that pins them, then the old version folder.
    assert report.uploaded == ["resnet50/2/model.onnx", "resnet50/config.pbtxt"]
    assert report.deleted == ["resnet50/1/model.onnx"]
    assert report.versions["resnet50"] == [2]
    after = generations(gcs_client, bucket_name)
    assert {n for n in after if after[n] != before.get(n)} == {"resnet50/2/model.onnx", "resnet50/config.pbtxt"} | {
        RECORD_NAME
    }
    assert_mirrors(gcs_client, bucket_name, small_repo)


def test_removed_files_and_models_delete_only_their_objects(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "labels.txt").unlink()
    shutil.rmtree(small_repo / "preprocess")

    report = sync(small_repo, gcs_client, bucket_name)

    # A removed model loses its config first, so Triton never sees it half-deleted.
    assert report.deleted[:2] == ["preprocess/config.pbtxt", "preprocess/1/model.py"]
    assert set(report.deleted) == {
        "preprocess/config.pbtxt",
        "preprocess/1/model.py",
        "resnet50/1/model.onnx",
        "resnet50/labels.txt",
    }
    assert_mirrors(gcs_client, bucket_name, small_repo)


def test_dry_run_reports_without_changing_the_bucket(gcs_client, bucket_name, small_repo) -> None:
    report = sync(small_repo, gcs_client, bucket_name, dry_run=True)

    assert len(report.uploaded) == 5
    assert bucket_md5s(gcs_client, bucket_name, "") == {}


# --- ownership --------------------------------------------------------------------------
def test_strangers_inside_and_outside_the_prefix_stay(gcs_client, bucket_name, small_repo) -> None:
    seed_strangers(gcs_client, bucket_name)
    inside = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/notes.txt")
    inside.upload_from_string(b"someone's notes in a model folder")

    first = sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"v2"))
    sync(small_repo, gcs_client, bucket_name)
    shutil.rmtree(small_repo / "preprocess")
    last = sync(small_repo, gcs_client, bucket_name)

    assert strangers_intact(gcs_client, bucket_name)
    assert inside.download_as_bytes() == b"someone's notes in a model folder"
    assert first.strangers == last.strangers == ["notes.txt", "other-team/model.bin", "resnet50/notes.txt"]
    assert "preprocess/config.pbtxt" not in bucket_md5s(gcs_client, bucket_name)


def test_a_stranger_where_the_sync_must_write_stops_it_before_any_change(gcs_client, bucket_name, small_repo) -> None:
    # E.g. a config.pbtxt uploaded by hand or by an older tool: overwriting it would lose it.
    gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/config.pbtxt").upload_from_string(b'name: "theirs"\n')
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert f"gs://{bucket_name}/{PREFIX}/resnet50/config.pbtxt" in one_line_error(caught)
    assert "not written by this sync" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before


@pytest.mark.parametrize("destination", ["", "/", "//"])
def test_a_destination_without_prefix_is_refused(gcs_client, bucket_name, small_repo, destination) -> None:
    seed_strangers(gcs_client, bucket_name)
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync_repository(small_repo, bucket_name, destination, gcs_client)

    assert "prefix" in one_line_error(caught)
    assert snapshot(gcs_client, bucket_name) == before


def test_removing_more_models_than_kept_needs_the_flag(gcs_client, bucket_name, small_repo, tmp_path) -> None:
    for copy in ("resnet50_b", "resnet50_c"):
        shutil.copytree(small_repo / "resnet50", small_repo / copy)
    sync(small_repo, gcs_client, bucket_name)
    one = tmp_path / "one"
    shutil.copytree(small_repo / "preprocess", one / "preprocess")
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(one, gcs_client, bucket_name)
    assert "remove 3 models (resnet50, resnet50_b, resnet50_c) and keep 1" in one_line_error(caught)
    assert "--allow-mass-delete" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before

    report = sync(one, gcs_client, bucket_name, allow_mass_delete=True)
    assert len(report.deleted) == 9
    assert_mirrors(gcs_client, bucket_name, one)


# --- the source is checked whole, first -----------------------------------------------
def test_a_source_without_a_model_is_refused(gcs_client, bucket_name, small_repo, tmp_path) -> None:
    sync(small_repo, gcs_client, bucket_name)
    before = snapshot(gcs_client, bucket_name)
    junk = tmp_path / "junk"
    (junk / "original" / "1").mkdir(parents=True)
    (junk / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")

    with pytest.raises(SyncError) as caught:
        sync(junk, gcs_client, bucket_name)

    assert "holds no model" in one_line_error(caught) and str(junk) in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before


def test_a_linked_model_folder_is_synced_like_a_copy(gcs_client, bucket_name, small_repo, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(small_repo / "resnet50", elsewhere)
    (small_repo / "resnet50").symlink_to(elsewhere, target_is_directory=True)

    sync(small_repo, gcs_client, bucket_name)
    again = sync(small_repo, gcs_client, bucket_name)

    assert again.deleted == [] and again.uploaded == []
    assert_mirrors(gcs_client, bucket_name, small_repo)


@pytest.mark.parametrize(
    "bad_name",
    [b"bad\xffname.bin", b"line\nbreak.bin", b"tab\there.txt", b"bell\x07.txt"],
    ids=["not-utf8", "newline", "tab", "control"],
)
def test_a_bad_file_name_stops_the_sync_before_any_upload(gcs_client, bucket_name, small_repo, bad_name) -> None:
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"changed: would be sent"))
    # Sorted after everything else in preprocess/, so a sync that checked lazily would have sent files first.
    folder = os.fsencode(small_repo / "preprocess" / "1")
    with open(os.path.join(folder, b"zz" + bad_name), "wb") as stream:
        stream.write(b"x")
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert "file name" in one_line_error(caught) and "preprocess" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before


def test_a_link_loop_is_refused(gcs_client, bucket_name, small_repo) -> None:
    (small_repo / "resnet50" / "1" / "loop").symlink_to(small_repo / "resnet50", target_is_directory=True)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert "link loop" in one_line_error(caught)
    assert bucket_md5s(gcs_client, bucket_name, "") == {}


def test_a_broken_config_is_named_before_anything_is_sent(gcs_client, bucket_name, small_repo) -> None:
    (small_repo / "resnet50" / "config.pbtxt").write_text("name: resnet50 max_batch_size: [")

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert str(small_repo / "resnet50" / "config.pbtxt") in one_line_error(caught)
    assert bucket_md5s(gcs_client, bucket_name, "") == {}


def test_unreadable_file_is_named_before_anything_is_sent(gcs_client, bucket_name, small_repo) -> None:
    # A dangling link (a weights file moved away); chmod 000 would not stop root here.
    broken = small_repo / "resnet50" / "1" / "weights.bin"
    broken.symlink_to(small_repo / "moved-away.bin")

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert str(broken) in one_line_error(caught)
    assert bucket_md5s(gcs_client, bucket_name, "") == {}


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
    assert_mirrors(gcs_client, bucket_name, big_repo)


# --- interruption -------------------------------------------------------------------------
def write_model(root: Path, name: str, config: str, weights: bytes, labels: bytes | None = None) -> None:
    (root / name / "1").mkdir(parents=True, exist_ok=True)
    (root / name / "config.pbtxt").write_text(f'name: "{name}"\n{config}')
    (root / name / "1" / "model.onnx").write_bytes(onnx_model(weights))
    if labels is not None:
        (root / name / "labels.txt").write_bytes(labels)


# An output whose class names Triton reads from labels.txt beside config.pbtxt ("Classification Extension":
# https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_classification.md).
LABELLED = 'output [{ name: "y" data_type: TYPE_FP32 dims: [2] label_filename: "labels.txt" }]\n'


def build_a(root: Path) -> Path:
    write_model(root, "alpha", "max_batch_size: 4\n" + LABELLED, b"alpha weights A", b"cat\ndog\n")
    write_model(root, "beta", "max_batch_size: 8\n" + LABELLED, b"beta weights A", b"ant\nbee\n")
    write_model(root, "gamma", "max_batch_size: 2\n", b"gamma weights A")
    write_model(root, "delta", "max_batch_size: 1\n", b"delta weights, never changed")
    return root


def build_b(root: Path) -> Path:
    """Build A updated: alpha's config, weights and labels change, beta's weights and labels only (its config
    stays: a label file replaced in place would meet the old config), gamma goes, epsilon comes."""
    shutil.rmtree(root, ignore_errors=True)
    write_model(root, "alpha", "max_batch_size: 16\n" + LABELLED, b"alpha weights B, longer", b"cow\nelk\n")
    write_model(root, "beta", "max_batch_size: 8\n" + LABELLED, b"beta weights B", b"bat\nbug\nfly\n")
    write_model(root, "delta", "max_batch_size: 1\n", b"delta weights, never changed")
    write_model(root, "epsilon", "max_batch_size: 8\n", b"epsilon weights B")
    return root


def same_but_unnamed_extras(seen: Build, build: Build) -> bool:
    extras = {name: md5 for name, md5 in seen.extras.items() if name in build.extras}
    return (seen.config, seen.served, seen.labels, extras) == (build.config, build.served, build.labels, build.extras)


def assert_every_config_pairs_with_its_own_build(
    client: storage.Client, bucket: str, builds: list[dict[str, Build]]
) -> None:
    """What Triton may see at any moment: each config present selects complete weights of the same build."""
    for model, (pins, build) in bucket_builds(client, bucket).items():
        seen = unpinned(build, pins)
        candidates = [unpinned(b[model], [1]) for b in builds if model in b]
        # A label file of the pending update, which no config names yet, is invisible to Triton.
        assert any(same_but_unnamed_extras(seen, c) for c in candidates), (model, pins)


def test_an_update_interrupted_at_every_step_never_mismatches_and_completes(gcs_client, bucket_name, tmp_path) -> None:
    step = 0
    while True:
        bucket = f"{bucket_name}-{step}"
        gcs_client.create_bucket(bucket)
        seed_strangers(gcs_client, bucket)
        repo = build_a(tmp_path / f"repo{step}")
        sync(repo, gcs_client, bucket)
        builds = [local_builds(repo), local_builds(build_b(repo))]
        seen: list[str] = []

        def stop_at(action: str, name: str, *, at: int = step, seen: list[str] = seen) -> None:
            seen.append(f"{action} {name}")
            if len(seen) > at:
                raise StopSync

        try:
            sync(repo, gcs_client, bucket, step=stop_at)
        except StopSync:
            assert_every_config_pairs_with_its_own_build(gcs_client, bucket, builds)
            assert strangers_intact(gcs_client, bucket)
            sync(repo, gcs_client, bucket)  # the re-run completes
            assert_mirrors(gcs_client, bucket, repo)
            assert strangers_intact(gcs_client, bucket)
            step += 1
            continue
        assert_mirrors(gcs_client, bucket, repo)
        break
    # Record, 3 weights, 2 label files, 3 configs, record, 6 deletions (gamma's 2, alpha's and beta's old
    # weights and labels), record.
    assert step == 17, seen


def test_sync_interrupted_after_some_files_resumes_on_rerun(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"v2 weights"))
    (small_repo / "resnet50" / "labels.txt").write_bytes(b"cow\nelk\n")

    def stop_after_first_upload(name: str, sent: int, total: int) -> None:
        if sent == total:
            raise StopSync

    with pytest.raises(StopSync):
        sync(small_repo, gcs_client, bucket_name, progress=stop_after_first_upload)
    assert "resnet50/2/model.onnx" in bucket_md5s(gcs_client, bucket_name)

    report = sync(small_repo, gcs_client, bucket_name)

    # The new version folder of the interrupted run is reused: what arrived is not sent again.
    assert report.uploaded == ["resnet50/labels.txt", "resnet50/config.pbtxt"]
    assert_mirrors(gcs_client, bucket_name, small_repo)


def test_sync_interrupted_inside_a_large_file_leaves_no_partial_object(gcs_client, bucket_name, big_repo) -> None:
    def stop_mid_file(name: str, sent: int, total: int) -> None:
        if sent < total:
            raise StopSync

    with pytest.raises(StopSync):
        sync(big_repo, gcs_client, bucket_name, progress=stop_mid_file)
    present = bucket_md5s(gcs_client, bucket_name)
    assert "resnet50_big/1/model.onnx" not in present
    assert not [n for n in present if n.endswith("config.pbtxt")]

    sync(big_repo, gcs_client, bucket_name)
    assert_mirrors(gcs_client, bucket_name, big_repo)


def run_cli(*args: str, endpoint: str) -> subprocess.Popen[str]:
    env = {**os.environ, PYTHON_CLIENT_ENV: endpoint, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "triton_gke.model_repo.sync", *args],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_cli_killed_mid_upload_then_rerun_ends_identical(gcs_emulator, gcs_client, bucket_name, big_repo) -> None:
    url = f"gs://{bucket_name}/{PREFIX}"
    # Killed while the relay holds its bytes after 12 MiB (a chunk of the 30 MB file has reached the bucket, the
    # next is held): killing on the first progress line instead raced the rest of the upload on a loaded machine.
    proxy = PausingProxy(gcs_emulator.endpoint, budget=12 << 20)
    try:
        cli = run_cli(str(big_repo), url, endpoint=proxy.endpoint)
        assert wait_for(proxy.paused, timeout_s=120, interval_s=0.05), "the sync never sent 12 MiB"
        cli.send_signal(signal.SIGKILL)
        cli.communicate(timeout=30)
    finally:
        proxy.close()
    assert cli.returncode == -signal.SIGKILL
    assert not [n for n in bucket_md5s(gcs_client, bucket_name) if n.startswith("resnet50_big/")]

    rerun = run_cli(str(big_repo), url, endpoint=gcs_emulator.endpoint)
    out, err = rerun.communicate(timeout=60)

    assert rerun.returncode == 0, err
    lines = out.strip().splitlines()
    assert "left out of the sync (not models): empty_model/ (no config.pbtxt: not a model)" in lines
    assert lines[-1].startswith(f"synced {big_repo} -> {url}: uploaded ") and "unchanged" in lines[-1]
    assert_mirrors(gcs_client, bucket_name, big_repo)
    third, _ = run_cli(str(big_repo), url, endpoint=gcs_emulator.endpoint).communicate(timeout=60)
    assert "uploaded 0 files (0 B), deleted 0, unchanged 7" in third


def test_file_edited_during_sync_is_refused_not_uploaded(gcs_client, bucket_name, small_repo) -> None:
    victim = small_repo / "resnet50" / "labels.txt"  # sent 4th, after model.onnx

    def edit_victim_once(name: str, sent: int, total: int) -> None:  # on the 1st file done
        if sent == total and victim.read_bytes() == b"cat\ndog\n":
            victim.write_bytes(b"cow\nelk\n")

    with pytest.raises(SyncError, match=r"labels\.txt") as caught:
        sync(small_repo, gcs_client, bucket_name, progress=edit_victim_once)
    assert "\n" not in str(caught.value)
    assert "resnet50/labels.txt" not in bucket_md5s(gcs_client, bucket_name)
    assert "resnet50/config.pbtxt" not in bucket_md5s(gcs_client, bucket_name)

    sync(small_repo, gcs_client, bucket_name)
    assert_mirrors(gcs_client, bucket_name, small_repo)


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


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["{repo}", "gs://no-such-bucket-here/models"], "gs://no-such-bucket-here"),
        (["{repo}/missing", "gs://{bucket}/models"], "{repo}/missing"),
        (["{repo}", "s3://{bucket}/models"], "gs://BUCKET/PREFIX"),
        (["{repo}"], "destination"),
        (["{repo}", "gs://{bucket}"], "needs a prefix"),
        (["{repo}", "gs://{bucket}/"], "needs a prefix"),
        (["{repo}", "gs://{bucket}/a/../b"], "'..'"),
    ],
    ids=["missing-bucket", "missing-dir", "not-a-gs-url", "missing-argument", "no-prefix", "slash-only", "dotdot"],
)
def test_cli_bad_input_exits_2_with_one_line(gcs_emulator, gcs_client, bucket_name, small_repo, args, named) -> None:
    seed_strangers(gcs_client, bucket_name)
    before = snapshot(gcs_client, bucket_name)
    fill = {"repo": small_repo, "bucket": bucket_name}
    cli = run_cli(*(a.format(**fill) for a in args), endpoint=gcs_emulator.endpoint)
    out, err = cli.communicate(timeout=60)

    assert cli.returncode == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert named.format(**fill) in err
    assert snapshot(gcs_client, bucket_name) == before


def test_cli_mass_delete_is_refused_with_one_line(gcs_emulator, gcs_client, bucket_name, small_repo, tmp_path) -> None:
    sync(small_repo, gcs_client, bucket_name)
    one = tmp_path / "one"
    write_model(one, "other", "max_batch_size: 1\n", b"w")
    before = snapshot(gcs_client, bucket_name)

    cli = run_cli(str(one), f"gs://{bucket_name}/{PREFIX}", endpoint=gcs_emulator.endpoint)
    _, err = cli.communicate(timeout=60)

    assert cli.returncode == 2 and err.count("\n") == 1
    assert "--allow-mass-delete" in err
    assert snapshot(gcs_client, bucket_name) == before


# --- a real tritonserver reads the version layout -------------------------------------------
@pytest.mark.skipif(not isolation_available(), reason="no permission for `unshare -n` here")
def test_triton_serves_the_pinned_new_version_after_an_update(model_repos: BuildResult, tmp_path) -> None:
    """Sync a CPU twin, update it (new version folder 2, config pinned to 2, folder 1 gone), serve it from gs://."""
    repo = tmp_path / "repo"
    shutil.copytree(model_repos.cpu_out / "original", repo / "original")
    with NetworkNamespace() as netns, GcsEmulator(netns=netns) as gcs:
        client = gcs.client()
        client.create_bucket("triton-models")
        sync_repository(repo, "triton-models", PREFIX, client)
        labels = repo / "original" / "labels.txt"
        text = labels.read_text() if labels.exists() else ""
        labels.unlink(missing_ok=True)  # may be a hard link into the build cache: replace, never edit
        labels.write_text(text + "\n")
        report = sync_repository(repo, "triton-models", PREFIX, client)
        assert report.versions == {"original": [2]}
        assert not [n for n in bucket_md5s(client, "triton-models") if n.startswith("original/1/")]

        env = {TRITON_ENV: gcs.internal_endpoint}
        with TritonServer(f"gs://triton-models/{PREFIX}", netns=netns, env=env, ready_timeout_s=240) as server:
            triton = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
            index = {(m["name"], m.get("version")): m.get("state") for m in triton.get_model_repository_index()}
            assert index == {("original", "2"): "READY"}
            assert triton.is_model_ready("original", "2")


# --- red-team findings (issue 11): links, manifest, renames, model files, one-line errors, adoption ---------
def test_a_link_inside_a_model_leading_outside_the_source_is_refused(gcs_client, bucket_name, small_repo, tmp_path):
    secrets = tmp_path / "gcloud"
    secrets.mkdir()
    (secrets / "credentials.db").write_bytes(b"secret")
    (small_repo / "resnet50" / "1" / "sub").symlink_to(secrets, target_is_directory=True)
    seed_strangers(gcs_client, bucket_name)
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)
    assert "resnet50/1/sub: a link that leads outside the source" in one_line_error(caught)
    assert snapshot(gcs_client, bucket_name) == before


def test_a_built_repository_sends_exactly_the_files_its_manifest_lists(gcs_client, bucket_name, small_repo):
    from triton_gke.model_repo.manifest import FILES, MANIFEST, file_digests

    (small_repo / MANIFEST).write_text(json.dumps({FILES: file_digests(small_repo)}))
    # A link that stays inside the source, so only the manifest can tell the file was not built.
    (small_repo / "resnet50" / "1" / "extra").symlink_to(small_repo / "preprocess" / "1", target_is_directory=True)
    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)
    assert "resnet50/1/extra/model.py: not in the build manifest" in one_line_error(caught)
    assert not bucket_md5s(gcs_client, bucket_name)

    (small_repo / "resnet50" / "1" / "extra").unlink()
    sync(small_repo, gcs_client, bucket_name)
    assert_mirrors(gcs_client, bucket_name, small_repo)


def test_renaming_every_model_needs_the_mass_delete_flag(gcs_client, bucket_name, small_repo, tmp_path) -> None:
    for copy in ("b", "c", "d"):
        shutil.copytree(small_repo / "resnet50", small_repo / f"resnet50_{copy}")
    sync(small_repo, gcs_client, bucket_name)  # 5 models
    renamed = tmp_path / "renamed"
    for model in sorted(p for p in small_repo.iterdir() if (p / "config.pbtxt").is_file()):
        shutil.copytree(model, renamed / f"new_{model.name}")
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(renamed, gcs_client, bucket_name)
    assert "remove 5 models" in one_line_error(caught) and "keep 0" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before
    sync(renamed, gcs_client, bucket_name, allow_mass_delete=True)
    assert_mirrors(gcs_client, bucket_name, renamed)


@pytest.mark.parametrize(
    ("relative", "content", "named"),
    [
        ("resnet50/1/model.onnx", b"this is a text file, not a model\n", "not a valid ONNX model"),
        ("resnet50/1/model.onnx", b"", "not a valid ONNX model"),
        ("preprocess/1/model.py", b"class TritonPythonModel:\n    def broken(:\n", "does not compile line 2"),
        ("preprocess/1/model.py", b"x = 1\x00\n", "does not compile"),
    ],
    ids=["text-onnx", "empty-onnx", "syntax-error", "nul-byte"],
)
def test_a_model_file_that_does_not_parse_is_refused(gcs_client, bucket_name, small_repo, relative, content, named):
    (small_repo / relative).write_bytes(content)
    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)
    assert f"{relative}: " in one_line_error(caught) and named in str(caught.value)
    assert not bucket_md5s(gcs_client, bucket_name)


def write_like_the_previous_sync(client: storage.Client, bucket: str, repo: Path) -> None:
    """What the sync before ownership records left: every file at its own name, configs unchanged, no record."""
    for path in sorted(p for p in repo.rglob("*") if p.is_file()):
        client.bucket(bucket).blob(f"{PREFIX}/{path.relative_to(repo).as_posix()}").upload_from_filename(str(path))


def test_a_bucket_the_previous_sync_filled_is_adopted_only_with_the_flag(gcs_client, bucket_name, small_repo):
    write_like_the_previous_sync(gcs_client, bucket_name, small_repo)
    seed_strangers(gcs_client, bucket_name)
    theirs = {f"{PREFIX}/resnet50/README.md": b"not a model file", f"{PREFIX}/resnet50/v1/x.bin": b"not a version"}
    for name, data in theirs.items():
        gcs_client.bucket(bucket_name).blob(name).upload_from_string(data)
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)
    assert "--adopt" in one_line_error(caught) and "resnet50/" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before

    sync(small_repo, gcs_client, bucket_name, adopt=True)
    have, want = bucket_builds(gcs_client, bucket_name), local_builds(small_repo)
    have["resnet50"][1].extras.pop("README.md")  # theirs: checked below
    assert {m: unpinned(b, pins) for m, (pins, b) in have.items()} == {m: unpinned(b, [1]) for m, b in want.items()}
    assert strangers_intact(gcs_client, bucket_name)
    assert {n: md5(d) for n, d in theirs.items()} == {n: bucket_md5s(gcs_client, bucket_name, "")[n] for n in theirs}
    assert f"{PREFIX}/resnet50/1/model.onnx" not in bucket_md5s(gcs_client, bucket_name, "")  # the adopted old copy
    assert not sync(small_repo, gcs_client, bucket_name).uploaded  # owned now: no flag needed again


_NAME_CHARS = st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",))


ODD_NAMES = st.one_of(
    st.text(_NAME_CHARS, min_size=1, max_size=12),
    st.sampled_from(["new\nline", "cr\rx", "tab\tx", "bell\x07", "\u2028sep", "del\x7f", "a\x1b[31m"]),
).filter(lambda n: n not in (".", "..") and len(n.encode()) < 200)


@pytest.mark.parametrize("built", [False, True], ids=["plain", "with-manifest"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=ODD_NAMES)
def test_every_refusal_is_one_line_whatever_the_file_name(gcs_client, bucket_name, tmp_path, capsys, built, name):
    from triton_gke.model_repo.manifest import FILES, MANIFEST, file_digests
    from triton_gke.model_repo.sync import main

    repo = write_small_repo(Path(tempfile.mkdtemp(dir=tmp_path)) / "repo")
    if built:
        (repo / MANIFEST).write_text(json.dumps({FILES: file_digests(repo)}))
    (repo / "resnet50" / "1" / name).write_bytes(b"x")
    capsys.readouterr()
    code = main([str(repo), f"gs://{bucket_name}/{PREFIX}"])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2 or built:
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "\r" not in err, repr(err)


# --- plans the engine-build Job writes (k8s/engine_build.py) ---------------------------------------------------------
PLAN_CONFIG = b"""name: "trt"
platform: "tensorrt_plan"
max_batch_size: 8
input { name: "input" data_type: TYPE_FP32 dims: [3] }
output { name: "probabilities" data_type: TYPE_FP32 dims: [3] }
cc_model_filenames { key: "7.5" value: "model.25.06.cc75.plan" }
"""


def test_the_jobs_plans_survive_every_sync_and_a_new_version_leaves_its_plan_to_be_built(
    gcs_client, bucket_name, small_repo
) -> None:
    """A plan config's version folder holds the ONNX the sync sends and, once the Job ran, the plan the Job wrote
    (`gcloud storage cp --no-clobber`, another identity): a stranger to the sync. An unchanged repository leaves it
    alone; a changed model goes to a new folder, with no plan until the Job builds one there (its fetch step takes the
    greatest folder), and the old folder keeps the Job's plan: the sync deletes only what it wrote."""
    (small_repo / "trt" / "1").mkdir(parents=True)
    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"plan source"))
    (small_repo / "trt" / "config.pbtxt").write_bytes(PLAN_CONFIG)
    assert "trt/1/model.onnx" in sync(small_repo, gcs_client, bucket_name).uploaded
    plan = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/trt/1/model.25.06.cc75.plan")
    plan.upload_from_string(b"engine", if_generation_match=0)  # what --no-clobber sends

    again = sync(small_repo, gcs_client, bucket_name)
    assert (again.uploaded, again.deleted) == ([], []) and again.strangers == ["trt/1/model.25.06.cc75.plan"]

    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"new plan source"))
    changed = sync(small_repo, gcs_client, bucket_name)
    assert changed.uploaded == ["trt/2/model.onnx", "trt/config.pbtxt"] and changed.deleted == ["trt/1/model.onnx"]
    assert changed.versions["trt"] == [2]
    names = bucket_md5s(gcs_client, bucket_name)
    assert plan.download_as_bytes() == b"engine"
    assert "trt/2/model.onnx" in names and [n for n in names if n.endswith(".plan")] == ["trt/1/model.25.06.cc75.plan"]
    served = mc.ModelConfig()
    text_format.Parse(gcs_client.bucket(bucket_name).blob(f"{PREFIX}/trt/config.pbtxt").download_as_text(), served)
    assert list(served.version_policy.specific.versions) == [2]
    assert dict(served.cc_model_filenames) == {"7.5": "model.25.06.cc75.plan"}


def test_a_staged_version_is_pinned_only_by_the_sync_after_it_and_never_with_a_plan_of_other_weights(
    gcs_client, bucket_name, small_repo
) -> None:
    """`--stage` (the upload when engine-build Jobs run, infra/model_upload.py): new folders beside the live ones, the
    config and the old folder untouched; the next plain sync pins the staged folder, the Job's plan in it included.
    A source changed again after the Job built a plan in the staged folder goes to a fresh folder: the plan was built
    from other weights, and pinning it would serve them."""
    (small_repo / "trt" / "1").mkdir(parents=True)
    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"v1"))
    (small_repo / "trt" / "config.pbtxt").write_bytes(PLAN_CONFIG)
    sync(small_repo, gcs_client, bucket_name)
    config = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/trt/config.pbtxt")
    live_config = config.download_as_bytes()

    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"v2"))
    staged = sync(small_repo, gcs_client, bucket_name, stage=True)
    assert staged.uploaded == ["trt/2/model.onnx"] and staged.deleted == []
    assert staged.versions["trt"] == [1] and staged.staged == {"trt": [2]}
    assert config.download_as_bytes() == live_config and "trt/1/model.onnx" in bucket_md5s(gcs_client, bucket_name)
    again = sync(small_repo, gcs_client, bucket_name, stage=True)  # a retried `up`: nothing more to stage
    assert (again.uploaded, again.deleted) == ([], [])
    plan = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/trt/2/model.25.06.cc75.plan")
    plan.upload_from_string(b"engine of v2", if_generation_match=0)  # the Job, as --no-clobber writes

    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"v3"))  # changed before the pin
    with pytest.raises(SyncError, match="--pin: .*trt cannot be pinned, its files were not staged"):
        sync(small_repo, gcs_client, bucket_name, pin=True)  # v3 was never staged: no Job built it
    restaged = sync(small_repo, gcs_client, bucket_name, stage=True)
    assert restaged.staged == {"trt": [3]} and restaged.uploaded == ["trt/3/model.onnx"]
    pinned = sync(small_repo, gcs_client, bucket_name, pin=True)
    assert pinned.versions["trt"] == [3] and pinned.uploaded == ["trt/config.pbtxt"]
    assert sorted(pinned.deleted) == ["trt/1/model.onnx", "trt/2/model.onnx"]
    served = mc.ModelConfig()
    text_format.Parse(config.download_as_text(), served)
    assert list(served.version_policy.specific.versions) == [3]
    assert plan.download_as_bytes() == b"engine of v2"  # not the sync's to delete


def test_a_staged_sync_removes_no_model_and_refuses_a_mass_delete_before_staging(
    gcs_client, bucket_name, small_repo, tmp_path
) -> None:
    """A model gone from the source keeps its config and files until the pinning sync; a stage that the pin would
    refuse as a mass delete is refused first, before anything is uploaded."""
    sync(small_repo, gcs_client, bucket_name)
    before = bucket_md5s(gcs_client, bucket_name)
    shutil.rmtree(small_repo / "preprocess")
    staged = sync(small_repo, gcs_client, bucket_name, stage=True)
    assert staged.deleted == [] and bucket_md5s(gcs_client, bucket_name) == before
    assert "preprocess/config.pbtxt" in sync(small_repo, gcs_client, bucket_name).deleted
    other = write_small_repo(tmp_path / "renamed")
    for model in ("resnet50", "preprocess", "empty_model"):
        (other / model).rename(other / f"{model}_new")
    with pytest.raises(SyncError, match="--allow-mass-delete"):
        sync(other, gcs_client, bucket_name, stage=True)


# --- per-server holds (--hold NAME: configs/NAME.pbtxt, read by tritonserver --model-config-name=NAME) ----------------


LABELLED_CONFIG = b"""name: "resnet50"
max_batch_size: 8
output { name: "probabilities" data_type: TYPE_FP32 dims: [2] label_filename: "labels.txt" }
"""


def _pins(client, bucket: str, name: str) -> list[int]:
    served = mc.ModelConfig()
    text_format.Parse(client.bucket(bucket).blob(f"{PREFIX}/{name}").download_as_text(), served)
    return list(served.version_policy.specific.versions)


def test_a_hold_keeps_the_live_config_and_its_versions_until_released(gcs_client, bucket_name, small_repo) -> None:
    """A new hold copies the live config byte for byte to configs/NAME.pbtxt before the flip and keeps the versions
    and label files it names through later changes; a sync without the hold deletes that config, and the versions only
    it kept go in the same sync."""
    (small_repo / "resnet50" / "config.pbtxt").write_bytes(LABELLED_CONFIG)
    sync(small_repo, gcs_client, bucket_name)
    live = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/config.pbtxt").download_as_bytes()
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"second"))
    (small_repo / "resnet50" / "labels.txt").write_bytes(b"cat\ndog\nbird\n")

    held = sync(small_repo, gcs_client, bucket_name, holds=("europe-west4",))
    assert held.versions["resnet50"] == [2] and held.held["resnet50"] == {"europe-west4": [1]}
    assert "resnet50/configs/europe-west4.pbtxt" in held.uploaded and held.deleted == []
    blob = gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/configs/europe-west4.pbtxt")
    assert blob.download_as_bytes() == live
    names = bucket_md5s(gcs_client, bucket_name)
    assert {
        "resnet50/1/model.onnx",
        "resnet50/labels.v1.txt",
        "resnet50/2/model.onnx",
        "resnet50/labels.v2.txt",
    } <= set(names)
    # Models with no live config before this sync (none here) and models unchanged are held too: the other two.
    assert held.held["preprocess"] == {"europe-west4": [1]}

    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"third"))
    third = sync(small_repo, gcs_client, bucket_name, holds=("europe-west4",))
    assert _pins(gcs_client, bucket_name, "resnet50/config.pbtxt") == [3]
    assert _pins(gcs_client, bucket_name, "resnet50/configs/europe-west4.pbtxt") == [1]
    assert "resnet50/2/model.onnx" in third.deleted and "resnet50/1/model.onnx" not in third.deleted
    assert sync(small_repo, gcs_client, bucket_name, holds=("europe-west4",)).uploaded == []  # steady: no change

    released = sync(small_repo, gcs_client, bucket_name)
    assert {"resnet50/configs/europe-west4.pbtxt", "resnet50/1/model.onnx", "resnet50/labels.v1.txt"} <= set(
        released.deleted
    )
    names = bucket_md5s(gcs_client, bucket_name)
    assert not [n for n in names if "/configs/" in n] and "resnet50/3/model.onnx" in names
    assert released.held == {}


def test_a_staged_sync_neither_writes_nor_releases_holds(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name, holds=("asia-east1",))
    held = "resnet50/configs/asia-east1.pbtxt"
    assert held not in bucket_md5s(gcs_client, bucket_name)  # nothing was live before the first sync
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"second"))
    staged = sync(small_repo, gcs_client, bucket_name, stage=True, holds=("asia-east1",))
    assert held not in staged.uploaded and staged.deleted == []
    pinned = sync(small_repo, gcs_client, bucket_name, holds=("asia-east1",))
    assert held in pinned.uploaded and _pins(gcs_client, bucket_name, held) == [1]
    assert _pins(gcs_client, bucket_name, "resnet50/config.pbtxt") == [2]
    again = sync(small_repo, gcs_client, bucket_name, stage=True)  # a stage without the hold releases nothing
    assert held in bucket_md5s(gcs_client, bucket_name) and again.deleted == []


@pytest.mark.parametrize("name", ["Europe", "-a", "a-", "a/b", "a.pbtxt", "", "a" * 64, "x\ny"])
def test_a_bad_hold_name_is_refused_before_anything_changes(gcs_client, bucket_name, small_repo, name) -> None:
    with pytest.raises(SyncError, match="--hold"):
        sync(small_repo, gcs_client, bucket_name, holds=(name,))
    assert bucket_md5s(gcs_client, bucket_name) == {}


def test_a_stranger_at_a_held_configs_name_stops_the_sync(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/configs/us-east1.pbtxt").upload_from_string(b"theirs")
    with pytest.raises(SyncError, match="not written by this sync"):
        sync(small_repo, gcs_client, bucket_name, holds=("us-east1",))


def test_the_pin_refuses_a_staged_folder_holding_a_stranger_instead_of_pinning_one_no_job_built(
    gcs_client, bucket_name, small_repo
) -> None:
    """Red team: an object in the staged folder that neither the sync nor the Job wrote (any `.plan` name the writer
    may create) made the resume take a fresh folder, which the pin then pinned without a plan. --pin refuses."""
    (small_repo / "trt" / "1").mkdir(parents=True)
    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"v1"))
    (small_repo / "trt" / "config.pbtxt").write_bytes(PLAN_CONFIG)
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "trt" / "1" / "model.onnx").write_bytes(onnx_model(b"v2"))
    sync(small_repo, gcs_client, bucket_name, stage=True)
    bucket = gcs_client.bucket(bucket_name)
    bucket.blob(f"{PREFIX}/trt/2/model.25.06.cc75.plan").upload_from_string(b"engine")
    bucket.blob(f"{PREFIX}/trt/2/extra.plan").upload_from_string(b"planted")
    before = snapshot(gcs_client, bucket_name)
    with pytest.raises(SyncError, match=r"--pin: .*trt cannot be pinned, .*trt/2/extra\.plan"):
        sync(small_repo, gcs_client, bucket_name, pin=True)
    assert snapshot(gcs_client, bucket_name) == before
    assert _pins(gcs_client, bucket_name, "trt/config.pbtxt") == [1]


def test_a_release_deletes_the_held_config_before_the_files_it_pins_and_says_so(gcs_client, bucket_name, small_repo):
    """Red team: the release deleted held weights before the held config (name order), so an interruption left a
    config naming deleted files. Every config now goes first, and the report names the released hold."""
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"second"))
    sync(small_repo, gcs_client, bucket_name, holds=("eu",))
    steps: list[tuple[str, str]] = []
    released = sync(small_repo, gcs_client, bucket_name, step=lambda action, name: steps.append((action, name)))
    deletes = [name for action, name in steps if action == "delete"]
    held_configs = [n for n in deletes if "/configs/" in n]
    assert held_configs and deletes[: len(held_configs)] == held_configs, deletes
    assert "resnet50/1/model.onnx" in deletes
    assert released.released == {"eu": sorted(released.released["eu"])} and "resnet50" in released.released["eu"]


def test_a_held_config_deleted_by_someone_else_stops_the_sync(gcs_client, bucket_name, small_repo) -> None:
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"second"))
    sync(small_repo, gcs_client, bucket_name, holds=("eu",))
    gcs_client.bucket(bucket_name).blob(f"{PREFIX}/resnet50/configs/eu.pbtxt").delete()
    with pytest.raises(SyncError, match="the held config of eu, was deleted or replaced by someone else"):
        sync(small_repo, gcs_client, bucket_name, holds=("eu",))


def test_a_held_config_name_past_gcs_limits_is_refused_before_anything_changes(gcs_client, bucket_name, tmp_path):
    """Red team: the held config's object name was not length-checked (GCS refuses names over 1024 bytes)."""
    long_model = "m" * 60
    repo = tmp_path / "repo"
    (repo / long_model / "1").mkdir(parents=True)
    (repo / long_model / "1" / "model.onnx").write_bytes(onnx_model(b"v1"))
    (repo / long_model / "config.pbtxt").write_bytes(f'name: "{long_model}"\n'.encode())
    prefix = "p" * 890
    sync_repository(repo, bucket_name, prefix, gcs_client)
    (repo / long_model / "1" / "model.onnx").write_bytes(onnx_model(b"v2"))
    before = snapshot(gcs_client, bucket_name)
    with pytest.raises(SyncError, match="1024 bytes"):
        sync_repository(repo, bucket_name, prefix, gcs_client, holds=("h" * 63,))
    assert snapshot(gcs_client, bucket_name) == before
