"""bench tune --search screen: closed-loop perf_analyzer measurements and the queue model's prediction of the
open-loop capacity from them (Screener). Split from tune.py.

Where the served model's batch timings are known (a GPU twin's configuration states its curve; a running server's
statistics hold at least two executed batch sizes: bench/metrics/batch_queue.py), the prediction is the dynamic
batcher's (batch_queue.capacity on the curve, less the measured time per request beyond it): the screen sees what
batching gains. Where they are not (the CPU twin, where a batch gains nothing: queue_model.py), it is M/D/c's, as
before. A running server (--url) whose batch timings are unknown is refused in one line (screen_curve): M/D/c there
would rank batching off, the largest capacity loss a GPU has."""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench.runners import runner
from triton_gke.bench.runners.remote import Remote, RemoteError
from triton_gke.bench.tuners.tune_candidates import Candidate
from triton_gke.bench.tuners.tune_measure import candidate_server
from triton_gke.bench.tuners.tune_options import MAX_CANDIDATES

if TYPE_CHECKING:
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings


SCREEN_FIRST = 3  # closed-loop measurements per candidate in the screen's first rung: 3 against 3 can pass ALPHA
SCREEN_WINDOW_S = 1.0  # perf_analyzer's windows in the screen: ~17 answers each at the twin's 59 ms per request


