"""capacity.from_bench: the records a benchmark run gives, one per variant."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.unit.capacity.test_records import T4
from triton_gke.capacity.from_bench import Measured, records_from_results
from triton_gke.contracts.paths import BENCH_RESULTS

RESULTS = PROJECT_DIR / BENCH_RESULTS


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A command as a user runs it, from the project root."""
    env = {k: v for k, v in os.environ.items() if k not in ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(argv, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------- records from a benchmark run
def _results(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name / "results.json").read_text())


def test_a_committed_run_gives_one_record_per_variant_with_its_figures() -> None:
    run = _results("dev-2026-11-30-alone")
    made, skipped = records_from_results(run, Measured("cpu-twin", "24.10-py3"), Path("results.json"))
    assert skipped == []
    (original,) = made
    summary = run["summaries"][0]
    assert original.max_rps_per_gpu == summary["max_rps"] == pytest.approx(27.1035)
    assert (original.batch, original.p50_ms, original.p95_ms) == (
        summary["batch"],
        summary["p50_ms"],
        summary["p95_ms"],
    )
    assert (original.slo_latency_ms, original.max_failure_percent, original.measured_at) == (100.0, 1.0, "2026-11-30")
    assert "2/2 repeat(s) found a rate, range 26.8-27.4 req/s (spread 2.5 %)" in original.method
    assert "perf_analyzer's own search 31.3 req/s" in original.method and "poisson arrivals" in original.method
    assert "\n" not in original.method


def test_a_server_of_two_gpus_counts_half_per_gpu_and_unfound_variants_get_no_record() -> None:
    run = _results("dev-2026-11-30")
    made, _ = records_from_results(run, Measured(T4, "25.06-py3", gpus_per_server=1), Path("r.json"))
    halved, _ = records_from_results(run, Measured(T4, "25.06-py3", gpus_per_server=2), Path("r.json"))
    assert [h.max_rps_per_gpu for h in halved] == pytest.approx([m.max_rps_per_gpu / 2 for m in made])
    run["summaries"][0]["max_rps"] = None
    fewer, skipped = records_from_results(run, Measured(T4, "25.06-py3"), Path("r.json"))
    assert len(fewer) == len(made) - 1 and skipped == [f"{run['summaries'][0]['variant']}: no capacity record: "
                                                       "no request rate met the SLO"]  # fmt: skip
