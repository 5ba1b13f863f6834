"""model_repo.sync owns objects by identity (generation, hashes, its mark), not by name, against the GCS emulator.

GCS gives an object a new generation whenever it is replaced (https://cloud.google.com/storage/docs/metadata,
"generation"); the emulator (gcp-storage-emulator) does too, but it ignores ifGenerationMatch preconditions, so the
412 paths are checked with a stub bucket below and the emulator tests check what the sync decides from the listing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from google.cloud import storage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.gcs_fixtures import write_small_repo
from tests.support.onnx_models import onnx_model
from tests.unit.model_repo.test_sync import one_line
from triton_gke.model_repo import sync as sync_module
from triton_gke.model_repo.sync import OWNER_KEY, RECORD_NAME, SyncError, main, sync_repository

pytest_plugins = ("tests.support.gcs_fixtures",)


PREFIX = "models"


RECORD = f"{PREFIX}/{RECORD_NAME}"


def sync(repo: Path, client: storage.Client, bucket: str, **kwargs):
    return sync_repository(repo, bucket, PREFIX, client, **kwargs)


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def snapshot(client: storage.Client, bucket: str) -> dict[str, tuple[str, int]]:
    return {b.name: (b.md5_hash, b.generation) for b in client.list_blobs(bucket)}


def put(client: storage.Client, bucket: str, name: str, data: bytes) -> int:
    """Another writer (no mark): a plain upload, as gsutil cp would do."""
    blob = client.bucket(bucket).blob(name)
    blob.upload_from_string(data)
    return int(blob.generation)


def record_body(client: storage.Client, bucket: str) -> dict:
    return json.loads(client.bucket(bucket).blob(RECORD).download_as_bytes())


def write_record_body(client: storage.Client, bucket: str, body: dict | bytes) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    client.bucket(bucket).blob(RECORD).upload_from_string(data, content_type="application/json")


# --- (a) what the sync did by name before -----------------------------------------------------
def test_an_owned_object_someone_overwrote_is_not_deleted_and_reported(gcs_client, bucket_name, small_repo, capsys):
    sync(small_repo, gcs_client, bucket_name)
    theirs = put(gcs_client, bucket_name, f"{PREFIX}/resnet50/labels.txt", b"their labels\n")
    (small_repo / "resnet50" / "labels.txt").unlink()  # the sync would delete its own labels.txt

    code = main([str(small_repo), f"gs://{bucket_name}/{PREFIX}"])

    out = capsys.readouterr().out
    assert code == 0
    warning = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "resnet50/labels.txt" in warning[0]
    blob = gcs_client.bucket(bucket_name).get_blob(f"{PREFIX}/resnet50/labels.txt")
    assert blob is not None and blob.generation == theirs
    assert blob.download_as_bytes() == b"their labels\n"


def test_an_owned_object_someone_overwrote_where_the_sync_must_write_stops_it(gcs_client, bucket_name, small_repo):
    sync(small_repo, gcs_client, bucket_name)
    put(gcs_client, bucket_name, f"{PREFIX}/resnet50/config.pbtxt", b'name: "resnet50"\nmax_batch_size: 1\n')
    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"new weights"))
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert "resnet50/config.pbtxt" in one_line(caught) and "replaced by someone else" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before


def test_a_name_another_team_reused_is_not_deleted(gcs_client, bucket_name, small_repo, tmp_path):
    sync(small_repo, gcs_client, bucket_name)
    name = f"{PREFIX}/preprocess/1/model.py"
    gcs_client.bucket(bucket_name).delete_blob(name)  # the sync's object is gone; another team takes the name
    theirs = put(gcs_client, bucket_name, name, b"# another team's model\n")
    shutil_rmtree(small_repo / "preprocess")  # the sync would remove the whole model

    report = sync(small_repo, gcs_client, bucket_name)

    assert name.removeprefix(f"{PREFIX}/") not in report.deleted
    assert "preprocess/config.pbtxt" in report.deleted  # its own object still goes
    assert gcs_client.bucket(bucket_name).get_blob(name).generation == theirs
    assert name.removeprefix(f"{PREFIX}/") in report.strangers


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


@pytest.mark.parametrize("form", ["names-only", "forged-generation", "forged-upload-in-flight"])
def test_a_hand_edited_record_cannot_claim_a_stranger(gcs_client, bucket_name, small_repo, form):
    sync(small_repo, gcs_client, bucket_name)
    strangers = {f"{PREFIX}/other-team/model.bin": b"theirs", f"{PREFIX}/resnet50/README.md": b"their notes"}
    for name, data in strangers.items():
        put(gcs_client, bucket_name, name, data)
    body = record_body(gcs_client, bucket_name)
    listed = {b.name[len(PREFIX) + 1 :]: b for b in gcs_client.list_blobs(bucket_name, prefix=f"{PREFIX}/")}
    claims = [n[len(PREFIX) + 1 :] for n in strangers]
    if form == "names-only":  # today's format: a list of names
        body = {"format": 1, "objects": sorted([*body["objects"], *claims]), "models": body["models"]}
    for claim in claims:
        blob = listed[claim]
        if form == "forged-generation":  # copied from `gcloud storage ls -a`: the right generation and hash
            body["objects"][claim] = {"generation": blob.generation, "md5": blob.md5_hash, "crc32c": None, "next": None}
        elif form == "forged-upload-in-flight":
            body["objects"][claim] = {"generation": None, "md5": None, "crc32c": None, "next": blob.md5_hash}
    write_record_body(gcs_client, bucket_name, body)
    before = {n: snapshot(gcs_client, bucket_name)[n] for n in strangers}

    report = sync(small_repo, gcs_client, bucket_name)

    assert {n: snapshot(gcs_client, bucket_name)[n] for n in strangers} == before
    assert not set(claims) & set(report.deleted)
    assert set(claims) <= set(report.strangers)


# --- the earlier record format ------------------------------------------------------------------
def make_legacy(client: storage.Client, bucket: str) -> None:
    """What the sync before generations left: the same objects without the mark, a names-only record."""
    body = record_body(client, bucket)
    for blob in client.list_blobs(bucket, prefix=f"{PREFIX}/"):
        if blob.name != RECORD:
            client.bucket(bucket).blob(blob.name).upload_from_string(blob.download_as_bytes())
    write_record_body(client, bucket, {"format": 1, "objects": sorted(body["objects"]), "models": body["models"]})


def test_an_old_format_record_is_claimed_where_the_objects_hold_what_the_sync_would_write(
    gcs_client, bucket_name, small_repo
):
    sync(small_repo, gcs_client, bucket_name)
    make_legacy(gcs_client, bucket_name)
    before = snapshot(gcs_client, bucket_name)

    assert not sync(small_repo, gcs_client, bucket_name).uploaded  # same bytes: claimed, nothing sent
    assert snapshot(gcs_client, bucket_name) == before

    (small_repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"new weights"))
    report = sync(small_repo, gcs_client, bucket_name)
    # The config matches what the sync would write at the recorded offset: claimed, and replaced. The old
    # weights hold other bytes than the source's: not claimed, left in place and reported.
    assert "resnet50/config.pbtxt" in report.uploaded and "resnet50/2/model.onnx" in report.uploaded
    assert "resnet50/1/model.onnx" in report.strangers and not report.deleted
    assert record_body(gcs_client, bucket_name)["format"] == 2
    assert gcs_client.bucket(bucket_name).get_blob(f"{PREFIX}/resnet50/labels.txt").metadata  # claimed: marked
    assert not sync(small_repo, gcs_client, bucket_name).uploaded


def test_an_old_format_record_naming_a_changed_object_needs_adopt(gcs_client, bucket_name, small_repo):
    sync(small_repo, gcs_client, bucket_name)
    make_legacy(gcs_client, bucket_name)
    (small_repo / "resnet50" / "config.pbtxt").write_bytes(b'name: "resnet50"\nmax_batch_size: 4\n')
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)
    assert "--adopt" in one_line(caught) and "resnet50/config.pbtxt" in str(caught.value)
    assert snapshot(gcs_client, bucket_name) == before

    report = sync(small_repo, gcs_client, bucket_name, adopt=True)
    assert "resnet50/config.pbtxt" in report.uploaded and "resnet50/1/model.onnx" in report.deleted
    assert not sync(small_repo, gcs_client, bucket_name).uploaded


def test_adopt_claims_from_an_edited_old_record_only_what_a_source_model_folder_holds(
    gcs_client, bucket_name, small_repo
):
    """Red-team finding: an old-format record edited to list every object, then --adopt (as the error suggests),
    deleted a stranger model and a stranger file beside a model's config. --adopt claims, as for a bucket without a
    record, only a source model's config.pbtxt and version folders; the rest stays and is reported."""
    sync(small_repo, gcs_client, bucket_name)
    strangers = {f"{PREFIX}/zzz/config.pbtxt": b'name: "zzz"', f"{PREFIX}/zzz/1/model.onnx": b"x"}
    strangers[f"{PREFIX}/resnet50/stranger.txt"] = b"someone else's"
    make_legacy(gcs_client, bucket_name)
    generations = {name: put(gcs_client, bucket_name, name, data) for name, data in strangers.items()}
    listed = sorted(b.name.removeprefix(f"{PREFIX}/") for b in gcs_client.list_blobs(bucket_name, prefix=f"{PREFIX}/"))
    write_record_body(
        gcs_client, bucket_name, {"format": 1, "objects": [n for n in listed if n != RECORD_NAME], "models": {}}
    )

    report = sync(small_repo, gcs_client, bucket_name, adopt=True)
    live = snapshot(gcs_client, bucket_name)
    assert {name: live[name][1] for name in strangers} == generations, report
    assert not {n.removeprefix(f"{PREFIX}/") for n in strangers} & set(report.deleted)