@dataclass
class Screener:
    """measure(candidate, effort) for --search screen: on a fresh server of the candidate, one discarded warm-up, then
    `effort` closed-loop measurements by perf_analyzer (a tool we did not write) at a concurrency of the candidate's
    instance count (each instance busy, none waiting). Each gives the time per request by Little's law (concurrency /
    inferences per second) and from it the highest Poisson rate whose p95 meets the SLO by M/D/c
    (bench/metrics/queue_model.py): the open-loop capacity a queue alone predicts, in ~20 s a configuration, not a rate
    search's minutes. loop-check measured that a closed-loop throughput itself does not rank configurations for an
    open-loop SLO, and that this model of it does follow the measured p95 (queue_model.py)."""

    settings: StackSettings
    variant: VariantSettings
    base: Path
    workdir: Path
    log: runner.Log
    binary: Path
    copy: VariantSettings | None = None
    remote: Remote | None = None
    curve: dict[int, float] | None = None  # the served model's batch timings, ms (screen_curve); None: M/D/c
    rows: dict[Candidate, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    started: float = dataclasses.field(default_factory=time.monotonic)

    def __call__(self, candidate: Candidate, effort: int) -> list[float]:
        from triton_gke.bench.runners import perf_analyzer
        from triton_gke.sandbox.triton import TritonStartError

        repo = self.workdir / "candidate"
        model, serve = candidate_server(candidate, self.variant, self.base, repo, self.copy, self.remote)
        slo = float(self.settings.monitoring.slo.latency_ms)
        level = perf_analyzer.Load(concurrency=candidate.instance_count)
        found: list[float] = []
        try:
            with serve(model.name) as endpoint:
                url, csv = endpoint.address(candidate.protocol), self.workdir / "screen.csv"
                ready = f", ready in {endpoint.ready_s:.1f} s" if endpoint.ready_s is not None else ""
                self.log(f"{candidate.label()}: {effort} closed-loop measurement(s){ready}")
                measure = lambda: perf_analyzer.run(  # noqa: E731
                    self.binary, model.name, url, candidate.protocol, level, csv, SCREEN_WINDOW_S
                )
                measure()  # warm-up, discarded: a fresh server's first requests are slower
                for _ in range(effort):
                    result = measure()
                    row = screen_row(result.rps, result.p95_ms, candidate.instance_count, slo, candidate, self.curve)
                    self.rows.setdefault(candidate, []).append(row)
                    found.append(row["predicted_rps"])
                    self.log(
                        f"  [{candidate.label()}] {level.describe()}: {result.rps:.1f} infer/s, p95 "
                        f"{result.p95_ms:.0f} ms: {row['service_ms'] or 'no answer, no'} ms per request, "
                        f"{row['model']} p95 <= {slo:g} ms up to {row['predicted_rps']:g} req/s | "
                        f"elapsed {runner.clock(self.elapsed())}"
                    )
        except (perf_analyzer.PerfAnalyzerError, TritonStartError, RemoteError, runner.BenchError) as err:
            self.log(f"  not measured: {str(err).splitlines()[0] if str(err) else err!r}")
        finally:
            shutil.rmtree(repo, ignore_errors=True)
        return found

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def merged(self, candidate: Candidate) -> runner.VariantRun | None:
        """No open-loop run to record: a screen's figures are predictions (its records come from `make bench`)."""
        return None


def screen_row(
    infer_per_s: float,
    p95_ms: float,
    instances: int,
    slo_ms: float,
    candidate: Candidate | None = None,
    curve: dict[int, float] | None = None,
) -> dict[str, Any]:
    """One closed-loop measurement at a concurrency of `instances` and its prediction: the time per request by
    Little's law (in flight / throughput) and the highest Poisson rate whose p95 meets slo_ms (0 when the
    server answered nothing: no time per request to model): by the dynamic batcher on the curve when one is known
    (batch_queue; the SLO less the measured cost beyond the curve), else by M/D/c (queue_model)."""
    from triton_gke.bench.metrics import batch_queue, queue_model

    service_ms = 1000.0 * instances / infer_per_s if 0 < infer_per_s < math.inf else math.inf
    measured = 0 < service_ms < math.inf
    if curve is not None and candidate is not None:
        model = "batcher"
        settings = batch_queue.Batching(
            candidate.max_batch_size, (candidate.preferred_batch_size,), candidate.max_queue_delay_us / 1000.0,
            candidate.instance_count,
        )  # fmt: skip
        # What the measurement shows beyond the curve is latency outside the GPU: the SLO left for the batcher.
        extra = batch_queue.overhead_ms(curve, service_ms, instances) if measured else 0.0
        predicted = batch_queue.capacity(curve, settings, slo_ms - extra) if measured and extra < slo_ms else 0.0
    else:
        model = f"M/D/{instances}"
        predicted = queue_model.capacity(service_ms, instances, slo_ms) if measured else 0.0
    return {
        "model": model,
        "concurrency": instances,
        "infer_per_s": round(infer_per_s, 2),
        "p95_ms": round(p95_ms, 1),
        "service_ms": round(service_ms, 2) if math.isfinite(service_ms) else None,
        "predicted_rps": round(predicted, 2),
    }


def screen_count(grid: int, max_count: int | None, budget_s: float, visit_s: float) -> int:
    """How many configurations a screen visits: as many visits as long as the default's as the budget holds, at
    least the default and one other, at most the grid and --max-candidates."""
    return min(grid, max_count or MAX_CANDIDATES, max(2, math.floor(budget_s / max(visit_s, 1.0))))


def screen_curve(config: dict[str, Any], stats: dict[str, Any] | None, url: str) -> dict[int, float]:
    """The batch timings the screen predicts a running server's batching from: the configuration's own curve (a GPU
    twin), else the statistics' executed batch sizes (batch_queue.curve_from_stats). Neither: refused in one line,
    since a prediction from batch 1 alone would rank batching off on a GPU."""
    from triton_gke.bench.metrics import batch_queue

    curve = batch_queue.curve_from_config(config) or (batch_queue.curve_from_stats(stats) if stats else None)
    if curve is None:
        raise runner.BenchError(
            f"--search screen --url {url}: the screen cannot predict what batching gains on this server: its model "
            "states no service curve and its statistics (GET /v2/models/NAME/stats, batch_stats) hold fewer than two "
            "executed batch sizes; use --search open-loop, or send it batched load first"
        )
    return curve
