"""settings.stack_file: a FIFO, /dev/zero or a link to either as a stack file is refused before a byte is read,
and a regular file is read up to one byte past its cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.settings import ConfigError, stack_config
from triton_gke.settings.stack_file import MAX_BYTES, NotRegularFileError, read_regular_file


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


def test_a_stack_file_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.z.yaml").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"^Pulumi\.z\.yaml \(/dev/zero\): a character device, not a regular file"):
        stack_config("z", project_dir=tmp_path)


def test_a_stack_file_that_is_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "Pulumi.z.yaml")
    with pytest.raises(ConfigError, match=r"^Pulumi\.z\.yaml \(.*\): a FIFO \(named pipe\), not a regular file"):
        stack_config("z", project_dir=tmp_path)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300), cap=st.integers(min_value=0, max_value=300))
def test_a_regular_file_is_read_up_to_one_byte_past_the_cap(data: bytes, cap: int, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("f") / "file"
    path.write_bytes(data)
    link = path.with_name("link")
    link.symlink_to(path)
    assert read_regular_file(path, cap) == data[: cap + 1]
    assert read_regular_file(link, cap) == data[: cap + 1]  # a link to a regular file is read as the file


def test_special_files_are_not_opened(fifo: Path, tmp_path: Path) -> None:
    for path, kind in [
        (fifo, "a FIFO (named pipe)"),
        (Path("/dev/zero"), "a character device"),
        (tmp_path, "a folder"),
    ]:
        with pytest.raises(NotRegularFileError) as refused:
            read_regular_file(path, MAX_BYTES)
        assert refused.value.kind == kind


def test_an_oversized_stack_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.big.yaml").write_text("#" * (MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=f"^Pulumi.big.yaml: more than {MAX_BYTES} bytes"):
        stack_config("big", project_dir=tmp_path)


@pytest.mark.parametrize("escape", ["\\N", "\\L", "\\P", "\\n", "\\x1b"])
def test_a_key_holding_a_line_break_is_named_on_one_line(tmp_path: Path, escape: str) -> None:
    """YAML's "\\N" is U+0085, which str.splitlines breaks at: found by make test's hypothesis run under the CPU hog."""
    (tmp_path / "Pulumi.k.yaml").write_text(f'config:\n  triton-gke:gpuSpot: {{"{escape}": null}}\n')
    with pytest.raises(ConfigError) as refused:
        stack_config("k", project_dir=tmp_path)
    assert len(str(refused.value).splitlines()) == 1, str(refused.value)
