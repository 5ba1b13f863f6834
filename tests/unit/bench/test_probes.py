"""bench.metrics.probes: the server's counters turned into batch size and CPU per window."""

from __future__ import annotations

import pytest

from triton_gke.bench.metrics.probes import Sample, window_stats


def test_window_stats_turn_counters_into_batch_size_and_cpu() -> None:
    def sample(t: float, cpu: float, busy: float, n: float, executions: float) -> Sample:
        # n requests of one image, each 50 ms in the server (10 ms queued); 200 jiffies of machine time per second
        return Sample(t, cpu, busy, t * 200, n, executions, n, n * 5e4, n * 1e4, None)

    samples = [sample(0, 0, 0, 0, 0), sample(1, 0.5, 100, 10, 10), sample(5, 4.5, 500, 90, 30)]
    samples.append(sample(6, 5, 550, 95, 31))
    stats = window_stats(samples, 1.2, 4.8)  # widened to the samples around the window: t=1..5
    assert stats.batch == pytest.approx(80 / 20)
    assert stats.machine_cpu_pct == pytest.approx(100 * 400 / 800)
    assert stats.server_ms == pytest.approx(50) and stats.queue_ms == pytest.approx(10)
    assert stats.gpu_pct is None
    assert window_stats(samples[:1], 0, 1).batch is None
