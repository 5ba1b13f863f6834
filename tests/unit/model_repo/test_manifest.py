"""The build manifest's SHA-256 digests: an edited built file never reaches the cache, the next build or a bucket."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.onnx_models import small_onnx
from triton_gke.infra.model_upload import built_repository_digest
from triton_gke.model_repo.build import DIGEST_SUFFIX, BuildResult, build_repository
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import FILES, MANIFEST, ManifestMismatch, sha256_file, verify_repository
from triton_gke.model_repo.settings import ModelRepoSettings, default_settings
from triton_gke.settings.errors import ConfigError

pytest_plugins = ("tests.support.gcs_fixtures",)


REBUILD = "rebuild with make model-repo"


def small_settings(onnx_file: Path) -> ModelRepoSettings:
    """The reference variants on a tiny user ONNX: every code path of the builder, built in a second."""
    return ModelRepoSettings(variants=default_settings().variants, source=str(onnx_file))


def build_small(root: Path) -> BuildResult:
    onnx_file = root / "small.onnx" if (root / "small.onnx").is_file() else small_onnx(root / "small.onnx")
    return build_repository(small_settings(onnx_file), root / "gpu", root / "cpu", cache_dir=root / "cache")


def edit_in_place(path: Path, offset: int = 100, data: bytes = b"\xff\x00\xff") -> None:
    """What the tester did: rewrite bytes of the existing inode (as root, whatever the file's mode)."""
    path.chmod(0o644)
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def cache_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "cache").glob("*.onnx"))


def test_the_manifest_records_every_files_sha256(tmp_path: Path) -> None:
    result = build_small(tmp_path)

    for repo in (result.out, result.cpu_out):
        recorded = json.loads((repo / MANIFEST).read_text())[FILES]
        on_disk = {p.relative_to(repo).as_posix(): p for p in repo.rglob("*") if p.is_file() and p.name != MANIFEST}
        assert set(recorded) == set(on_disk)
        assert all(recorded[name] == sha256_file(path) for name, path in on_disk.items())
        verify_repository(repo)  # as built: accepted


def test_an_edited_built_model_reaches_neither_the_cache_nor_the_next_build(tmp_path: Path) -> None:
    result = build_small(tmp_path)
    built = result.out / "trt_fp16" / "1" / "model.onnx"
    pristine = built.read_bytes()
    cache_before = {p: p.read_bytes() for p in cache_files(tmp_path)}

    edit_in_place(built)

    assert {p: p.read_bytes() for p in cache_files(tmp_path)} == cache_before  # the cache is a separate file
    with pytest.raises(ManifestMismatch) as refused:
        verify_repository(result.out)
    assert str(refused.value).startswith(str(result.out / "original" / "1" / "model.onnx"))  # shares the copy
    assert REBUILD in str(refused.value) and "\n" not in str(refused.value)
    rebuilt = build_small(tmp_path)
    assert (rebuilt.out / "trt_fp16" / "1" / "model.onnx").read_bytes() == pristine
    verify_repository(rebuilt.out)


def test_an_older_cache_entry_without_a_digest_is_produced_again(tmp_path: Path) -> None:
    build_small(tmp_path)
    entry = tmp_path / "cache" / f"{sha256_file(tmp_path / 'small.onnx')[:32]}.onnx"  # the user's file, by content
    good = entry.read_bytes()
    Path(f"{entry}{DIGEST_SUFFIX}").unlink()  # as left by a builder before digests (outputs were hard links)
    edit_in_place(entry)

    result = build_small(tmp_path)

    assert entry.read_bytes() == good
    verify_repository(result.out)


def test_the_upload_digest_refuses_an_edited_repository_naming_the_file(tmp_path: Path) -> None:
    result = build_small(tmp_path)
    settings = small_settings(tmp_path / "small.onnx")
    assert built_repository_digest(settings, "dev", result.out)
    labels = result.out / "original" / "labels.txt"
    labels.write_text(labels.read_text().replace("class_0001", "class_9999"))

    with pytest.raises(ConfigError) as refused:
        built_repository_digest(settings, "dev", result.out)

    assert str(refused.value) == (
        f"{labels}: changed since the build (SHA-256 differs from the manifest); {REBUILD} STACK=dev"
    )


# ---------------------------------------------------------------- property-based: any change is caught
@pytest.fixture(scope="module")
def small_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_small(tmp_path_factory.mktemp("small")).cpu_out


_edits = st.sampled_from(["flip", "truncate", "append", "delete", "add", "replace"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit=_edits, pick=st.integers(min_value=0), offset=st.integers(min_value=0), data=st.binary(min_size=1))
def test_any_change_to_any_file_is_refused_naming_that_file(
    tmp_path_factory: pytest.TempPathFactory, small_repo: Path, edit: str, pick: int, offset: int, data: bytes
) -> None:
    repo = tmp_path_factory.mktemp("edit") / "repo"
    shutil.copytree(small_repo, repo)  # copies: an edit touches this example's file only
    files = sorted(p for p in repo.rglob("*") if p.is_file() and p.name != MANIFEST)
    target = files[pick % len(files)]
    content = target.read_bytes()
    if edit == "flip" and content:
        at = offset % len(content)
        target.write_bytes(content[:at] + bytes([content[at] ^ 0xFF]) + content[at + 1 :])
    elif edit == "truncate" or (edit == "flip" and not content):
        target.write_bytes(content[: offset % max(len(content), 1)] if content else b"x")
    elif edit == "append":
        target.write_bytes(content + data)
    elif edit == "delete":
        target.unlink()
    elif edit == "add":
        target = target.with_name(f"extra-{offset % 1000}.bin")
        target.write_bytes(data)
    else:  # replaced by another file of the repository with different content, as `cp` would
        other = next((f for f in files if f.read_bytes() != content), None)
        if other is None:
            return
        shutil.copyfile(other, target)

    with pytest.raises(ManifestMismatch) as refused:
        verify_repository(repo)

    message = str(refused.value)
    assert message.startswith(f"{target}: ") and message.endswith(REBUILD) and "\n" not in message


def test_bytecode_the_python_backend_leaves_is_not_a_change(tmp_path: Path, small_repo: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(small_repo, repo)
    cache = repo / "original" / "1" / "__pycache__"
    cache.mkdir()
    (cache / "model.cpython-311.pyc").write_bytes(b"\x00" * 16)

    verify_repository(repo)


def test_a_repository_without_digests_is_refused_for_upload(tmp_path: Path, small_repo: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(small_repo, repo)
    manifest = json.loads((repo / MANIFEST).read_text())
    del manifest[FILES]
    (repo / MANIFEST).write_text(json.dumps(manifest))

    with pytest.raises(ModelRepoError, match=rf"built without file digests .*; {REBUILD}$"):
        verify_repository(repo)


def test_a_fifo_in_place_of_a_built_file_is_refused_not_read(tmp_path: Path) -> None:
    """Hashing a FIFO would block until someone writes to it (a red team hung gpu-check, plan and sync alike)."""
    import os

    result = build_small(tmp_path)
    config = result.out / "trt_fp16" / "config.pbtxt"
    config.unlink()
    os.mkfifo(config)
    with pytest.raises(ManifestMismatch, match="config.pbtxt: not a regular file"):
        verify_repository(result.out)
