"""What a benchmark run produces: one row per measured step, one summary per variant, the run around them.

Plain dataclasses, written to CSV and JSON by bench.reports.report and read back by load_run(), so a
report can be re-rendered from results.json without measuring again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any

from triton_gke.bench.metrics import registry
from triton_gke.bench.plans.slo_search import Step
from triton_gke.bounded_files import UnreadableFileError, one_line, parse_json, read_text_file


def _metric_fields() -> list[tuple[str, str]]:
    """One field per registered metric (bench/metrics/registry/), in its order: the columns of results.csv and
    summary.csv and the keys of results.json between the fields around them."""
    return [(m.name, "float | None") for m in registry.METRICS]


def _as_step(self: Any) -> Step:
    return Step(
        self.users, self.rps, self.p50_ms, self.p95_ms, self.requests, self.failures, self.offered_rps, self.warmup
    )


# One step of one repeat of one variant (results.csv). Built with make_dataclass so that the metric fields come from
# the registry; the types are strings, as `from __future__ import annotations` gives the other dataclasses here.
StepRow = make_dataclass(
    "StepRow",
    [
        ("variant", "str"),
        ("repeat", "int"),
        ("step", "int"),  # 0 is the warm-up
        ("users", "int"),
        ("offered_rps", "float | None"),
        ("warmup", "bool"),
        ("duration_s", "float"),
        ("requests", "int"),
        ("failures", "int"),
        ("rps", "float"),  # successful responses per second
        ("p50_ms", "float | None"),
        ("p95_ms", "float | None"),
        ("mean_ms", "float | None"),
        *_metric_fields(),  # each over the step's window (bench/metrics/registry/)
        ("verdict", "str"),  # slo_search verdict
        ("chosen", "bool"),  # the step the SLO search picked for this repeat
        ("errors", "str", field(default="")),  # the most frequent failure messages
        # warm-up | search (open loop at offered_rps) | saturation (closed loop, `users` users)
        ("phase", "str", field(default="search")),
        # p95 of arrival-to-send: waiting for a free user (in the latencies)
        ("wait_p95_ms", "float | None", field(default=None)),
    ],
    frozen=True,
    namespace={"as_step": _as_step, "__module__": __name__},  # pickling and repr find it here
)
StepRow.__doc__ = "One step of one repeat of one variant (results.csv)."


@dataclass(frozen=True)
class PerfAnalyzerOpinion:
    """perf_analyzer's answer, and the Locust search's to compare with.

    From its own open-loop search (max_rate set): the highest request rate whose p95 met the SLO.
    From one fixed load (older runs): its throughput there."""

    load: str  # what perf_analyzer offered, in words ("" when it did not run)
    concurrency: int | None  # when it offered a concurrency
    rps: float | None  # inferences/s it measured (at max_rate, for a search)
    p50_ms: float | None
    p95_ms: float | None
    locust_rps: float | None  # the Locust answer it is compared with (None: no comparison)
    locust_p95_ms: float | None
    note: str = ""  # why there is no figure or no comparison
    max_rate: float | None = None  # its search's answer, requests/s

    @property
    def ratio(self) -> float | None:
        """Locust's answer / perf_analyzer's: 1.0 when both tools found the same capacity.

        perf_analyzer's is the throughput it measured (inferences/s), not the rate it asked for: in
        --async rate mode it delivered 82-92 % of the asked rate on the slow twin, while Locust delivers
        what it offers (tests/live/bench/test_bench_agreement.py compares the two the same way)."""
        theirs = self.rps if self.rps is not None else self.max_rate
        return self.locust_rps / theirs if self.locust_rps and theirs else None

    @property
    def p95_ratio(self) -> float | None:
        """Locust p95 / perf_analyzer p95 at the same load: 1.0 when both saw the same latency."""
        return self.locust_p95_ms / self.p95_ms if self.locust_p95_ms and self.p95_ms else None


# One variant over all repeats (summary.csv); its metric fields are the medians (each metric's `summarise`) over the
# chosen steps.
VariantSummary = make_dataclass(
    "VariantSummary",
    [
        ("variant", "str"),
        ("precision", "str"),
        ("input_dtype", "str"),
        ("max_batch_size", "int"),
        ("preferred_batch_size", "int"),
        ("max_queue_delay_us", "int"),
        ("instance_count", "int"),
        ("bytes_per_request", "int"),  # input tensor bytes of one image
        ("repeats", "int"),
        ("found", "int"),  # repeats in which some step met the SLO
        ("max_rps", "float | None"),  # median over repeats of the highest request rate (open loop) that met the SLO
        ("max_rps_low", "float | None"),
        ("max_rps_high", "float | None"),
        ("spread_pct", "float | None"),  # (high - low) / median
        ("users", "float | None"),  # median user count of the chosen steps
        ("offered_rps", "float | None"),
        ("p50_ms", "float | None"),  # medians over the chosen steps
        ("p95_ms", "float | None"),
        *_metric_fields(),
        ("peak_rps", "float | None"),  # highest RPS of any step, SLO or not: the saturation throughput
        ("pa_concurrency", "int | None"),  # perf_analyzer's concurrency, when it offered one (see pa_load)
        ("pa_rps", "float | None"),
        ("pa_p95_ms", "float | None"),
        ("pa_ratio", "float | None"),  # Locust RPS / perf_analyzer RPS at the same load
        ("pa_note", "str"),
        ("raw_batch", "int | None"),  # batch size of the raw ONNX Runtime measurement
        ("raw_rps", "float | None"),
        ("served_raw", "float | None"),  # max_rps / raw_rps
        ("server_ready_s", "float | None"),  # restart to READY
        ("pa_load", "str", field(default="")),  # what perf_analyzer offered, in words
        ("pa_p95_ratio", "float | None", field(default=None)),  # Locust p95 / perf_analyzer p95 at the same load
        # perf_analyzer's own search: highest request rate meeting the SLO
        ("pa_max_rps", "float | None", field(default=None)),
        # closed loop, best user count: the most the server delivered
        ("saturation_rps", "float | None", field(default=None)),
        ("saturation_users", "int | None", field(default=None)),
        ("saturation_batch", "float | None", field(default=None)),
    ],
    frozen=True,
    namespace={"__module__": __name__},
)
VariantSummary.__doc__ = "One variant over all repeats (summary.csv)."


@dataclass
class BenchRun:
    """Everything a run measured and the conditions it ran under."""

    command: str
    stack: str
    target: str
    started: str  # ISO time
    wall_s: float
    settings: dict[str, Any]  # SLO, plan, protocol...
    machine: dict[str, Any]  # facts, load average at start and end
    steps: list[StepRow] = field(default_factory=list)
    summaries: list[VariantSummary] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    pricing: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str) + "\n"


def payload_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """(variant, its payload copy) among `names`, as bench.runners.runner.payload_copies names them."""
    present = set(names)
    return [
        (base, name)
        for name in names
        for suffix in ("_uint8", "_fp32")
        if name.endswith(suffix) and (base := name.removesuffix(suffix)) in present
    ]


# The most a results.json may hold: a run of every variant is ~100 KB; bench.reports.record and bench.reports.report
# read no more.
MAX_RESULTS_BYTES = 32 * 1024 * 1024


def load_run(path: Path) -> BenchRun:
    """Read a results.json back (for re-rendering a report), through the one bounded reader (a regular UTF-8 file of at
    most MAX_RESULTS_BYTES, JSON of bounded depth without NaN or Infinity). A file that is not one is an
    UnreadableFileError (a ValueError) of one line naming it; bench.reports.report's read_run checks every key's
    type."""
    text = read_text_file(Path(path), MAX_RESULTS_BYTES, "a bench results.json")
    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise UnreadableFileError(f"{one_line(path)}: expected a JSON object, not a bench results.json")
    try:
        data["steps"] = [StepRow(**row) for row in data["steps"]]
        data["summaries"] = [VariantSummary(**row) for row in data["summaries"]]
        known = {f.name for f in fields(BenchRun)}
        return BenchRun(**{k: v for k, v in data.items() if k in known})
    except (KeyError, TypeError) as err:
        problem = one_line(str(err).splitlines()[0] if str(err) else type(err).__name__)[:200]
        raise UnreadableFileError(f"{one_line(path)}: not a bench results.json ({problem})") from None
