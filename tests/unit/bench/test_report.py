"""Bad inputs to `triton-gke bench report` and `triton-gke bench record` (issue 13 follow-up, the tester's findings).

Each refusal is one line, exit 2, and leaves every file as it was: report reads results.json strictly before it
renders, and renders into a temporary folder moved into place at the end; record checks its folders and the records
it would replace before it writes. The run folders are copies of the committed runs in bench/results/.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_gke.bench import record, report
from triton_gke.bench.results import MAX_RESULTS_BYTES, StepRow, VariantSummary
from triton_gke.capacity.records import CapacityError, load_records

RUN = PROJECT_DIR / "bench" / "results" / "dev-2026-11-30-alone"
RUN_JSON = json.loads((RUN / "results.json").read_text())


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _folder(tmp: Path, data: Any) -> Path:
    """A run folder of the committed run's files with `data` as its results.json."""
    out = tmp / "run"
    shutil.copytree(RUN, out)
    (out / "results.json").write_text(data if isinstance(data, str) else json.dumps(data))
    return out


def _report_refuses(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert report.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err and captured.out == ""
    assert captured.err.startswith("error: triton-gke bench report: ")
    return captured.err


# ---------------------------------------------------------------- bench.report


@pytest.mark.parametrize("path", sorted((PROJECT_DIR / "bench" / "results").glob("*/results.json")), ids=str)
def test_every_committed_results_json_reads_back_strictly(path: Path) -> None:
    run = report.read_run(path)
    assert json.loads(run.to_json()) == json.loads(path.read_text())


def test_a_missing_folder_or_a_file_is_refused(tmp_path: Path, capsys) -> None:
    assert "no such folder" in _report_refuses([str(tmp_path / "nope")], capsys)
    (tmp_path / "file").write_text("x")
    assert "not a folder" in _report_refuses([str(tmp_path / "file")], capsys)
    assert "results.json: no such file" in _report_refuses([str(tmp_path)], capsys)


def test_help_is_help_not_a_folder(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        report.main(["--help"])
    assert done.value.code == 0 and "results" in capsys.readouterr().out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.one_of(
        st.sampled_from(["", "[]", "{}", "null", "42", '"run"', '{"command": ', "NaN"]),
        st.text(max_size=40),
        st.dictionaries(st.sampled_from(["command", "stack", "steps", "x"]), st.integers(), max_size=3).map(json.dumps),
    )
)
def test_corrupt_or_incomplete_results_json_is_refused_and_nothing_is_rewritten(
    text: str, tmp_path_factory, capsys
) -> None:
    out = _folder(tmp_path_factory.mktemp("corrupt"), text)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"{out / 'results.json'}: " in err
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


_WHERE = st.sampled_from(["top", "steps", "summaries"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_WHERE, key=st.text(min_size=1, max_size=12))
def test_an_unknown_key_is_named(where: str, key: str, tmp_path_factory, capsys) -> None:
    data = copy.deepcopy(RUN_JSON)
    target = data if where == "top" else data[where][0]
    if key in target:
        return
    target[key] = 1
    out = _folder(tmp_path_factory.mktemp("unknown"), data)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"unknown key {key!r}"[:60].splitlines()[0] in err and _snapshot(out) == before


_WRONG = st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2), st.booleans(), st.just({"a": 1}))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["summaries", "steps"]), data=st.data())
def test_a_value_of_the_wrong_type_is_named(which: str, data: st.DataObject, tmp_path_factory, capsys) -> None:
    kind = VariantSummary if which == "summaries" else StepRow
    field = data.draw(st.sampled_from([f for f in kind.__dataclass_fields__.values() if str(f.type) != "str"]))
    value = data.draw(_WRONG.filter(lambda v: not (str(field.type) == "bool" and isinstance(v, bool))))
    changed = copy.deepcopy(RUN_JSON)
    changed[which][0][field.name] = value
    out = _folder(tmp_path_factory.mktemp("types"), changed)
    before = _snapshot(out)
    err = _report_refuses([str(out)], capsys)
    assert f"{which}[0].{field.name}: expected " in err and _snapshot(out) == before


def test_a_good_run_is_rerendered_with_the_same_tables(tmp_path: Path, capsys) -> None:
    out = _folder(tmp_path, json.dumps(RUN_JSON))
    assert report.main([str(out)]) == 0
    assert {"README.md", "summary.csv", "results.csv", "cost.csv", "results.json"} <= set(_snapshot(out))
    assert (out / "summary.csv").read_text() == (RUN / "summary.csv").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".report-")]  # the staging folder is gone


# ---------------------------------------------------------------- bench.record


def _record(argv: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.bench.record", *argv]
    return subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    return line


def test_record_into_an_unwritable_records_dir_writes_nothing(tmp_path: Path) -> None:
    out = _folder(tmp_path, json.dumps(RUN_JSON))
    line = _one_line(_record([str(out), "--record", "--records-dir", "/proc/x"]))
    assert line.startswith("error: --records-dir /proc/x: cannot write there")
    assert not (out / "records").exists()


@pytest.mark.parametrize("stack", ["nope", "../../etc/passwd"])
def test_record_of_a_stack_run_with_an_unknown_stack_is_one_line(stack: str, tmp_path: Path) -> None:
    run = RUN_JSON | {"target": "stack", "stack": stack, "command": "triton-gke bench --saddr 127.0.0.1:8000"}
    out = _folder(tmp_path, json.dumps(run))
    line = _one_line(_record([str(out)]))
    assert line.startswith(f"error: {out / 'results.json'}: stack {stack!r}: ")
    assert not (out / "records").exists()


def test_record_of_empty_summaries_is_one_line(tmp_path: Path) -> None:
    out = _folder(tmp_path, json.dumps(RUN_JSON | {"summaries": []}))
    line = _one_line(_record([str(out)]))
    assert line == f"error: {out / 'results.json'}: summaries: empty: the run measured no variant"


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


def test_an_older_run_does_not_replace_a_newer_record_without_force(tmp_path: Path) -> None:
    records_dir = tmp_path / "records"
    newer = _folder(tmp_path / "a", json.dumps(_summary(max_rps=30.0)))
    assert _record([str(newer), "--record", "--records-dir", str(records_dir)]).returncode == 0
    older_run = _summary(max_rps=20.0) | {"started": "2026-11-01T09:00:00+00:00"}
    older = _folder(tmp_path / "b", json.dumps(older_run))
    line = _one_line(_record([str(older), "--record", "--records-dir", str(records_dir)]))
    assert "(measured 2026-11-30) is newer than this run (measured 2026-11-01); --force replaces it" in line
    (kept,) = load_records(records_dir)
    assert (kept.max_rps_per_gpu, kept.revision) == (30.0, 1) and not (older / "records").exists()
    forced = _record([str(older), "--record", "--records-dir", str(records_dir), "--force"])
    assert forced.returncode == 0, forced.stderr
    (replaced,) = load_records(records_dir)
    assert (replaced.max_rps_per_gpu, replaced.revision) == (20.0, 2)


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