# --- an interrupted sync still owns what it wrote ---------------------------------------------------------
class StopSync(Exception):
    pass


def test_an_upload_the_record_never_confirmed_is_still_owned(gcs_client, bucket_name, small_repo):
    def stop_after_first_upload(name: str, sent: int, total: int) -> None:
        if sent == total:
            raise StopSync

    with pytest.raises(StopSync):
        sync(small_repo, gcs_client, bucket_name, progress=stop_after_first_upload)
    entries = record_body(gcs_client, bucket_name)["objects"]
    arrived = [n for n, e in entries.items() if e["next"] and f"{PREFIX}/{n}" in snapshot(gcs_client, bucket_name)]
    assert len(arrived) == 1 and entries[arrived[0]]["generation"] is None

    report = sync(small_repo, gcs_client, bucket_name)
    assert arrived[0] not in report.uploaded and not report.strangers and not report.disowned
    entries = record_body(gcs_client, bucket_name)["objects"]
    live = {b.name[len(PREFIX) + 1 :]: b for b in gcs_client.list_blobs(bucket_name, prefix=f"{PREFIX}/")}
    assert {n: e["generation"] for n, e in entries.items()} == {
        n: b.generation for n, b in live.items() if n != RECORD_NAME
    }
    assert all(b.metadata == {OWNER_KEY: b.md5_hash} for n, b in live.items() if n != RECORD_NAME)


