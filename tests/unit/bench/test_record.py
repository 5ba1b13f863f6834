"""bench.record in-process: which summaries give a record, revisions, and a device or FIFO as results.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from triton_gke.bench import record, report
from triton_gke.bench.results import MAX_RESULTS_BYTES
from triton_gke.capacity.records import CapacityError

from tests.unit.bench.test_report import RUN_JSON, _folder


def _summary(**changes: Any) -> dict[str, Any]:
    return {**RUN_JSON, "summaries": [{**RUN_JSON["summaries"][0], **changes}]}


@settings(max_examples=30, deadline=None)
@given(over=st.floats(min_value=0.001, max_value=1e4))
def test_a_summary_over_its_slo_gets_no_record(over: float) -> None:
    slo = RUN_JSON["settings"]["slo_ms"]
    eligible, notes = record._eligible(_summary(p95_ms=slo + over), Path("r.json"))
    assert eligible == [] and notes == [f"original: no capacity record: its p95 {slo + over:g} ms is over the SLO "
                                        f"{slo:g} ms"]  # fmt: skip
    kept, none = record._eligible(_summary(p95_ms=slo - min(over, slo / 2)), Path("r.json"))
    assert len(kept) == 1 and none == []


def test_a_summary_without_a_found_rate_gets_no_record() -> None:
    eligible, notes = record._eligible(_summary(found=0), Path("r.json"))
    assert eligible == [] and notes == ["original: no capacity record: no repeat found a rate (found 0)"]


def test_the_same_figures_keep_their_revision_in_process(tmp_path: Path) -> None:
    out = _folder(tmp_path, json.dumps(RUN_JSON))
    records_dir = tmp_path / "records"
    _, first, _ = record.write_run_records(RUN_JSON, None, out, record=True, records_dir=records_dir)
    in_out, updated, notes = record.write_run_records(RUN_JSON, None, out, record=True, records_dir=records_dir)
    assert updated == [] and [r.revision for r in in_out] == [1] and [r.revision for r in first] == [1]
    assert notes == [f"original: unchanged: {first[0].path} holds the same figures (revision 1)"]
    with pytest.raises(CapacityError, match="summaries: empty"):
        record.write_run_records(RUN_JSON | {"summaries": []}, None, out, record=False, records_dir=records_dir)


def test_a_device_or_fifo_as_results_json_is_refused_without_reading_it(tmp_path: Path) -> None:
    """As bench.record reads it: /dev/zero would fill memory, a FIFO would wait for a writer forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "a character device"), (fifo, "a FIFO")):
        with pytest.raises(report.ReportError, match=f"not a regular file|{kind}"):
            report.read_run(path)
    big = tmp_path / "results.json"
    big.write_bytes(b" " * (MAX_RESULTS_BYTES + 1))
    with pytest.raises(report.ReportError, match="more than 33554432 bytes"):
        report.read_run(big)
