"""bench.runners.perf_analyzer: its command line, the rate range it searches and its CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.bench.test_slo_search import SLO, simulate
from triton_gke.bench.plans.load_plan import LoadPlan
from triton_gke.bench.plans.slo_search import (
    RateLadder,
    rate_search,
)
from triton_gke.bench.runners import perf_analyzer, runner


def test_perf_analyzer_csv_is_parsed_into_milliseconds(tmp_path: Path) -> None:
    path = tmp_path / "pa.csv"
    path.write_text(  # recorded from perf_analyzer 2.51 against the `original` CPU twin
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
        "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "2,4.06626,660,2479,19862,334,455155,414,0,488542,535830,543987,573098\n"
    )
    found = perf_analyzer.parse_csv(path, perf_analyzer.Load(concurrency=2))
    assert (found.load.describe(), found.rps) == ("concurrency 2", 4.06626)
    assert found.p95_ms == pytest.approx(543.987) and found.server_queue_ms == pytest.approx(19.862)
    closed = perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", found.load, path, 50)
    assert closed[1:7] == ["-m", "original", "-u", "127.0.0.1:8000", "-i", "http"]
    assert "--concurrency-range=2" in closed and "--measurement-interval=3000" in closed
    rate = perf_analyzer.Load(request_rate=2.5)
    assert rate.describe() == "2.5 requests/s (Poisson)"
    opened = perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", rate, path, 100)
    assert "--request-rate-range=2.5" in opened and "--request-distribution=poisson" in opened
    assert "--measurement-request-count=20" in opened  # windows of 20 answers at 2.5 requests/s (count_windows)
    assert "--async" not in opened  # perf_analyzer's default rate mode: at most --max-threads in flight
    independent = perf_analyzer.Load(request_rate=2.5, asynchronous=True)
    assert "--async" in perf_analyzer.command(Path("pa"), "original", "127.0.0.1:8000", "http", independent, path, 100)
    assert independent.describe() == "2.5 requests/s (Poisson, async)"
    with pytest.raises(ValueError, match="either"):
        perf_analyzer.Load()


def test_perf_analyzer_searches_up_to_what_the_server_delivers_closed_loop(tmp_path: Path) -> None:
    plan = LoadPlan(RateLadder(2, 1.5, 0.05, 500, 0.4), 32, 6.0, 2.0, 4.0, SLO)
    config = runner.BenchConfig("dev", "sandbox", plan, repeats=1)
    rates = runner.pa_range(config, saturation_rps=40.0)
    assert (rates.low, rates.high, rates.step) == (2.0, 60.0, pytest.approx(1.0))
    assert runner.pa_range(config, None).high == 500.0 and runner.pa_range(config, 0.5).high == 4.0
    args = perf_analyzer.search_command(Path("pa"), "original", "127.0.0.1:8000", "http", rates, 100, 20, tmp_path)
    assert {"--async", "--binary-search", "--request-distribution=poisson", "--latency-threshold=100"} <= set(args)
    assert "--request-rate-range=2:60:1" in args and "--percentile=95" in args
    csv_path = tmp_path / "pa.csv"  # recorded from perf_analyzer 2.51's binary search on the slow twin (150 ms)
    csv_path.write_text(
        "Request Rate,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
        "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "4,3.27739,239,2204,5603,65,44274,157,0,47458,58275,94933,108353\n"
        "17.125,15.2725,243,1480,30925,63,41965,172,0,65710,123325,143373,187673\n"
        "14.5,12.6095,265,1673,22473,63,42494,160,0,54130,106518,125075,183198\n"
    )
    found = perf_analyzer.parse_search_csv(csv_path, rates, 150)
    assert (found.max_rate, found.rps, found.p95_ms, found.levels) == (17.125, 15.2725, pytest.approx(143.373), 3)
    assert perf_analyzer.parse_search_csv(csv_path, rates, 130).max_rate == 14.5  # checked again, not trusted
    assert perf_analyzer.parse_search_csv(tmp_path / "none.csv", rates, 150).max_rate is None
    results = [rate_search(simulate(c, plan.ladder), SLO) for c in (10, 30, 20)]
    assert runner.median_repeat(results) == 2
