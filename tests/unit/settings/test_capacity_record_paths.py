"""The capacity record a stack names (capacityRecord) and the records folder the plan sizes from.

Each test failed before its fix: capacityRecord accepted a '..' that came back into the project, and a hidden
editor lock link in capacity/records/ failed every plan."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import triton_gke.settings.capacity as sizing
from tests.support.checkout import PROJECT_DIR
from tests.unit.settings.test_capacity import _capacity_rows, plan_refusal, write_record
from triton_gke.capacity.records import (
    RECORDS_DIR,
    CapacityError,
    load_record,
    load_records,
)
from triton_gke.offline import plan as plan_command

ORIGINAL = "nvidia-tesla-t4__original__tensorrtserver-19.05-py3-tutorial__slo-100ms.json"


# ---------------------------------------------------------------- 3. the table: what the HPA's range serves
def test_the_table_shows_what_the_hpas_range_serves(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The HPA scales Triton from the derived GPU minimum (5 here) to gpuMaxNodes (10): the table shows both ends."""
    args = ["--stack", "staging", "--out", str(tmp_path / "plan"), "--set", "targetRps=1012"]
    args += ["--set", "gpuMaxNodes=10"]
    assert plan_command.main(args) == 0
    output = capsys.readouterr().out
    assert {row[2] for row in _capacity_rows(output).values()} == {"1265.0-2530.0"}
    assert "No HPA" not in output


# ---------------------------------------------------------------- 4. capacityRecord: no '..' at all
@pytest.fixture(scope="module")
def in_project() -> Iterator[Path]:
    (PROJECT_DIR / "build").mkdir(exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix="test-capacity-2-", dir=PROJECT_DIR / "build"))
    yield made
    shutil.rmtree(made)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(returns=st.integers(min_value=1, max_value=3), dots=st.integers(min_value=0, max_value=2))
def test_a_dot_dot_component_is_refused_even_when_it_stays_inside(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, in_project: Path, returns: int, dots: int
) -> None:
    """The tester's mine/../mine/frac.json: README says '..' is refused, so it is, wherever it leads."""
    record = write_record(in_project, 2530, None)
    inside = record.parent.relative_to(PROJECT_DIR)
    named = "/".join([str(inside), *["..", inside.name] * returns, *["."] * dots, record.name])
    assert (PROJECT_DIR / named).resolve() == record  # it does stay inside the project
    line = plan_refusal(capsys, tmp_path / "plan", "targetRps=300", f"capacityRecord={named}")
    assert line == (
        f"error: triton-gke:capacityRecord: {named!r} is not valid; a '..' component; give the record's path within "
        "the project"
    )


# ---------------------------------------------------------------- 5. not a regular file; hidden and stray files
def test_what_is_no_regular_file_is_named(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe__v__t__slo-1ms.json"
    os.mkfifo(fifo)
    for path, kind in ((tmp_path, "a directory"), (fifo, "a FIFO"), (Path("/dev/null"), "a character device")):
        with pytest.raises(CapacityError) as refused:
            load_record(path)
        assert str(refused.value) == f"{path}: not a record file ({kind}, not a regular file)"
    with pytest.raises(CapacityError, match=r"absent\.json: not a record file \(no such file\)$"):
        load_record(tmp_path / "absent.json")


def test_capacity_record_naming_a_folder_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, in_project: Path
) -> None:
    named = str(in_project.relative_to(PROJECT_DIR))
    line = plan_refusal(capsys, tmp_path / "plan", "targetRps=300", f"capacityRecord={named}")
    assert line.endswith("not a record file (a directory, not a regular file)"), line


@pytest.fixture()
def records_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    records = tmp_path / "records"
    shutil.copytree(RECORDS_DIR, records)
    monkeypatch.setattr(sizing, "RECORDS_DIR", records)
    return records


def test_an_editor_lock_link_and_stray_files_are_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, records_copy: Path
) -> None:
    (records_copy / ".#x.json").symlink_to("someone@host.1234:1700000000")  # Emacs' lock: a dangling link
    (records_copy / f".{ORIGINAL}.swp").write_text("\0")
    (records_copy / "notes.json").write_text("not json")
    assert len(load_records(records_copy)) == len(load_records(RECORDS_DIR))
    assert plan_command.main(["--stack", "staging", "--out", str(tmp_path / "plan"), "--set", "targetRps=500"]) == 0
    assert "GPU minimum 3 nodes" in capsys.readouterr().out


def test_a_malformed_file_with_a_record_name_still_fails_the_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, records_copy: Path
) -> None:
    broken = records_copy / "nvidia-l4__original__25.06-py3__slo-100ms.json"
    broken.write_text("{")
    line = plan_refusal(capsys, tmp_path / "plan", "targetRps=500")
    assert line.startswith(f"error: capacity record {broken}: not valid JSON"), line
