"""One short real benchmark run: a real tritonserver and real Locust, then the report."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from triton_gke.bench.__main__ import main
from triton_gke.bench.plans.results import load_run


def test_smoke_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One variant: warm-up, a two-rate search (two steps a rate), two closed-loop levels: real tritonserver, real
    Locust, report; a progress line per step, the baseline before and after, the achieved rate as the figure."""
    out = tmp_path / "out"
    args = ["--variants", "original", "--uint8", "--repeats", "1", "--start-rps", "2", "--max-rps", "4",
            "--growth", "2", "--max-users", "4", "--saturation-users", "1,2", "--step-seconds", "2",
            "--settle-seconds", "1", "--warmup-seconds", "1", "--min-requests", "4", "--slo-ms", "10000",
            "--raw-seconds", "1", "--no-perf-analyzer"]  # fmt: skip
    args += ["--build-dir", str(tmp_path / "build"), "--out", str(out)]
    assert main(args) == 0
    run = load_run(out / "results.json")
    # Each rate is decided by two steps that agree (two passes or two fails, issue 46: no retry bias either way).
    assert [(r.phase, r.offered_rps, r.users) for r in run.steps] == [
        ("warm-up", 2.0, 4), ("search", 2.0, 4), ("search", 2.0, 4), ("search", 4.0, 4), ("search", 4.0, 4),
        ("saturation", None, 1), ("saturation", None, 2)
    ]  # fmt: skip
    assert all(r.requests >= 4 and r.failures == 0 and r.batch and r.server_cpu_pct for r in run.steps[1:])
    (summary,) = run.summaries
    (chosen,) = [r for r in run.steps if r.chosen]
    assert chosen.offered_rps == 4.0 and summary.offered_rps == 4.0  # the highest passing rate offered...
    assert summary.variant == "original" and summary.found == 1 and summary.max_rps == chosen.rps  # ...its achieved
    assert summary.saturation_rps and summary.saturation_users in (1, 2) and summary.pa_note.startswith("skipped")
    assert summary.raw_rps and summary.served_raw == pytest.approx(summary.saturation_rps / summary.raw_rps)
    with (out / "summary.csv").open() as handle:
        assert float(next(csv.DictReader(handle))["max_rps"]) == round(chosen.rps, 4)  # the independent check's
    assert (out / "README.md").is_file()
    progress = [line for line in capsys.readouterr().err.splitlines() if " | elapsed " in line]
    assert [line.split(" step ")[1].split(":")[0] for line in progress] == [r.phase for r in run.steps]
    assert all(", p95 " in line and ", left ~" in line for line in progress), progress
    conditions = run.machine["conditions"]
    assert conditions["baseline_before"] > 0 and conditions["baseline_after"] > 0 and conditions["cores"] >= 1
    assert isinstance(conditions["noisy"], list) and conditions["steal_pct"] is not None
