"""bench/tuners/loop_check.py: its options, refused in one line, and the CPU shares it reports (the run itself: the
committed results/bench/loop-check-dev-2026-12-03/, made with perf_analyzer against a real tritonserver)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.bench.runners.runner import BenchError, Model
from triton_gke.bench.tuners import loop_check
from triton_gke.model_repo.settings import REFERENCE_VARIANTS


def test_levels_rates_and_batch_are_read() -> None:
    assert loop_check.parse_concurrency("1:4") == [1, 2, 3, 4]
    assert loop_check.parse_concurrency("1,2,8") == [1, 2, 8]
    assert loop_check.parse_rates("3,6.5") == [3.0, 6.5]
    assert loop_check.parse_batch("4/8") == (4, 8)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (loop_check.parse_concurrency, "0:4"),
        (loop_check.parse_concurrency, "1:99"),
        (loop_check.parse_concurrency, "a"),
        (loop_check.parse_rates, "nan"),
        (loop_check.parse_rates, "0"),
        (loop_check.parse_rates, ""),
        (loop_check.parse_batch, "8/4"),
        (loop_check.parse_batch, "1"),
    ],
)
def test_bad_options_are_refused_in_one_line(parse, text: str) -> None:
    with pytest.raises(BenchError) as caught:
        parse(text)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--")


def test_the_cpu_shares_split_the_machines_busy_time() -> None:
    before = loop_check.CpuSample(at=0.0, server_s=1.0, own_s=0.5, machine_busy_s=10.0)
    after = loop_check.CpuSample(at=10.0, server_s=6.0, own_s=1.5, machine_busy_s=28.0)
    shares = loop_check.cpu_shares(before, after, client_s=2.0)
    assert shares == {
        "wall_s": 10.0,
        "client_cores": 0.2,
        "server_cores": 0.5,
        "others_cores": 1.0,  # 1.8 busy - 0.5 server - 0.2 client - 0.1 this process
        "machine_busy_cores": 1.8,
    }


def test_a_sample_of_this_process_counts_its_own_cpu() -> None:
    import os

    sample = loop_check.cpu_sample(os.getpid())
    # The "server" read counts this process and its children (a worker may hold servers other tests started), read
    # first: own_s, read moments later, may be a tick or two above it (a plain >= was flaky), never much more.
    assert sample.server_s > 0 and sample.own_s > 0 and sample.machine_busy_s > 0
    assert sample.server_s >= sample.own_s - 0.5


def test_bad_input_exits_2_in_one_line_before_anything_starts(tmp_path: Path, capsys) -> None:
    (tmp_path / "x").write_text("held")
    assert loop_check.main(["--out", str(tmp_path), "--rates", "5"]) == 2  # a folder holding other files
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and err.count("\n") == 1
    assert loop_check.main(["--concurrency", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert loop_check.main(["--intra-op-threads", "0"]) == 2
    assert capsys.readouterr().err == "error: --intra-op-threads 0: expected 1 to 64\n"


# --- the Locust levels --------------------------------------------------------------------------------------------
@given(st.integers(-5, 700), st.integers(-5, 1100))
def test_locust_levels_are_bounded_and_refused_in_one_line(seconds: int, users: int) -> None:
    if 0 <= seconds <= 600 and 1 <= users <= 1000:
        levels = loop_check.locust_levels([2.0, 4.0], seconds, users)
        assert levels == ([] if seconds == 0 else [loop_check.LocustLevel(r, users, seconds) for r in (2.0, 4.0)])
        return
    with pytest.raises(BenchError) as caught:
        loop_check.locust_levels([2.0], seconds, users)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("--locust-seconds" if not 0 <= seconds <= 600 else "--locust-u")


def test_a_locust_level_runs_the_projects_locustfile_at_its_rate_from_a_clean_environment(monkeypatch) -> None:
    monkeypatch.setenv("rate", "99")  # an ambient locust-config key must not reach the load test
    monkeypatch.setenv("arrival", "constant")
    level = loop_check.LocustLevel(4.0, 32, 30)
    command = level.command(Path("/tmp/out/locust-4"))
    assert command[command.index("-f") + 1].endswith("loadtest/locustfile.py")
    assert command[command.index("-u") + 1] == "32" and command[command.index("-t") + 1] == "30s"
    assert command[command.index("--json-file") + 1] == "/tmp/out/locust-4"
    model = Model(REFERENCE_VARIANTS[0], None, "input", "probabilities", 4 * 224 * 224 * 3)
    env = level.environment(model, "127.0.0.1:8000")
    assert (env["rate"], env["arrival"], env["saddr"], env["model"]) == ("4.0", "poisson", "127.0.0.1:8000", "original")
    assert env["payload"] == "fp32" and env["metrics_port"] == "0"


def test_server_times_give_the_mean_queue_and_compute_of_the_requests_served_between() -> None:
    before = loop_check.ServerTimes(requests=10, queue_ns=5_000_000, compute_ns=100_000_000)
    after = loop_check.ServerTimes(requests=30, queue_ns=45_000_000, compute_ns=800_000_000)
    assert after.since(before) == {"server_requests": 20, "server_queue_ms": 2.0, "server_compute_ms": 35.0}
    assert before.since(before) == {"server_requests": 0, "server_queue_ms": None, "server_compute_ms": None}


def test_a_locust_row_reads_in_the_table_beside_perf_analyzers() -> None:
    level = loop_check.LocustLevel(8.0, 32, 30)
    results = {"requests": 240, "failures": 0, "rps": 8.0, "p50_ms": 40.0, "p95_ms": None, "average_ms": 42.0}
    server = {"server_requests": 240, "server_queue_ms": 1.5, "server_compute_ms": 38.0}
    shares = {"wall_s": 31.0, "client_cores": 0.1, "server_cores": 0.6, "others_cores": 0.0, "machine_busy_cores": 0.7}
    row = {**loop_check.locust_row(level, results, shares, server), "phase": "open"}
    assert row["tool"] == "locust" and row["requests"] == row["server_requests"] == 240
    line = loop_check.table({"rows": [row]}).splitlines()[-1]
    # No closed loop at concurrency 1 in this report: no service time, so no M/D/1 figure.
    expected = (
        "| open | 8 requests/s (Poisson, Locust, 32 users) | 8.0 | 40 | n/a | 1.5 | 38 |  |  | 0.1 | 0.6 | 0.0 | 0.7 |"
    )
    assert line == expected
    closed = {**row, "phase": "closed", "loop": "closed", "concurrency": 1, "load": "concurrency 1", "little_ms": 60.0}
    lines = loop_check.table({"rows": [closed, row]}).splitlines()
    assert lines[-1].split(" | ")[8] == "{:.0f} / {:.1f}".format(*loop_check.single_queue(60.0, 8.0))


def test_a_locust_level_with_failures_says_so_and_counts_only_the_answered() -> None:
    level = loop_check.LocustLevel(8.0, 32, 30)
    results = {"requests": 240, "failures": 60, "rps": 8.0, "p50_ms": 40.0, "p95_ms": 90.0, "average_ms": 42.0}
    server = {"server_requests": 180, "server_queue_ms": 1.5, "server_compute_ms": 38.0}
    shares = {"wall_s": 31.0, "client_cores": 0.1, "server_cores": 0.6, "others_cores": 0.0, "machine_busy_cores": 0.7}
    row = loop_check.locust_row(level, results, shares, server)
    assert row["infer_per_s"] == 6.0 and row["load"].endswith("; 60 of 240 FAILED"), row


def test_statistics_the_server_does_not_answer_are_a_failed_measurement_in_one_line() -> None:
    from triton_gke.bench.runners import perf_analyzer
    from triton_gke.sandbox.processes import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(perf_analyzer.PerfAnalyzerError) as caught:
        loop_check.server_times(address, "original")
    assert str(caught.value).startswith(f"Triton's statistics of original at {address}: ")
    assert "\n" not in str(caught.value)
