"""Second-pass tester findings on capacity records, compare and the capacity table (issue 15).

Each test failed before its fix: compare dropped one of two image tags of one SLO (a 60 % drop read "ok"), paired a
p99 / 20 % record with a p95 / 1 % baseline, capacityRecord accepted a '..' that came back into the project, and a
hidden editor lock link in capacity/records/ failed every plan. (The operator-mode table, which showed an HPA's range
for fixed replicas, went with operator mode: settings/monitoring.py refuses it for this stack.)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import triton_gke.settings.capacity as sizing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_capacity_sizing import _capacity_rows, plan_refusal, write_record
from triton_gke.capacity.compare import main as compare_main
from triton_gke.capacity.records import (
    RECORDS_DIR,
    CapacityError,
    CapacityRecord,
    load_record,
    load_records,
    write_records,
)
from triton_gke.offline import plan as plan_command
from triton_gke.offline.runtime import PROJECT_DIR

T4 = "nvidia-tesla-t4"
BASE = CapacityRecord(
    gpu=T4, variant="original", image_tag="25.06-py3", slo_latency_ms=100.0, slo_percentile=95.0,
    max_failure_percent=1.0, max_rps_per_gpu=250.0, batch=4.0, p50_ms=40.0, p95_ms=90.0, source="measured",
    method="make bench", measured_at="2026-11-30", revision=1, path=Path("unwritten.json"),
)  # fmt: skip
ORIGINAL = "nvidia-tesla-t4__original__tensorrtserver-19.05-py3-tutorial__slo-100ms.json"


def folder(path: Path, *records: CapacityRecord) -> Path:
    write_records(list(records), path)
    return path


def compare(capsys: pytest.CaptureFixture[str], old: Path, new: Path) -> tuple[int, list[str], str]:
    code = compare_main([str(old), str(new)])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# ---------------------------------------------------------------- 1. compare by the full key, never drop a record


def test_two_image_tags_of_one_slo_are_both_compared(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The tester's case: the new folder holds the same image (unchanged) and a newer one 60 % slower."""
    base = folder(tmp_path / "base", BASE)
    new = folder(
        tmp_path / "new", BASE, dataclasses.replace(BASE, image_tag="25.10-py3", max_rps_per_gpu=100.0)
    )  # the same measured_at: the old code kept one of them, by file name
    code, out, err = compare(capsys, base, new)
    assert code == 1 and err == ""
    rows = [line for line in out if line.startswith(f"{T4}  original")]
    assert len(rows) == 2
    assert any("-60.0%" in row and "image 25.06-py3 -> 25.10-py3" in row and "REGRESSION" in row for row in rows)
    assert any("+0.0%" in row and "image 25.06-py3" in row for row in rows)
    assert out[-1] == f"regression: 1 of 2 rates dropped by more than 10 % ({T4}/original image 25.10-py3)"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rates=st.lists(st.integers(min_value=1, max_value=2000), min_size=1, max_size=4),
    old_rate=st.integers(min_value=1, max_value=2000),
    same_tag_first=st.booleans(),
)
def test_every_new_image_tag_gets_its_own_row(
    capsys: pytest.CaptureFixture[str], rates: list[int], old_rate: int, same_tag_first: bool
) -> None:
    """One baseline record, several image tags on the new side: each is compared; exit 1 iff any fell > 10 %."""
    with tempfile.TemporaryDirectory() as tmp:
        base = folder(Path(tmp) / "base", dataclasses.replace(BASE, max_rps_per_gpu=float(old_rate)))
        tags = [f"{i + (0 if same_tag_first else 1)}.0{i}-py3" for i in range(len(rates))]
        if same_tag_first:
            tags[0] = BASE.image_tag
        news = [
            dataclasses.replace(BASE, image_tag=t, max_rps_per_gpu=float(r)) for t, r in zip(tags, rates, strict=True)
        ]
        code, out, err = compare(capsys, base, folder(Path(tmp) / "new", *news))
    rows = [line for line in out if line.startswith(T4)]
    assert err == "" and len(rows) == len(rates)
    for tag, rate in zip(tags, rates, strict=True):
        change = f"{100 * (rate - old_rate) / old_rate:+.1f}%"
        assert any(change in row and (row.endswith(f"-> {tag}") or row.endswith(f"image {tag}")) for row in rows)
    assert "only in" not in "\n".join(rows)  # the baseline record was compared, not left over
    assert code == (1 if any(100 * (old_rate - r) / old_rate > 10 for r in rates) else 0)


def test_a_folder_with_one_key_in_two_files_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = folder(tmp_path / "base", BASE)
    twin = tmp_path / "base" / "nvidia-tesla-t4__original__25.06-py3__slo-100ms-2.json"
    twin.write_text(dataclasses.replace(BASE, max_rps_per_gpu=1.0).to_json())
    code, out, err = compare(capsys, base, base)
    assert code == 2 and out == [] and len(err.splitlines()) == 1
    assert "slo-100ms.json: holds the same gpu, variant, image_tag and slo_latency_ms as" in err


# ---------------------------------------------------------------- 2. only the same percentile and failure budget


@pytest.mark.parametrize(
    ("changes", "shown"),
    [({"slo_percentile": 99.0}, "p99<=100ms,fail<=1%"), ({"max_failure_percent": 20.0}, "p95<=100ms,fail<=20%")],
)
def test_a_record_of_another_percentile_or_budget_is_never_paired(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, changes: dict[str, float], shown: str
) -> None:
    base = folder(tmp_path / "base", BASE)
    other = dataclasses.replace(BASE, max_rps_per_gpu=400.0, **changes)  # type: ignore[arg-type]
    code, out, err = compare(capsys, base, folder(tmp_path / "new", other))
    assert code == 2 and out == [] and "share no (gpu, variant, SLO latency) at the same SLO percentile" in err
    with_partner = folder(tmp_path / "both", other, dataclasses.replace(BASE, image_tag="25.10-py3"))
    code, out, _ = compare(capsys, base, with_partner)
    assert code == 0 and out[-1] == "ok: none of 1 rates dropped by more than 10 %"
    [unpaired] = [line for line in out if shown in line]
    assert unpaired.split()[3:6] == ["-", "400.0", "-"]
    assert "only in the new records (the baseline has p95<=100ms,fail<=1% here: not comparable)" in unpaired
    [baseline_row] = [line for line in out if "p95<=100ms,fail<=1%" in line.split()[2]]
    assert "+0.0%" in baseline_row  # the matching record is paired, the other listed apart


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
