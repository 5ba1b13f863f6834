"""`triton-gke bench record` as a process: bad inputs are one line, exit 2, and nothing is rewritten."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.unit.bench.test_record import _summary
from tests.unit.bench.test_report import RUN_JSON, _folder
from triton_gke.capacity.records import load_records


# ---------------------------------------------------------------- bench.reports.record
def _record(argv: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.bench.reports.record", *argv]
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


def test_an_older_run_does_not_replace_a_newer_record_without_force(tmp_path: Path) -> None:
    records_dir = tmp_path / "records"
    newer = _folder(tmp_path / "a", json.dumps(_summary(max_rps=30.0)))
    assert _record([str(newer), "--record", "--records-dir", str(records_dir)]).returncode == 0
    older_run = _summary(max_rps=35.0) | {"started": "2026-11-01T09:00:00+00:00"}  # higher: only its date counts
    older = _folder(tmp_path / "b", json.dumps(older_run))
    line = _one_line(_record([str(older), "--record", "--records-dir", str(records_dir)]))
    assert "(measured 2026-11-30) is newer than this run (measured 2026-11-01); --force replaces it" in line
    (kept,) = load_records(records_dir)
    assert (kept.max_rps_per_gpu, kept.revision) == (30.0, 1) and not (older / "records").exists()
    forced = _record([str(older), "--record", "--records-dir", str(records_dir), "--force"])
    assert forced.returncode == 0, forced.stderr
    (replaced,) = load_records(records_dir)
    assert (replaced.max_rps_per_gpu, replaced.revision) == (35.0, 2)
