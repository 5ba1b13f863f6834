"""bench loop-check's Locust level against a real tritonserver and real Locust (issue 35): Locust's own count of the
requests it sent agrees with Triton's count of those it served, Triton's own compute time is the twin's sleep, and the
load tool's CPU is measured. Counts and a sleep's floor, no rate or latency budget: it runs beside other tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from triton_gke.bench.runners.runner import Model
from triton_gke.bench.tuners import loop_check
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.bench_fixtures",)

SECONDS = 6
RATE = 8.0  # requests/s against a capacity of 25 (the twin sleeps 40 ms, one instance)


def test_a_locust_level_counts_what_triton_served_and_its_own_cpu(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    name, service_ms = slow_model
    model = Model(dataclasses.replace(REFERENCE_VARIANTS[0], name=name), None, "input", "probabilities", 602112)
    level = loop_check.LocustLevel(RATE, 8, SECONDS)
    row = loop_check.measure_locust_level(level, model, slow_triton.http_url, tmp_path, slow_triton.pid)
    assert row["tool"] == "locust" and row["failures"] == 0 and row["requests"] > RATE * SECONDS / 3, row
    # Triton's statistics count what it served; a request in flight when Locust stopped may be counted by one side.
    assert abs(row["requests"] - row["server_requests"]) <= 2, row
    assert row["server_compute_ms"] >= service_ms * 0.9 and row["p50_ms"] >= service_ms, row
    assert row["client_cores"] > 0 and row["wall_s"] >= SECONDS, row