# --- (c) the record reader is bounded ---------------------------------------------------------------------
def entry(generation: str) -> bytes:
    return (
        b'{"format": 2, "models": {}, "objects": {"m/config.pbtxt": {"generation": '
        + generation.encode()
        + b', "md5": "x", "crc32c": null, "next": null}}}'
    )


BAD_RECORDS = {
    "not-utf8": b'{"format": 2, "models": {}, "objects": {"\xff\xfe": {}}}',
    "utf16": '{"format": 2, "models": {}, "objects": {}}'.encode("utf-16"),
    "deep": b'{"format": 2, "models": {}, "objects": {}, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "nine-deep": b'{"format": 2, "models": {}, "objects": {}, "x": [[[[[[[[1]]]]]]]]}',
    "nan": entry("NaN"),
    "infinity": entry("Infinity"),
    "1e400": entry("1e400"),
    "float": entry("12.0"),
    "negative": entry("-5"),
    "zero": entry("0"),
    "2**63": entry(str(2**63)),
    "huge": entry("9" * 5000),
    "bool": entry("true"),
    "string": entry('"12"'),
    "duplicate-key": b'{"format": 2, "format": 2, "models": {}, "objects": {}}',
    "no-hash": b'{"format": 2, "models": {}, "objects": {"m/x": {"generation": 5}}}',
}


