"""bench/tuners/loop_check.py: its options, refused in one line, and the CPU shares it reports (the run itself: the
committed bench/results/loop-check-dev-2026-12-03/, made with perf_analyzer against a real tritonserver)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_gke.bench.runners.runner import BenchError
from triton_gke.bench.tuners import loop_check


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
    assert sample.server_s >= sample.own_s > 0 and sample.machine_busy_s > 0


def test_bad_input_exits_2_in_one_line_before_anything_starts(tmp_path: Path, capsys) -> None:
    (tmp_path / "x").write_text("held")
    assert loop_check.main(["--out", str(tmp_path), "--rates", "5"]) == 2  # a folder holding other files
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and err.count("\n") == 1
    assert loop_check.main(["--concurrency", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert loop_check.main(["--intra-op-threads", "0"]) == 2
    assert capsys.readouterr().err == "error: --intra-op-threads 0: expected 1 to 64\n"
