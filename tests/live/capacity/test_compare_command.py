"""`triton-gke capacity compare` and `make capacity-compare` as processes: exit 1 on a regression, 2 on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.live.bench.test_bench_records import one_line_error
from tests.unit.capacity.test_from_bench import run
from tests.unit.capacity.test_records import T4, VALID, _as_text, record
from triton_gke.capacity.records import (
    CapacityRecord,
    record_file_name,
    write_records,
)


def test_compare_keeps_a_path_with_a_line_break_on_one_line(tmp_path: Path) -> None:
    base = _folder(tmp_path / "base", record())
    done = compare(str(base), "cmp/new\nerror: fake")
    assert done.returncode == 2 and "cmp/new\\nerror: fake: no such record file or folder" in one_line_error(done)


# ---------------------------------------------------------------- the compare command
def _folder(path: Path, *contents: CapacityRecord) -> Path:
    write_records(list(contents), path)
    return path


def compare(*argv: str) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "triton_gke.capacity", "compare", *argv)


def test_compare_passes_an_unchanged_and_a_small_drop_and_fails_a_large_one(tmp_path: Path) -> None:
    base = _folder(tmp_path / "base", record(), record(variant="trt_int8", max_rps_per_gpu=1000.0))
    same = compare(str(base), str(base))
    assert same.returncode == 0 and "ok: none of 2 rates dropped by more than 10 %" in same.stdout, same.stderr
    small = _folder(tmp_path / "small", record(max_rps_per_gpu=230.0), record(variant="trt_int8", max_rps_per_gpu=1e3))
    assert compare(str(base), str(small)).returncode == 0  # -8 %
    assert compare(str(base), str(small), "--max-regression-percent", "5").returncode == 1
    large = _folder(tmp_path / "large", record(max_rps_per_gpu=200.0, image_tag="25.10-py3"))
    failed = compare(str(base), str(large))
    assert failed.returncode == 1, failed.stderr
    row = next(line for line in failed.stdout.splitlines() if line.startswith(f"{T4}  original"))
    assert row.split()[3:6] == ["250.0", "200.0", "-20.0%"]
    assert "REGRESSION beyond 10 %" in row and "image 25.06-py3 -> 25.10-py3" in row
    assert "only in the baseline" in failed.stdout  # trt_int8 was not measured again: listed, never failing
    assert failed.stdout.splitlines()[-1] == f"regression: 1 of 1 rates dropped by more than 10 % ({T4}/original)"
    faster = compare(str(large), str(base / record_file_name(T4, "original", "25.06-py3", 100.0)))
    assert faster.returncode == 0 and "+25.0%" in faster.stdout  # a single file on one side


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["{base}", "{absent}"], "no such record file or folder"),
        (["{base}", "{empty}"], "no capacity records in"),
        (["{base}", "{broken}"], "broken.json: max_rps_per_gpu: 0 is not positive"),
        (["{base}", "{other}"], "share no (gpu, variant, SLO latency)"),
        (["{base}", "{base}", "--max-regression-percent", "nan"], "--max-regression-percent nan"),
        (["{base}", "{base}", "--max-regression-percent", "100"], "--max-regression-percent 100"),
        (["{base}", "{base}", "--max-regression-percent", "ten"], "invalid float value: 'ten'"),
        (["{base}"], "the following arguments are required: new"),
    ],
)
def test_compare_refuses_bad_input_in_one_line_with_exit_2(tmp_path: Path, argv: list[str], expected: str) -> None:
    places = {
        "base": _folder(tmp_path / "base", record()),
        "absent": tmp_path / "absent",
        "empty": tmp_path / "empty",
        "other": _folder(tmp_path / "other", record(gpu="nvidia-l4")),
        "broken": tmp_path / "broken.json",
    }
    places["empty"].mkdir()
    places["broken"].write_text(_as_text(VALID | {"max_rps_per_gpu": 0}))
    done = compare(*(a.format(**{k: str(v) for k, v in places.items()}) for a in argv))
    assert done.returncode == 2 and expected in one_line_error(done) and done.stdout == ""


def test_capacity_without_a_command_is_one_line() -> None:
    done = run(sys.executable, "-m", "triton_gke.capacity", "comapre")
    assert done.returncode == 2 and "'comapre' is not a command; commands: compare" in one_line_error(done)


def test_make_capacity_compare_passes_args_through(tmp_path: Path) -> None:
    base = _folder(tmp_path / "with space", record())
    done = run("make", "--no-print-directory", "capacity-compare", f"ARGS='{base}' '{base}'")
    assert done.returncode == 0 and "ok: none of 1 rates" in done.stdout, done.stderr
    failed = run("make", "--no-print-directory", "capacity-compare", f"ARGS='{base}' {tmp_path / 'nothing'}")
    assert failed.returncode == 2 and "no such record file or folder" in failed.stderr
