"""capacity.compare: a folder is read only by the files named as records, and every image tag and SLO is paired
right.

An independent tester compared capacity/records with a benchmark's --out folder and got "results.json: 105622
bytes; a record file is at most 65536": that file is the run's results, not a record. Compare also dropped one
of two image tags of one SLO (a 60 % drop read "ok") and paired a p99 / 20 % record with a p95 / 1 % baseline."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.capacity.compare import RECORD_NAME, main
from triton_gke.capacity.compare import main as compare_main
from triton_gke.capacity.records import (
    RECORDS_DIR,
    CapacityRecord,
    record_file_name,
    write_records,
)


def test_a_bench_results_folder_has_no_capacity_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "dev-run"
    results.mkdir()
    (results / "results.json").write_text(json.dumps({"rows": ["x" * 100] * 1100}))  # > 64 KiB, as the tester's
    (results / "summary.csv").write_text("variant,rps\n")

    code = main([str(RECORDS_DIR), str(results)])

    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.splitlines() == [
        f"error: no capacity records in {results} (record files are named GPU__VARIANT__TAG__slo-Nms.json)"
    ]


def test_other_files_beside_the_records_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "records"
    shutil.copytree(RECORDS_DIR, folder)
    (folder / "results.json").write_text("[" * 70_000)  # neither JSON nor a record: never read

    code = main([str(RECORDS_DIR), str(folder)])

    captured = capsys.readouterr()
    assert code == 0 and captured.err == "" and "results.json" not in captured.out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gpu=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    variant=st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
    tag=st.text(min_size=1, max_size=30),
    slo=st.floats(min_value=0.5, max_value=1e5, allow_nan=False),
)
def test_every_name_a_record_is_written_under_is_read_as_a_record(gpu: str, variant: str, tag: str, slo: float) -> None:
    name = record_file_name(gpu, variant, tag, slo)
    assert RECORD_NAME.fullmatch(name)
    assert RECORD_NAME.fullmatch(name.removesuffix(".json") + "-2.json")  # a second tag with the same file name
    assert not RECORD_NAME.fullmatch(name.removesuffix(".json") + ".csv")


T4 = "nvidia-tesla-t4"


BASE = CapacityRecord(
    gpu=T4, variant="original", image_tag="25.06-py3", slo_latency_ms=100.0, slo_percentile=95.0,
    max_failure_percent=1.0, max_rps_per_gpu=250.0, batch=4.0, p50_ms=40.0, p95_ms=90.0, source="measured",
    method="make bench", measured_at="2026-11-30", revision=1, path=Path("unwritten.json"),
)  # fmt: skip


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
