"""Issue 44, bad input 5: a model folder named like the sync's own record (.triton-gke-sync.json) was accepted, and
its files went under the record's name. Every name the toolkit reserves now has one home, model_repo/reserved.py,
read by the sync (record, held configs), the manifest and the source scan, and a source using one is refused in one
line naming the path, before anything is sent: a model named like the record, the build manifest or a skipped
folder, and a file in a model's configs/ folder, where the sync writes held configs (--hold).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from triton_gke.contracts.naming import MODEL_NAME_RE
from triton_gke.contracts.paths import cpu_twin_repository
from triton_gke.model_repo import manifest, sync, sync_source
from triton_gke.model_repo.reserved import (
    HOLDS_FOLDER,
    IGNORED_DIRS,
    IGNORED_FILES,
    MANIFEST,
    RECORD_NAME,
    RESERVED_MODEL_FOLDERS,
    RESERVED_MODEL_NAMES,
)
from triton_gke.model_repo.sync_source import SyncError, scan_source

MODEL_NAMES = st.from_regex(MODEL_NAME_RE, fullmatch=True).filter(lambda n: n not in RESERVED_MODEL_NAMES)
FILE_NAMES = st.text(
    st.characters(whitelist_categories=("L", "N"), whitelist_characters="._-"), min_size=1, max_size=12
).filter(lambda n: n not in (".", ".."))


def write_model(root: Path, name: str, extra: dict[str, bytes] | None = None) -> Path:
    """A model the scan accepts: a config and a version folder holding a file (plus `extra` files)."""
    folder = root / name
    files = {"config.pbtxt": b'name: "m"\n', "1/weights.bin": b"\0\1", **(extra or {})}
    for relative, data in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
    return folder


@settings(max_examples=60, deadline=None)
@given(reserved=st.sampled_from(sorted(RESERVED_MODEL_NAMES)), others=st.lists(MODEL_NAMES, max_size=3, unique=True))
def test_a_model_named_like_a_reserved_name_is_refused_in_one_line(reserved: str, others: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in others:
            write_model(root, name)
        bad = write_model(root, reserved)
        with pytest.raises(SyncError) as refused:
            scan_source(root)
    message = str(refused.value)
    assert message.startswith(f"{bad}: a model may not be named {reserved}: "), message
    assert message.isprintable(), message


@settings(max_examples=60, deadline=None)
@given(folder=st.sampled_from(sorted(RESERVED_MODEL_FOLDERS)), below=st.lists(FILE_NAMES, min_size=0, max_size=3))
def test_a_file_in_a_folder_the_sync_writes_is_refused_in_one_line(folder: str, below: list[str]) -> None:
    """configs/NAME.pbtxt is where a hold goes; a source's own file there (any name, any depth) is refused, and so is
    a file named configs itself (red team 44, finding 7: object MODEL/configs beside the held MODEL/configs/R.pbtxt)."""
    relative = "/".join([folder, *below])
    with tempfile.TemporaryDirectory() as tmp:
        model = write_model(Path(tmp), "resnet", {relative: b'name: "m"\n'})
        with pytest.raises(SyncError) as refused:
            scan_source(Path(tmp))
    message = str(refused.value)
    if below:
        assert message.startswith(f"{model / relative}: a model may not hold files in {folder}/: "), message
    else:
        assert message.startswith(f"{model / folder}: a model may not hold a file named {folder}: "), message
    assert message.isprintable(), message


@settings(max_examples=40, deadline=None)
@given(reserved=st.sampled_from(sorted({*RESERVED_MODEL_NAMES, *RESERVED_MODEL_FOLDERS})), data=st.data())
def test_a_case_variant_of_a_reserved_name_is_another_name(reserved: str, data: st.DataObject) -> None:
    """GCS compares object names as given (reserved.py cites the naming page): .TRITON-GKE-SYNC.JSON/ is not the
    record, CONFIGS/ not the folder Triton reads held configs from; such a model or file is synced as it is."""
    flips = data.draw(st.lists(st.booleans(), min_size=len(reserved), max_size=len(reserved)))
    variant = "".join(c.swapcase() if flip else c for c, flip in zip(reserved, flips, strict=True))
    assume(variant != reserved)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if reserved in RESERVED_MODEL_FOLDERS:
            write_model(root, "resnet", {f"{variant}/a.pbtxt": b'name: "m"\n'})
            assert f"{variant}/a.pbtxt" in scan_source(root).models["resnet"].files
        else:
            write_model(root, variant)
            assert variant in scan_source(root).models


def test_a_bytecode_folder_is_still_skipped_when_it_is_no_model(tmp_path: Path) -> None:
    write_model(tmp_path, "resnet")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert list(scan_source(tmp_path).models) == ["resnet"]


def test_every_reader_takes_the_names_from_the_one_home() -> None:
    assert sync.RECORD_NAME is RECORD_NAME and sync.HOLDS_FOLDER is HOLDS_FOLDER
    assert manifest.MANIFEST is MANIFEST and manifest.IGNORED_DIRS is IGNORED_DIRS is sync_source.IGNORED_DIRS
    assert sync.hold_config("m", "us-east1") == f"m/{HOLDS_FOLDER}/us-east1.pbtxt"
    assert {RECORD_NAME, MANIFEST, *IGNORED_DIRS, *IGNORED_FILES} <= set(RESERVED_MODEL_NAMES)
    assert sync_source.IGNORED_FILES is IGNORED_FILES and ".DS_Store" in RESERVED_MODEL_NAMES  # as the CHANGELOG says


def test_no_variant_name_the_builder_takes_is_reserved() -> None:
    """The builder names model folders after variants (MODEL_NAME_RE): none can be refused by the sync."""
    assert not [name for name in RESERVED_MODEL_NAMES if MODEL_NAME_RE.fullmatch(name)]


def test_the_built_repository_uses_no_reserved_folder() -> None:
    """tests/conftest.py builds the dev stack's repository once per session; the sync accepts it as it is."""
    root = cpu_twin_repository()
    assert scan_source(root, check_files=False).models
    assert not [p for p in root.rglob("*") if p.parent.parent == root and p.name in RESERVED_MODEL_FOLDERS]
