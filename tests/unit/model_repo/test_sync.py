"""model_repo.sync's generation preconditions against a stub bucket: a delete or an upload racing another writer.

The emulator (gcp-storage-emulator) ignores ifGenerationMatch preconditions, so the 412 paths are checked here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud import storage

from triton_gke.model_repo import sync as sync_module
from triton_gke.model_repo.sync import SyncError


def test_sync_says_what_it_waits_on_before_the_listing(tmp_path: Path) -> None:
    from triton_gke.model_repo import sync

    model = tmp_path / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    (model / "1" / "model.py").write_text("x = 1\n")
    said: list[str] = []

    class Unreachable:
        def list_blobs(self, bucket: str, prefix: str) -> list[Any]:
            assert said == ["listing gs://b/models/ ..."], said  # the line came first
            raise sync.SyncError("listing failed")

    with pytest.raises(sync.SyncError, match="listing failed"):
        sync.sync_repository(tmp_path / "repo", "b", "models", Unreachable(), dry_run=True, note=said.append)  # type: ignore[arg-type]


def one_line(err: pytest.ExceptionInfo[SyncError]) -> str:
    message = str(err.value)
    assert message and "\n" not in message
    return message


# --- 412: a change racing the sync (the emulator ignores preconditions: a stub bucket answers 412) ------------------
class RacedBucket:
    name = "raced"

    def delete_blob(self, name: str, if_generation_match: int) -> None:
        raise api_exceptions.PreconditionFailed("conditionNotMet")

    def blob(self, name: str, chunk_size: int | None = None) -> storage.Blob:
        bucket = self

        class Raced(storage.Blob):
            def upload_from_string(self, *args, **kwargs) -> None:
                raise api_exceptions.PreconditionFailed("conditionNotMet")

        return Raced(name, bucket=storage.Bucket(None, bucket.name))


def test_a_delete_racing_another_writer_leaves_their_object():
    blob = storage.Blob("models/m/1/x", bucket=storage.Bucket(None, "raced"))
    assert sync_module._delete(RacedBucket(), blob, 7) is False  # type: ignore[arg-type]


def test_an_upload_racing_another_writer_stops_in_one_line(tmp_path):
    from triton_gke.model_repo.sync_source import bytes_file

    local = bytes_file("m/config.pbtxt", tmp_path / "config.pbtxt", b"x")
    with pytest.raises(SyncError) as caught:
        sync_module.upload_file(RacedBucket(), "models/m/config.pbtxt", local, 7, 1 << 18, None)  # type: ignore[arg-type]
    assert "changed during the sync" in one_line(caught) and "not overwritten" in str(caught.value)
