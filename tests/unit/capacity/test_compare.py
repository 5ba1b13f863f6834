"""`make capacity-compare` on a folder reads only the files named as records (issue 14 follow-up).

An independent tester compared capacity/records with a benchmark's --out folder and got "results.json: 105622 bytes;
a record file is at most 65536": that file is the run's results, not a record.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_gke.capacity.compare import RECORD_NAME, main
from triton_gke.capacity.records import RECORDS_DIR, record_file_name


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
