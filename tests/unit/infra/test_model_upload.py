"""`pulumi up` syncs the built repository into the bucket, re-running only when its content changes."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from tests.support.stacks import evaluate_component
from triton_gke.infra.model_upload import BUILT_REPOSITORY, ModelUpload, ModelUploadArgs, built_repository_digest
from triton_gke.model_repo.build import build_repository
from triton_gke.model_repo.settings import default_settings
from triton_gke.settings.errors import ConfigError


@pytest.fixture()
def repository_copy(tmp_path):
    copy = tmp_path / "model_repository"
    shutil.copytree(BUILT_REPOSITORY, copy)
    return copy


def test_digest_changes_with_a_rebuild_that_changes_a_file_and_only_then(repository_copy, tmp_path):
    settings = default_settings()
    first = built_repository_digest(settings, "dev", repository_copy)
    assert built_repository_digest(settings, "dev", repository_copy) == first
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"label {i}\n" for i in range(1000)))
    build_repository(dataclasses.replace(settings, labels=str(labels)), repository_copy)
    assert built_repository_digest(settings, "dev", repository_copy) != first


def test_a_file_edited_after_the_build_is_refused_naming_it(repository_copy):
    labels = repository_copy / "original" / "labels.txt"
    labels.write_text("cat\n")  # by hand, not by the builder: the manifest's SHA-256 no longer matches
    with pytest.raises(ConfigError) as refused:
        built_repository_digest(default_settings(), "dev", repository_copy)
    assert str(refused.value).startswith(f"{labels}: changed since the build")
    assert str(refused.value).endswith("rebuild with make model-repo STACK=dev")


def test_a_missing_repository_is_refused_before_anything_is_declared(tmp_path):
    with pytest.raises(ConfigError, match=r"no model repository built; run `make model-repo STACK=dev` first"):
        built_repository_digest(default_settings(), "dev", tmp_path / "nothing")


def test_a_repository_built_for_other_settings_is_refused(repository_copy):
    settings = default_settings()
    fewer = dataclasses.replace(settings, variants=settings.variants[:2])
    with pytest.raises(ConfigError, match="built from other model settings than stack 'prod'"):
        built_repository_digest(fewer, "prod", repository_copy)


def test_the_sync_command_targets_the_bucket_prefix_and_is_triggered_by_the_digest():
    args = ModelUploadArgs(bucket="demo-bucket", prefix="models/v1", digest="abc123")
    plan = evaluate_component(lambda: ModelUpload("upload", args))
    (sync,) = plan.of_type("command:local:Command")
    assert (
        sync.inputs["create"]
        == ".venv/bin/python -m triton_gke.model_repo.sync build/model_repository gs://demo-bucket/models/v1"
    )
    assert sync.inputs["update"] == sync.inputs["create"]
    assert sync.inputs["triggers"] == ["abc123"]


def test_the_dev_plan_uploads_into_its_own_bucket(dev_plan):
    (sync,) = [c for c in dev_plan.of_type("command:local:Command") if c.name == "models-sync"]
    (bucket,) = dev_plan.of_type("gcp:storage/bucket:Bucket")
    assert f"gs://{bucket.inputs['name']}/models" in sync.inputs["create"]
    assert bucket.urn in sync.dependencies
