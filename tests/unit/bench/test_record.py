"""bench.reports.record in-process: which summaries give a record, revisions, and a device or FIFO as results.json."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.bench.test_report import RUN_JSON, _folder
from triton_gke.bench.plans.results import MAX_RESULTS_BYTES
from triton_gke.bench.reports import record, report
from triton_gke.capacity.records import TWIN_GPU, CapacityError, load_records, record_file_name


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
    """As bench.reports.record reads it: /dev/zero would fill memory, a FIFO would wait for a writer forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "a character device"), (fifo, "a FIFO")):
        with pytest.raises(report.ReportError, match=f"not a regular file|{kind}"):
            report.read_run(path)
    big = tmp_path / "results.json"
    big.write_bytes(b" " * (MAX_RESULTS_BYTES + 1))
    with pytest.raises(report.ReportError, match="more than 33,554,432 bytes"):
        report.read_run(big)


# ---------------------------------------------------------------- the record guard (issue 24)
NOISY = ["other processes used 50 % of the machine (limit 25 %)", "CPU steal 6.0 % (limit 5 %)"]


def _noisy(run: dict[str, Any]) -> dict[str, Any]:
    found = {"cores": 2, "baseline_before": 120.0, "baseline_after": 119.0, "others_pct": 50.0,
             "load_average": 2.4, "own_cores": 1.1, "steal_pct": 6.0, "noisy": NOISY}  # fmt: skip
    return {**run, "machine": {**run["machine"], "conditions": found}}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert record.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_a_lower_figure_replaces_a_record_only_with_accept_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records_dir = tmp_path / "records"
    first = _folder(tmp_path / "a", json.dumps(_summary(max_rps=30.0)))
    assert record.main([str(first), "--record", "--records-dir", str(records_dir)]) == 0
    (kept,) = load_records(records_dir)
    lower = _folder(tmp_path / "b", json.dumps(_summary(max_rps=20.0)))
    line = _refused([str(lower), "--record", "--records-dir", str(records_dir)], capsys)
    assert line == (f"error: original: {kept.path} holds 30.0 req/s per GPU; this run measured 20.0 (-33.3 %); "
                    "--accept-regression replaces it with the lower figure")  # fmt: skip
    assert load_records(records_dir) == [kept] and not (lower / "records").exists()  # nothing written anywhere
    assert record.main([str(lower), "--record", "--records-dir", str(records_dir), "--accept-regression"]) == 0
    (replaced,) = load_records(records_dir)
    assert (replaced.max_rps_per_gpu, replaced.revision, replaced.path) == (20.0, 2, kept.path)


@settings(max_examples=25, deadline=None)
@given(old=st.floats(0.5, 1e4), new=st.floats(0.5, 1e4))
def test_only_a_lower_figure_is_a_regression(old: float, new: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        records_dir, out = Path(tmp) / "records", Path(tmp) / "out"
        record.write_run_records(_summary(max_rps=old), None, out, record=True, records_dir=records_dir)
        try:
            record.write_run_records(_summary(max_rps=new), None, out, record=True, records_dir=records_dir)
        except CapacityError as err:
            assert new < old and f"this run measured {new:.1f}" in str(err) and "--accept-regression" in str(err)
        else:
            assert new >= old
        (stored,) = load_records(records_dir)
        assert stored.max_rps_per_gpu == max(old, new) if new != old else stored.max_rps_per_gpu == old


def test_a_noisy_run_writes_records_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Marked by bench/metrics/conditions.py: refused even where no record exists yet; its records carry the reasons."""
    records_dir = tmp_path / "records"
    noisy = _folder(tmp_path / "a", json.dumps(_noisy(_summary(max_rps=30.0))))
    line = _refused([str(noisy), "--record", "--records-dir", str(records_dir)], capsys)
    target = records_dir / record_file_name(TWIN_GPU, "original", "24.10-py3", RUN_JSON["settings"]["slo_ms"])
    assert line == (f"error: original: this run is marked noisy ({'; '.join(NOISY)}); it would write {target} "
                    "(30.0 req/s per GPU); rerun on a quiet machine, or --force writes it")  # fmt: skip
    assert not target.exists() and not (noisy / "records").exists()
    assert record.main([str(noisy), "--record", "--records-dir", str(records_dir), "--force"]) == 0
    (stored,) = load_records(records_dir)
    assert stored.path == target and stored.noisy == "; ".join(NOISY)
    assert (stored.baseline_before, stored.baseline_after, stored.load_average, stored.cpu_steal_percent) == (
        120.0, 119.0, 2.4, 6.0)  # fmt: skip
    assert load_records(noisy / "records") == [dataclasses.replace(stored, path=noisy / "records" / target.name)]


def test_a_lower_figure_from_a_noisy_run_needs_both_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records_dir = tmp_path / "records"
    assert record.main([str(_folder(tmp_path / "a", json.dumps(_summary(max_rps=30.0)))), "--record",
                        "--records-dir", str(records_dir)]) == 0  # fmt: skip
    lower = str(_folder(tmp_path / "b", json.dumps(_noisy(_summary(max_rps=5.7)))))
    argv = [lower, "--record", "--records-dir", str(records_dir)]
    assert "--force writes it" in _refused(argv, capsys)
    assert "this run measured 5.7 (-81.0 %); --accept-regression" in _refused([*argv, "--force"], capsys)
    assert "--force writes it" in _refused([*argv, "--accept-regression"], capsys)
    assert record.main([*argv, "--force", "--accept-regression"]) == 0
    (stored,) = load_records(records_dir)
    assert (stored.max_rps_per_gpu, stored.revision, stored.noisy) == (5.7, 2, "; ".join(NOISY))


def test_a_quiet_run_records_its_conditions_and_no_mark(tmp_path: Path) -> None:
    quiet = _noisy(RUN_JSON)
    quiet["machine"]["conditions"] |= {"noisy": [], "steal_pct": 0.1}
    _, written, _ = record.write_run_records(quiet, None, tmp_path, record=True, records_dir=tmp_path / "records")
    (stored,) = written
    assert stored.noisy is None and stored.cpu_steal_percent == 0.1 and "noisy" not in stored.to_dict()
    broken = _noisy(RUN_JSON)
    broken["machine"]["conditions"]["noisy"] = "busy"
    with pytest.raises(CapacityError, match=r"machine\.conditions: noisy: expected a list of reasons"):
        record.write_run_records(broken, None, tmp_path, record=False)


@given(force=st.booleans(), accept=st.booleans(), command=st.sampled_from(["bench", "record"]))
@settings(max_examples=12, deadline=None)
def test_the_guard_options_without_record_are_one_line(force: bool, accept: bool, command: str) -> None:
    from triton_gke.bench.__main__ import parser

    argv = ["--force"] * force + ["--accept-regression"] * accept
    args = (parser() if command == "bench" else record.parser()).parse_args(argv + (["x"] * (command == "record")))
    if not (force or accept):
        record.check_guard_options(args.record, args.force, args.accept_regression)
        return
    with pytest.raises(CapacityError) as refused:
        record.check_guard_options(args.record, args.force, args.accept_regression)
    first = "--force" if force else "--accept-regression"
    assert str(refused.value) == f"{first}: only with --record (it says which records --record may replace)"
    record.check_guard_options(True, args.force, args.accept_regression)  # with --record: fine
