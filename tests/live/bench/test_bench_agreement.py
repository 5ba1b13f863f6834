"""The benchmark's capacity search agrees with NVIDIA's perf_analyzer on a server of known service time.

Both tools search the same real tritonserver for the highest open-loop request rate (Poisson
arrivals) whose p95 meets the same objective: Locust through the project's locustfile and
bench/runners/locust_steps.py, perf_analyzer with its own binary search (--request-rate-range with
--binary-search and --latency-threshold,
https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/perf_analyzer/docs/cli.html).
The model sleeps SERVICE_MS per request, one request at a time (tests/support/bench_fixtures.py): the
capacity is set by that sleep, not by the busy cores, so the answers must agree within TOLERANCE.

Two things make the comparison fair rather than lucky:
- Rates the server really saw. perf_analyzer's async rate mode delivers less than it requests
  (here ~80 %: asked for 17.6 requests/s it served 14.4, and Triton's own queue time, 28 ms, is an
  M/D/1 queue's at 14.4, not at 17.6; its scheduling lag is discussed in
  https://github.com/triton-inference-server/server/issues/4711). So perf_analyzer's answer is
  the Inferences/Second it measured at its highest passing level; Locust delivers what it offers.
- The same evidence per decision. A p95 of 60 requests is its 3rd-slowest one: with 4 s steps a
  CI run passed a rate whose steady-state p95 is ~40 % over the objective. perf_analyzer decides a
  level on the p95 of its last 3 windows merged (inference_profiler.cc MergePerfStatusReports
  concatenates their latencies, https://github.com/triton-inference-server/perf_analyzer), here 3 x
  PA_WINDOW_REQUESTS; each Locust step holds as many (LOCUST_STEP_REQUESTS). With a third of them,
  Locust's answer alone spread +-13 % over four runs while perf_analyzer's did not move.

The two searches run at the same time, each against a server of its own (two tritonservers from one repository):
the capacity is set by the model's sleep, not by the cores, so neither slows the other, and the test takes the
longer search's time (about 5 minutes) instead of the sum of both (10-11 minutes, one after the other).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from triton_gke.bench.plans.load_plan import LoadPlan
from triton_gke.bench.plans.slo_search import RateLadder, SloCriteria, rate_search
from triton_gke.bench.runners import perf_analyzer, runner
from triton_gke.model_repo.settings import REFERENCE_VARIANTS
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.bench_fixtures",)

SLO_MS = 150.0  # ~3.5 service times of 40 ms: the knee of an M/D/1 queue (p95 150 ms near 14 requests/s)
PA_WINDOW_REQUESTS = 150  # per perf_analyzer window (--measurement-request-count)
LOCUST_STEP_REQUESTS = 3 * PA_WINDOW_REQUESTS  # per Locust step: what perf_analyzer's p95 is taken over
# Measured, not wished. Steps of 150 requests: Locust / perf_analyzer 1.02, 1.05, 0.95, 0.81 (Locust 13.4-17.3).
# Steps of 450 (now): 0.95, 0.84, 0.88 (Locust 15.8, 13.9, 14.6; perf_analyzer served 16.58 every time). Queueing
# theory sides with Locust: an M/D/1 queue (Poisson arrivals, the twin's 41 ms) meets p95 <= 150 ms up to ~14.2
# requests/s (p95 192 ms at 16.58). perf_analyzer's --async arrivals reach the server smoother than Poisson: Triton's
# own queue time at 16.58 requests/s was 32.7 ms where M/D/1 gives 43.5 (Wq = rho D / 2(1 - rho)), so its answer
# runs ~12 % high and a 15 % bound fails one run in three on that bias. A search blind to the queue would say ~25.
TOLERANCE = 0.25


def test_locust_search_agrees_with_perf_analyzer(
    slow_triton: TritonServer, slow_repository: Path, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    name, service_ms = slow_model
    capacity = 1000 / service_ms  # requests/s one instance can serve at all
    criteria = SloCriteria(slo_ms=SLO_MS, max_failure_ratio=0.01, stop_after=2, min_requests=LOCUST_STEP_REQUESTS)
    ladder = RateLadder(start=0.4 * capacity, growth=1.5, precision=0.05, max_rate=2 * capacity, floor=1.0)
    # Steps of 15 s or until they hold LOCUST_STEP_REQUESTS (45 s at the first rate, at most 60 s).
    plan = LoadPlan(ladder, 16, 15.0, 2.0, 2.0, criteria, saturation_users=())
    model = runner.Model(dataclasses.replace(REFERENCE_VARIANTS[0], name=name), None, "input", "probabilities", 0)
    endpoint = runner.Endpoint(slow_triton.http_url, slow_triton.grpc_url, slow_triton.metrics_url, None, None)
    # perf_analyzer's binary search starts at the range's low end and stops if that fails: starting it where the
    # ladder starts (0.4 x capacity) found no rate at all on a machine kept busy by the CPU hog (Locust, free to step
    # down, found 9.8/s), so it may reach down as the ladder does; a binary search pays about one probe for it.
    rates = perf_analyzer.RateRange(0.2 * capacity, capacity, 0.5)
    binary = perf_analyzer.ensure_binary()

    def perf_analyzer_search(server: TritonServer) -> perf_analyzer.SearchResult:
        return perf_analyzer.search(
            binary, name, server.http_url, "http", rates, SLO_MS, PA_WINDOW_REQUESTS, tmp_path / "pa.csv"
        )

    with TritonServer(slow_repository, ready_timeout_s=120) as own_server, ThreadPoolExecutor(1) as pool:
        theirs_pending = pool.submit(perf_analyzer_search, own_server)
        curve = runner.run_locust(plan, model, endpoint, "http", tmp_path)
        found = theirs_pending.result()
    ours = runner.capacity(rate_search(runner.search_steps(curve), criteria))
    theirs = found.rps

    steps = [(round(r["offered_rps"], 2), round(r["rps"], 2), round(r["p95_ms"] or 0)) for r in curve]
    assert ours is not None and theirs is not None, (steps, found)
    assert 0.3 * capacity < ours < capacity, steps  # a queue, not a wall: below what the sleep allows
    assert abs(ours / theirs - 1) <= TOLERANCE, (ours, found, steps)
    asked = found.max_rate
    print(f"Locust {ours:.2f} vs perf_analyzer {theirs:.2f} (asked {asked:.2f}) requests/s at p95 <= {SLO_MS:g} ms")