@pytest.mark.parametrize("body", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_a_bad_record_is_named_in_one_line_and_nothing_changes(gcs_client, bucket_name, small_repo, body):
    sync(small_repo, gcs_client, bucket_name)
    (small_repo / "resnet50" / "labels.txt").unlink()
    write_record_body(gcs_client, bucket_name, body)
    before = snapshot(gcs_client, bucket_name)

    with pytest.raises(SyncError) as caught:
        sync(small_repo, gcs_client, bucket_name)

    assert f"gs://{bucket_name}/{RECORD}" in one_line(caught) and len(str(caught.value)) < 600
    assert snapshot(gcs_client, bucket_name) == before


def test_an_oversized_record_is_read_no_further_than_the_cap(gcs_client, bucket_name, small_repo, monkeypatch):
    sync(small_repo, gcs_client, bucket_name)
    body = record_body(gcs_client, bucket_name)
    body["padding"] = "x" * 5000
    write_record_body(gcs_client, bucket_name, body)
    monkeypatch.setattr(sync_module, "RECORD_MAX_BYTES", 4096)
    bucket = gcs_client.bucket(bucket_name)
    listed = bucket.get_blob(RECORD)

    with pytest.raises(SyncError, match="larger than 4096 bytes") as caught:
        sync(small_repo, gcs_client, bucket_name)  # refused from the listed size, before any download
    one_line(caught)

    reads: list[int] = []
    download = storage.Blob.download_as_bytes

    def counted(self, *args, **kwargs):
        data = download(self, *args, **kwargs)
        reads.append(len(data))
        return data

    monkeypatch.setattr(storage.Blob, "download_as_bytes", counted)
    listed._properties["size"] = "10"  # a listing that understates the size: the read itself stops at cap + 1
    with pytest.raises(SyncError, match="larger than 4096 bytes"):
        sync_module.read_record(bucket, f"{PREFIX}/", listed)
    assert reads == [4097]


# --- (b) property: never delete or overwrite a generation the sync did not write -------------------------------
VARIANTS = st.sampled_from(["base", "new-weights", "no-labels", "no-preprocess"])


NAMES = st.sampled_from(
    [
        "resnet50/config.pbtxt",
        "resnet50/1/model.onnx",
        "resnet50/2/model.onnx",
        "resnet50/labels.txt",
        "preprocess/config.pbtxt",
        "preprocess/1/model.py",
        "preprocess/2/model.py",
        "other/model.bin",
    ]
)


EDITS = st.sampled_from(["forge-generation", "forge-in-flight", "names-only", "bump-generation", "drop-entry"])


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("sync"), VARIANTS),
        st.tuples(st.just("write"), NAMES),
        st.tuples(st.just("delete"), NAMES),
        st.tuples(st.just("edit"), st.tuples(EDITS, NAMES)),
    ),
    min_size=1,
    max_size=7,
)


def make_variant(root: Path, variant: str) -> Path:
    import shutil

    if root.exists():
        shutil.rmtree(root)
    repo = write_small_repo(root)
    if variant == "new-weights":
        (repo / "resnet50" / "1" / "model.onnx").write_bytes(onnx_model(b"other weights"))
    elif variant == "no-labels":
        (repo / "resnet50" / "labels.txt").unlink()
    elif variant == "no-preprocess":
        shutil.rmtree(repo / "preprocess")
    return repo


def edit_record(client: storage.Client, bucket: str, how: str, name: str) -> None:
    blob = client.bucket(bucket).get_blob(RECORD)
    if blob is None:
        return
    body = json.loads(blob.download_as_bytes())
    objects = body["objects"]
    if isinstance(objects, list) and how != "names-only":
        return  # an earlier edit left the old format: nothing to forge an entry in
    live = client.bucket(bucket).get_blob(f"{PREFIX}/{name}")
    if how == "names-only":
        body = {"format": 1, "objects": sorted({*objects, name}), "models": body["models"]}
    elif how == "forge-generation" and live is not None:
        objects[name] = {"generation": live.generation, "md5": live.md5_hash, "crc32c": None, "next": None}
    elif how == "forge-in-flight" and live is not None:
        objects[name] = {"generation": None, "md5": None, "crc32c": None, "next": live.md5_hash}
    elif how == "bump-generation" and name in objects and objects[name]["generation"]:
        objects[name]["generation"] += 1
    elif how == "drop-entry":
        objects.pop(name, None)
    write_record_body(client, bucket, body)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_sync_never_deletes_or_overwrites_a_generation_it_did_not_write(gcs_client, tmp_path, steps):
    import uuid

    bucket = f"prop-{uuid.uuid4().hex[:12]}"
    gcs_client.create_bucket(bucket)
    repo_root = tmp_path / uuid.uuid4().hex[:8]
    written: set[tuple[str, int]] = set()  # (name, generation) the sync created
    count = 0
    for action, arg in [("sync", "base"), *steps]:
        if action == "write":
            count += 1
            put(gcs_client, bucket, f"{PREFIX}/{arg}", f"stranger {count}\n".encode())
        elif action == "delete":
            blob = gcs_client.bucket(bucket).get_blob(f"{PREFIX}/{arg}")
            if blob is not None:
                blob.delete()
        elif action == "edit":
            edit_record(gcs_client, bucket, *arg)
        else:
            before = {n: g for n, (_, g) in snapshot(gcs_client, bucket).items() if n != RECORD}
            try:
                sync(make_variant(repo_root, arg), gcs_client, bucket)
            except SyncError as err:
                assert "\n" not in str(err)
            after = {n: g for n, (_, g) in snapshot(gcs_client, bucket).items() if n != RECORD}
            for name, generation in before.items():
                if (name, generation) not in written:
                    assert after.get(name) == generation, (name, steps)
            written |= {(n, g) for n, g in after.items() if before.get(n) != g}
