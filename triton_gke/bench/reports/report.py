"""Write a benchmark run: results.csv, summary.csv, cost.csv, results.json, README.md and PNG plots.

triton-gke bench report results/bench/dev-2026-11-30   # re-render from its results.json

The files are rendered into a temporary folder inside the run's folder and moved into place only when all of them
are written (os.replace is atomic within a file system: https://docs.python.org/3/library/os.html#os.replace);
re-rendering reads results.json strictly first, so a bad one is one line, exit 2, and nothing is rewritten.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from triton_gke.bench.metrics import registry
from triton_gke.bench.metrics.cost import lb_usd_per_million
from triton_gke.bench.metrics.registry.base import Metric
from triton_gke.bench.plans.load_plan import SATURATION_GAIN, STRETCH
from triton_gke.bench.plans.results import MAX_RESULTS_BYTES, BenchRun, StepRow, VariantSummary, payload_pairs
from triton_gke.bench.plans.slo_search import RATE_RULE
from triton_gke.bench.reports import plots
from triton_gke.bounded_files import parse_json, read_text_file
from triton_gke.one_line import OneLineParser

CPU_CAVEAT = (
    "**CPU twins on {cores} CPU cores: these numbers show the mechanics (the SLO search, dynamic batching, "
    "queueing, payload size), NOT what a T4 does.** The twins run each variant's ONNX file with ONNX Runtime "
    "on CPU through Triton's python backend: there is no TensorRT here, so `original`, `trt_fp32` and "
    "`trt_fp16` run the very same FP32 file, and `trt_int8*` run the QDQ INT8 file on the CPU. "
    "The model is the built-in ResNet-50 with **random weights** (predictions are meaningless; speed is not)."
)


def write_all(run: BenchRun, out: Path) -> list[Path]:
    """Every output file of a run; returns their paths. Rendered into a temporary folder first: a failure
    leaves the files already in `out` as they were."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        written = [
            write_csv(staging / "results.csv", run.steps, StepRow),
            write_csv(staging / "summary.csv", run.summaries, VariantSummary),
            write_dicts(staging / "cost.csv", run.costs),
        ]
        (staging / "results.json").write_text(run.to_json(), encoding="utf-8")
        written.append(staging / "results.json")
        plots, note = write_plots(run, staging)
        written += plots
        (staging / "README.md").write_text(render_readme(run, [p.name for p in plots], note), encoding="utf-8")
        for path in [staging / "README.md", *written]:
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / "README.md", *(out / p.name for p in written)]


def write_csv(path: Path, rows: Sequence[Any], kind: type) -> Path:
    names = [f.name for f in dataclasses.fields(kind)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(v) for k, v in dataclasses.asdict(row).items()})
    return path


def write_dicts(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        if rows:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
    return path


def _cell(value: Any) -> Any:
    """Floats rounded for reading (4 significant decimals are far below the noise); None as empty."""
    if value is None:
        return ""
    return round(value, 4) if isinstance(value, float) else value


# ---------------------------------------------------------------- Markdown


def fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{suffix}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def lowest_step(steps: Sequence[StepRow], variant: str) -> tuple[float, float] | None:
    """(RPS, p95) at the lowest measured load, medians over the repeats: how close a variant that
    never met the SLO came to it."""
    firsts: dict[int, StepRow] = {}
    for row in steps:
        if row.variant == variant and row.phase == "search" and not row.warmup and row.p95_ms is not None:
            known = firsts.get(row.repeat)
            if known is None or (row.offered_rps or 0) < (known.offered_rps or 0):
                firsts[row.repeat] = row
    if not firsts:
        return None
    return statistics.median(r.rps for r in firsts.values()), statistics.median(r.p95_ms for r in firsts.values())


def _max_rps(s: VariantSummary, steps: Sequence[StepRow]) -> str:
    if s.max_rps is not None:
        offered = f" (offered {fmt(s.offered_rps)})" if s.offered_rps is not None else ""
        return f"**{fmt(s.max_rps)}**{offered}"
    lowest = lowest_step(steps, s.variant)
    at_lowest = f" (at the lowest load, {fmt(lowest[0])} RPS: p95 {fmt(lowest[1], 0)} ms)" if lowest else ""
    return "none met the SLO" + at_lowest


def metric_columns() -> list[tuple[str, Callable[[Any], str]]]:
    """The results table's metric columns, (header, cell of a summary), from the registry in each metric's order; a
    metric shown `inside` another is in brackets in that one's column: "in server ms (queue)", "57 (20)"."""
    columns = []
    for outer in sorted((m for m in registry.METRICS if m.inside is None), key=lambda m: m.order):
        shown = [outer, *sorted((m for m in registry.METRICS if m.inside == outer.name), key=lambda m: m.order)]
        header = outer.header + "".join(f" ({m.header})" for m in shown[1:])
        columns.append((header, functools.partial(_metric_cell, shown)))
    return columns


def _metric_cell(shown: Sequence[Metric], summary: Any) -> str:
    figures = [fmt(getattr(summary, m.name), m.digits) for m in shown]
    return figures[0] + "".join(f" ({figure})" for figure in figures[1:])


def results_table(summaries: Sequence[VariantSummary], steps: Sequence[StepRow] = ()) -> str:
    columns = metric_columns()
    header = [
        "variant",
        "max RPS at SLO (achieved)",
        "perf_analyzer max RPS",
        "p50 ms",
        "p95 ms",
        *(header for header, _ in columns),
        "spread (low-high)",
        "saturation RPS (users, batch)",
        "served/raw",
        "bytes/request",
    ]
    rows = [
        [
            f"`{s.variant}`",
            _max_rps(s, steps),
            _ratio(s),
            fmt(s.p50_ms, 0),
            fmt(s.p95_ms, 0),
            *(cell(s) for _, cell in columns),
            _spread(s),
            _saturation(s),
            fmt(s.served_raw, 2) + (f" (raw {fmt(s.raw_rps)} img/s at batch {s.raw_batch})" if s.raw_rps else ""),
            f"{s.bytes_per_request:,}",
        ]
        for s in summaries
    ]
    return table(header, rows)


def _spread(s: VariantSummary) -> str:
    if s.max_rps is None:
        return f"0 of {s.repeats} repeats met the SLO"
    found = f"; {s.found} of {s.repeats} repeats" if s.found < s.repeats else ""
    return f"{fmt(s.spread_pct, 0)} % ({fmt(s.max_rps_low)}-{fmt(s.max_rps_high)}{found})"


def _saturation(s: VariantSummary) -> str:
    if s.saturation_rps is None:
        return "n/a"
    return f"{fmt(s.saturation_rps)} ({s.saturation_users}, {fmt(s.saturation_batch, 2)})"


def _ratio(s: VariantSummary) -> str:
    if s.pa_max_rps is not None:
        ratio = f"; Locust / PA {s.pa_ratio:.2f}" if s.pa_ratio is not None else ""
        return f"{fmt(s.pa_rps)} served, {fmt(s.pa_max_rps)} asked (p95 {fmt(s.pa_p95_ms, 0)} ms{ratio})"
    if s.pa_load.startswith("binary search") or not s.pa_load:
        return f"n/a ({s.pa_note})" if s.pa_note else "n/a"
    load = s.pa_load or (f"concurrency {s.pa_concurrency}" if s.pa_concurrency else "")
    measured = f"PA {fmt(s.pa_rps)} RPS, p95 {fmt(s.pa_p95_ms, 0)} ms at {load}"
    if s.pa_ratio is not None:
        p95 = f", p95 {s.pa_p95_ratio:.2f}" if s.pa_p95_ratio is not None else ""
        return f"RPS {s.pa_ratio:.2f}{p95} ({measured})"
    if s.pa_rps is not None:
        return f"n/a ({s.pa_note}: {measured})"
    return f"n/a ({s.pa_note})" if s.pa_note else "n/a"


def payload_table(summaries: Sequence[VariantSummary], steps: Sequence[StepRow] = ()) -> str | None:
    """FP32 vs UINT8 side by side, for every variant benchmarked with both payloads."""
    pairs = _payload_pairs(summaries)
    if not pairs:
        return None
    cpu = registry.metric("server_cpu_pct")  # what the payload costs the server: this metric on purpose
    header = ["variant", "payload", "bytes/request", "max RPS at SLO", "p95 ms", cpu.header, "LB data $/1M"]
    rows = []
    for pair in pairs:
        for s in pair:
            rows.append(
                [
                    f"`{s.variant}`",
                    s.input_dtype,
                    f"{s.bytes_per_request:,}",
                    _max_rps(s, steps),
                    fmt(s.p95_ms, 0),
                    fmt(getattr(s, cpu.name), cpu.digits),
                    fmt(lb_usd_per_million(s.bytes_per_request), 2),
                ]
            )
        fp32, uint8 = pair
        if fp32.max_rps and uint8.max_rps:
            rows.append(
                [
                    "",
                    "UINT8 / FP32",
                    f"{uint8.bytes_per_request / fp32.bytes_per_request:.2f}x",
                    f"{uint8.max_rps / fp32.max_rps:.2f}x",
                    "",
                    "",
                    "",
                ]
            )
    return table(header, rows)


def _payload_pairs(summaries: Sequence[VariantSummary]) -> list[tuple[VariantSummary, VariantSummary]]:
    """(FP32 summary, UINT8 summary) of each variant benchmarked with both payloads."""
    by_name = {s.variant: s for s in summaries}
    pairs = [(by_name[a], by_name[b]) for a, b in payload_pairs(list(by_name))]
    return [(a, b) if a.input_dtype == "FP32" else (b, a) for a, b in pairs if a.input_dtype != b.input_dtype]


def cost_table(costs: Sequence[dict[str, Any]]) -> str:
    header = [
        "variant",
        "RPS source",
        "RPS per GPU node",
        "region",
        "GPU pricing",
        "node $/h",
        "$/1M (one node)",
        "region $/h (minimum size)",
        "$/1M (region)",
    ]
    rows = [
        [
            f"`{c['variant']}`",
            c["rps_source"],
            fmt(c["rps"]),
            c["region"],
            c["pricing"],
            fmt(c["node_usd_h"], 3),
            fmt(c["node_usd_per_1m"], 4),
            fmt(c["region_usd_h"], 3),
            fmt(c["region_usd_per_1m"], 4),
        ]
        for c in costs
    ]
    return table(header, rows)


def machine_table(machine: dict[str, Any]) -> str:
    rows = [
        ["CPU cores", str(machine.get("cores"))],
        ["CPU model", str(machine.get("cpu_model"))],
        ["memory", f"{machine.get('memory_gib')} GiB"],
        ["GPUs", ", ".join(machine.get("gpus") or []) or "none"],
        ["load average at start (1/5/15 min)", _load(machine.get("load_start"))],
        ["load average at end (1/5/15 min)", _load(machine.get("load_end"))],
        [
            "Python / ONNX Runtime / Triton",
            f"{machine.get('python')} / {machine.get('onnxruntime')} / {machine.get('triton', 'n/a')}",
        ],
        ["commit", str(machine.get("commit"))],
        *conditions_rows(machine),
    ]
    return table(["machine", ""], rows)


def conditions_rows(machine: dict[str, Any]) -> list[list[str]]:
    """The run's conditions (bench/metrics/conditions.py) for the machine table; none for a run from before them."""
    c = machine.get("conditions")
    if not isinstance(c, dict):
        return []
    before, after = c.get("baseline_before"), c.get("baseline_after")
    drift = f" ({after / before - 1:+.1%})" if before and after is not None else ""
    return [
        ["raw onnxruntime baseline before / after (inferences/s)", f"{fmt(before)} / {fmt(after)}{drift}"],
        ["other processes during the baselines", fmt(c.get("others_pct"), 0, " % of the machine")],
        [
            "load average over the run (the benchmark's own CPU)",
            f"{fmt(c.get('load_average'), 2)} ({fmt(c.get('own_cores'), 2)} cores)",
        ],
        ["CPU steal over the run", fmt(c.get("steal_pct"), 2, " %")],
        ["marked noisy", "; ".join(c.get("noisy") or []) or "no: a quiet run"],
    ]


def noisy_banner(machine: dict[str, Any]) -> str:
    """A run marked noisy says so first: its figures are lower than a quiet machine's."""
    c = machine.get("conditions")
    reasons = c.get("noisy") if isinstance(c, dict) else None
    if not reasons:
        return ""
    return (
        "**Marked NOISY: " + "; ".join(reasons) + ".** The figures below are lower than a quiet machine's; the "
        "run's capacity records carry the reasons, and `--record` writes them only with `--force`."
    )


def _load(load: Sequence[float] | None) -> str:
    return " / ".join(f"{x:.2f}" for x in load) if load else "n/a"


def render_readme(run: BenchRun, plots: Sequence[str], plot_note: str) -> str:
    s = run.settings
    parts = [
        f"# Benchmark: stack `{run.stack}`, target `{run.target}`, {run.started}",
        noisy_banner(run.machine),
        CPU_CAVEAT.format(cores=run.machine.get("cores")) if run.target == "sandbox" else "",
        f"Command: `{run.command.strip()}`  \nWall time: {run.wall_s / 60:.1f} min.",
        "## Method",
        method_text(s),
        "## Machine",
        machine_table(run.machine),
        "## Results",
        "max RPS at SLO: the achieved rate (successful responses/s, the figure the plots and the capacity "
        "records show) of the step at the highest open-loop request rate (Poisson arrivals, offered rate in "
        "brackets) whose p95 met the SLO within the failure budget, median over the repeats (p50/p95, in server, "
        "batch and CPU: at that rate); spread is "
        "(high - low) / median of the repeats' answers. perf_analyzer max RPS: NVIDIA's perf_analyzer's own "
        "open-loop binary search on the same server (Poisson, p95 threshold = the SLO): the throughput it served "
        "at the highest passing rate and that rate as asked (its --async rate mode can deliver 10-20 % less than "
        "asked), with Locust's answer over the served one (1.00 = the tools agree). saturation RPS: the most the "
        "server delivered to closed-loop users (best "
        "user count). served/raw: saturation RPS / raw ONNX Runtime throughput of the same file at the "
        "saturation batch size on the same cores (no server). bytes/request: the input tensor of one image.",
        results_table(run.summaries, run.steps),
    ]
    payload = payload_table(run.summaries, run.steps)
    if payload:
        parts += ["## FP32 vs UINT8 payload", payload_text(), payload]
    parts += ["## Cost", cost_text(run), cost_table(run.costs)]
    parts += ["## Plots", plot_note] + [f"![{name}]({name})" for name in plots]
    parts += ["## Recommendation", "\n".join(f"- {line}" for line in recommend(run.summaries, s, run.steps))]
    notes = [*run.notes, *contention_notes(run.steps)]
    if notes:
        parts += ["## Notes", "\n".join(f"- {n}" for n in notes)]
    parts += ["## Files", files_text()]
    return "\n\n".join(p for p in parts if p) + "\n"


BUSY_OTHERS_PCT = 30.0  # machine CPU not used by the server above this: something else competed


def contention_notes(steps: Sequence[StepRow]) -> list[str]:
    """Variants measured while other work used the cores (machine CPU well above the server's own;
    Locust's share is small at these loads): their latencies are inflated."""
    others: dict[str, list[float]] = {}
    for row in steps:
        if not row.warmup and row.machine_cpu_pct is not None and row.server_cpu_pct is not None:
            others.setdefault(row.variant, []).append(row.machine_cpu_pct - row.server_cpu_pct)
    busy = {v: statistics.median(x) for v, x in others.items() if statistics.median(x) > BUSY_OTHERS_PCT}
    if not busy:
        return []
    listed = ", ".join(f"`{v}` ({share:.0f} %)" for v, share in busy.items())
    return [
        "Measured while other processes competed for the cores (median machine CPU not used by the server, "
        f"Locust included): {listed}. Their latencies are inflated; compare them with care."
    ]


def method_text(s: dict[str, Any]) -> str:
    if "ladder_start" not in s:  # a run from before the rate search (users x rps per user)
        return f"- Users {s.get('users')}, {s.get('rps_per_user')} request/s each (see results.json)."
    saturation = s.get("saturation_users") or []
    return "\n".join(
        [
            f"- SLO: p95 <= {s['slo_ms']:g} ms with at most {100 * s['max_failure_ratio']:g} % failed requests "
            "(the stack's `sloLatencyMs` and `sloMaxFailurePercent` unless overridden).",
            f"- Load: real Locust, headless, the project's `loadtest/locustfile.py` ({s['protocol']}): open-loop "
            f"{s['arrival']} arrivals at a request rate, independent of the {s['users']} users that bound the "
            "requests in flight; latency counts from each request's arrival (waiting for a free user included).",
            f"- Rate search (`bench/plans/slo_search.py`): "
            f"from {s['ladder_start']:g} requests/s, x{s['ladder_growth']:g} "
            f"per step (up to {s['ladder_max_rate']:g}) until a rate fails, then bisection between the highest "
            f"passing and the lowest failing rate until they are within {100 * s['ladder_precision']:g} %. "
            "A step fails on a failure ratio above the tolerance (whatever its p95), or a p95 of its successful "
            f"requests above the SLO; it passes with >= {s['min_requests']} requests (else it is inconclusive). "
            + rate_rule_text(s)
            + " The answer is the highest passing rate below every failing one.",
            f"- Steps: {s['settle_s']:g} s to settle (not measured), then {s['step_s']:g} s measured, longer (up to "
            f"{STRETCH:g}x) at low rates until {s['min_requests']} requests. A {s['warmup_s']:g} s warm-up runs first "
            "and is discarded (the first measurement after a restart is slow).",
            f"- Saturation: closed-loop users {saturation} (each sends its next request when the last returns) "
            f"until a count adds under {100 * SATURATION_GAIN:g} % throughput: the most the server delivers, for "
            "served/raw."
            if saturation
            else "- Saturation: skipped.",
            f"- A fresh tritonserver per variant (restarted per model, as the reference does); {s['repeats']} "
            "repeat(s) of the search per variant; then perf_analyzer's own search on the same server.",
            "- Batch size: Triton's `nv_inference_count` / `nv_inference_exec_count` over the step; in server: "
            "Triton's mean request duration (and queue time, the batcher's delay included) per request. CPU: the "
            "server's process tree (tritonserver + python stubs) and the whole machine (Locust included), "
            "in % of all cores, sampled every 0.5 s.",
        ]
    )


def payload_text() -> str:
    return (
        "Each pair is the same model with an FP32 input and with a UINT8 input (a Cast and /255 inside the ONNX "
        "graph, `input_dtype: UINT8`; the copy is named `<variant>_uint8` or `<variant>_fp32`); Locust sends the "
        "matching `payload`. LB data $/1M is the global load balancer's data "
        "processing ($0.008/GiB) for the input tensors of one million requests: it applies only with "
        "`globalLoadBalancer: true`."
    )


def cost_text(run: BenchRun) -> str:
    prices = "; ".join(
        f"{p['region']} {p['pricing']}: node {fmt(p['node_usd_h'], 3)} $/h, region at minimum size "
        f"{fmt(p['region_usd_h'], 3)} $/h" + (f" (missing: {', '.join(p['missing'])})" if p["missing"] else "")
        for p in run.pricing
    )
    return (
        "List prices from `infra/data` (GPU node = GPU VM + T4; region at minimum size = GKE fee + CPU pool + "
        "`gpuMinNodes` GPU nodes, each serving the RPS; egress, disks, NAT and LB data excluded). "
        "**CPU-twin RPS are not GPU RPS**: the `measured (CPU twin)` rows only show the arithmetic; the "
        "`reference T4` rows use the reference tutorial's one-T4 figures (architecture.md) for comparison. "
        f"Prices: {prices}."
        + ("" if any(s.max_rps for s in run.summaries) else " No variant met the SLO, so there are no measured rows.")
    )


# Requests behind a figure (the chosen steps of every repeat) before it may decide anything. The number of a step's
# requests above the true p95 is Binomial(n, 0.05): at n = 200 it is 10 +- 3.1, so the measured p95 lies between the
# true p92 and p98 about 95 % of the time (2 standard deviations); at 40 requests (2 +- 1.4) it is anything from
# the p88 to the maximum. n >= 211 gives exactly +-3 points; 200 is that, rounded.
MIN_EVIDENCE = 200


def evidence(steps: Sequence[StepRow], variant: str) -> tuple[int, int]:
    """(requests, steps) behind a variant's figure: its chosen steps, every repeat."""
    chosen = [r for r in steps if r.variant == variant and r.chosen]
    return sum(r.requests for r in chosen), len(chosen)


def _evidence_text(steps: Sequence[StepRow], variants: Sequence[str]) -> tuple[str, list[str]]:
    """("`a` N requests in K chosen steps, ...", the variants below MIN_EVIDENCE)."""
    parts, short = [], []
    for name in variants:
        requests, count = evidence(steps, name)
        parts.append(f"`{name}` {requests:,} requests in {count} chosen step(s)")
        if requests < MIN_EVIDENCE:
            short.append(name)
    return ", ".join(parts), short


def _withheld(what: str, text: str, short: list[str]) -> str:
    return (
        f"{what}: withheld: {', '.join(f'`{n}`' for n in short)} rest(s) on fewer than {MIN_EVIDENCE} requests "
        f"(evidence: {text}); rerun with more --repeats or longer --step-seconds."
    )


def recommend(
    summaries: Sequence[VariantSummary], settings: dict[str, Any], steps: Sequence[StepRow] = ()
) -> list[str]:
    """The best variant and the payload advice, each naming its evidence (the requests of the chosen steps behind
    the figures it compares) and withheld where one of them rests on fewer than MIN_EVIDENCE requests."""
    found = [s for s in summaries if s.max_rps is not None]
    if not found:
        return [
            f"No variant met p95 <= {settings['slo_ms']:g} ms, not even at the lowest rate tried "
            f"({_lowest_rate(settings)} requests/s); check the failures column of results.csv, or start lower "
            "(--start-rps)." + _floor(summaries, settings),
            "To watch the search pick a knee on CPU twins, give them a CPU-sized objective (e.g. --slo-ms 300); "
            "rank GPU variants with --target stack at the stack's own SLO.",
        ]
    best = max(found, key=lambda s: (s.max_rps, -(s.p95_ms or 0)))
    runner_up = max((s for s in found if s is not best), key=lambda s: (s.max_rps, -(s.p95_ms or 0)), default=None)
    compared = [best.variant] + ([runner_up.variant] if runner_up else [])
    text, short = _evidence_text(steps, compared)
    if short:
        return [_withheld("Best variant", text, short), *_payload_advice(summaries, steps), _T4_NOTE]
    lines = [
        f"Best for the SLO here: `{best.variant}` at {fmt(best.max_rps)} RPS (p95 {fmt(best.p95_ms, 0)} ms) with "
        f"precision {best.precision}, {best.input_dtype} input, max batch {best.max_batch_size}, preferred batch "
        f"{best.preferred_batch_size}, queue delay {best.max_queue_delay_us} us, {best.instance_count} instance(s). "
        f"Evidence: {text}."
    ]
    ties = [s.variant for s in found if s is not best and _tied(s, best)]
    if ties:
        lines.append(
            "Within the repeats' spread of the best, or at the same load step: "
            + ", ".join(f"`{t}`" for t in ties)
            + " (treat as a tie here)."
        )
    return [*lines, *_payload_advice(summaries, steps), _T4_NOTE]


_T4_NOTE = (
    "On a T4 the reference ranking is `trt_int8_bs16_count4` > `trt_int8` ~ `trt_fp16` > `trt_fp32` > "
    "`original` (2236.6 / 1085.4 / 1072.5 / 381 / 253 RPS); CPU twins cannot show TensorRT's gains. "
    "Run `triton-gke bench --target stack` against the deployed stack to rank the GPU variants, then set "
    "`lbMaxRatePerPod` to the best variant's max RPS at the SLO per pod, less headroom."
)


TIE = 0.10  # answers closer than this are not told apart: twice the search's 5 % precision


def _tied(a: VariantSummary, b: VariantSummary) -> bool:
    """Repeats' ranges overlap, or the answers are within TIE of each other (the search's own precision)."""
    overlap = (a.max_rps_high or 0) >= (b.max_rps_low or 0) and (b.max_rps_high or 0) >= (a.max_rps_low or 0)
    close = bool(a.max_rps and b.max_rps and abs(a.max_rps - b.max_rps) <= TIE * max(a.max_rps, b.max_rps))
    return overlap or close


def _lowest_rate(settings: dict[str, Any]) -> str:
    start, growth = settings.get("ladder_start"), settings.get("ladder_growth")
    return f"{start / growth**4:.2g}" if start and growth else "n/a"


def _floor(summaries: Sequence[VariantSummary], settings: dict[str, Any]) -> str:
    """The latency floor: one image alone through raw ONNX Runtime, plus the batcher's wait."""
    single = [s for s in summaries if s.raw_batch == 1 and s.raw_rps]
    if not single:
        return ""
    fastest = min(single, key=lambda s: 1000 / s.raw_rps + s.max_queue_delay_us / 1000)
    floor = 1000 / fastest.raw_rps + fastest.max_queue_delay_us / 1000
    return (
        f" On these cores one image takes {1000 / fastest.raw_rps:.0f} ms in raw ONNX Runtime (`{fastest.variant}`) "
        f"and the batcher waits up to {fastest.max_queue_delay_us / 1000:g} ms: a floor of ~{floor:.0f} ms "
        f"before any queueing, against an SLO of {settings['slo_ms']:g} ms."
    )


def _payload_advice(summaries: Sequence[VariantSummary], steps: Sequence[StepRow] = ()) -> list[str]:
    advice = []
    for fp32, uint8 in _payload_pairs(summaries):
        if fp32.max_rps is None or uint8.max_rps is None:
            continue
        text, short = _evidence_text(steps, [uint8.variant, fp32.variant])
        if short:
            advice.append(_withheld("Payload", text, short))
            continue
        change = uint8.max_rps / fp32.max_rps - 1
        fewer = f"{fp32.bytes_per_request // uint8.bytes_per_request}x fewer bytes per request"
        if _tied(fp32, uint8):
            verdict = f"send UINT8: no throughput difference this run can resolve, and {fewer}"
        elif change > 0:
            verdict = f"send UINT8: {change:+.0%} RPS at the SLO, and {fewer}"
        else:
            verdict = f"UINT8 cost {change:.0%} RPS here, for {fewer}"
        advice.append(
            f"Payload: {verdict} (`{uint8.variant}` {fmt(uint8.max_rps)} vs `{fp32.variant}` {fmt(fp32.max_rps)} RPS; "
            f"evidence: {text}). Stack keys: `modelUint8Input` for the model, `locustPayload: uint8` for the load test."
        )
    return advice


def files_text() -> str:
    return "\n".join(
        [
            "- `results.csv`: one row per variant x repeat x step (warm-up steps included, marked), with the verdict.",
            "- `summary.csv`: one row per variant (the table above, unrounded).",
            "- `cost.csv`: $/h and $/1M per variant x RPS source x region x pricing.",
            "- `results.json`: everything, including settings and machine facts (`triton-gke bench report DIR` "
            "re-renders this page from it).",
            "- `rps_vs_p95.png`, `ranking.png`: the plots above.",
        ]
    )


# ---------------------------------------------------------------- plots


def write_plots(run: BenchRun, out: Path) -> tuple[list[Path], str]:
    plt = plots.pyplot()
    if plt is None:
        return [], "Plots skipped: matplotlib is not installed (`pip install matplotlib==3.11.2`)."
    try:
        paths = [_curves(run, out / "rps_vs_p95.png", plt), _ranking(run, out / "ranking.png", plt)]
    finally:
        plt.close("all")
    return paths, (
        "First: each variant's curves (one line per repeat, warm-up steps left out; filled markers met the SLO, "
        "open ones missed it, the ringed one is the chosen step; the dashed line is the SLO). Second: the ranking "
        "(bar: median, whisker: lowest to highest repeat; when no variant met the SLO: p95 at the lowest load "
        "instead). Each plot's legend says the same."
    )


def _curves(run: BenchRun, path: Path, plt: Any) -> Path:
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    names = [s.variant for s in run.summaries]
    columns = min(3, len(names)) or 1
    rows = -(-len(names) // columns) or 1
    figure, axes = plt.subplots(
        rows, columns, figsize=(max(6.4, 5 * columns), 3.6 * rows + 1.6), squeeze=False, sharey=True,
        layout="constrained",
    )  # fmt: skip
    slo = run.settings["slo_ms"]
    colours: dict[int, str] = {}
    for ax, name in zip(axes.flat, names, strict=False):
        for repeat in sorted({r.repeat for r in run.steps if r.variant == name}):
            steps = [r for r in run.steps if r.variant == name and r.repeat == repeat and r.phase == "search"]
            steps = sorted((r for r in steps if not r.warmup), key=lambda r: r.offered_rps or 0)
            steps = [r for r in steps if r.p95_ms is not None]
            line = ax.plot([r.rps for r in steps], [r.p95_ms for r in steps], "-", alpha=0.6)[0]
            colours.setdefault(repeat, line.get_color())
            for r in steps:
                ax.plot(
                    r.rps, r.p95_ms, "o", color=line.get_color(), fillstyle="full" if r.verdict == "pass" else "none"
                )
                if r.chosen:
                    ax.plot(r.rps, r.p95_ms, "o", markersize=13, fillstyle="none", color="black")
        ax.axhline(slo, color="red", linestyle="--", linewidth=1)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("achieved rate (requests/s, successful)")
        ax.set_ylabel("p95 latency (ms, log scale)")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 50, 100, 200, 500...
        ax.yaxis.set_major_formatter(ScalarFormatter())  # 200, not 2 x 10^2
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    handles = [
        plots.key(f"repeat {repeat} (steps by offered rate)", linestyle="-", color=colour, alpha=0.6)
        for repeat, colour in sorted(colours.items())
    ]
    handles += [
        plots.key("filled: the step met the SLO", marker="o", color="tab:grey"),
        plots.key("open: it missed the SLO", marker="o", color="tab:grey", fillstyle="none"),
        plots.key("ringed: the chosen step (the capacity)", marker="o", markersize=13, fillstyle="none", color="black"),
        plots.key(f"SLO: p95 {slo:g} ms", linestyle="--", color="red", linewidth=1),
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=2 if columns == 1 else 3, fontsize=8)
    figure.suptitle(plots.wrap(_plot_title(run, "Rate vs p95 per variant"), plots.title_width(figure)), fontsize=11)
    return plots.save(figure, path)


def _ranking(run: BenchRun, path: Path, plt: Any) -> Path:
    if not any(s.max_rps for s in run.summaries):
        return _closest(run, path, plt)
    ranked = sorted(run.summaries, key=lambda s: s.max_rps or 0)
    figure, ax = plt.subplots(figsize=(8, 0.6 * len(ranked) + 2.4), layout="constrained")
    values = [s.max_rps or 0 for s in ranked]
    low = [v - (s.max_rps_low or v) for s, v in zip(ranked, values, strict=True)]
    high = [(s.max_rps_high or v) - v for s, v in zip(ranked, values, strict=True)]
    ax.barh([s.variant for s in ranked], values, xerr=[low, high], color=_colours(ranked), capsize=4)
    for y, s in enumerate(ranked):
        ax.text(values[y], y, f"  {fmt(s.max_rps)}" if s.max_rps else "  none met the SLO", va="center", fontsize=8)
    ax.set_xlim(left=0)
    ax.set_xlabel(plots.capacity_label(run.settings["slo_ms"]))
    return _save(figure, ax, run, path, "Ranking", _payload_legend(ranked, "bar: median of repeats"))


def _closest(run: BenchRun, path: Path, plt: Any) -> Path:
    """With no result at all, rank by p95 at the lowest load: which variant came closest."""

    lowest = {s.variant: lowest_step(run.steps, s.variant) for s in run.summaries}
    ranked = sorted((s for s in run.summaries if lowest[s.variant]), key=lambda s: -lowest[s.variant][1])
    figure, ax = plt.subplots(figsize=(8, 0.6 * len(ranked) + 2.4), layout="constrained")
    values = [lowest[s.variant][1] for s in ranked]
    ax.barh([s.variant for s in ranked], values, color=_colours(ranked))
    for y, value in enumerate(values):
        ax.text(value, y, f"  {value:.0f} ms", va="center", fontsize=8)
    ax.axvline(run.settings["slo_ms"], color="red", linestyle="--", linewidth=1)
    ax.set_xlim(left=0)
    ax.set_xlabel("p95 latency (ms) at the lowest load tried")
    slo = plots.key(f"SLO: p95 {run.settings['slo_ms']:g} ms", linestyle="--", color="red", linewidth=1)
    handles = [*_payload_legend(ranked, "bar: median of repeats", whisker=False), slo]
    return _save(figure, ax, run, path, "Closest to the SLO (none met it)", handles)


def _payload_legend(ranked: Sequence[VariantSummary], bar: str, whisker: bool = True) -> list[Any]:
    """Legend entries for the ranking's bars: one per payload type shown, and the whisker."""
    from matplotlib.patches import Patch

    shown = {s.input_dtype == "UINT8" for s in ranked}
    handles: list[Any] = [
        Patch(color=colour, label=f"{bar}, {payload} payload")
        for uint8, colour, payload in ((False, "tab:blue", "FP32"), (True, "tab:orange", "UINT8"))
        if uint8 in shown
    ]
    if whisker:
        handles.append(plots.key("whisker: lowest to highest repeat", color="black", marker="|", markersize=8))
    return handles


def _colours(summaries: Sequence[VariantSummary]) -> list[str]:
    return ["tab:orange" if s.input_dtype == "UINT8" else "tab:blue" for s in summaries]


def _save(figure: Any, ax: Any, run: BenchRun, path: Path, what: str, handles: list[Any]) -> Path:
    ax.set_title(plots.wrap(_plot_title(run, what), plots.title_width(figure)), fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    figure.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), fontsize=8)
    return plots.save(figure, path)


def _plot_title(run: BenchRun, what: str) -> str:
    where = f"CPU twins, {run.machine.get('cores')} cores (mechanics only)" if run.target == "sandbox" else "stack"
    return f"{what}: {run.stack}, {where}, random weights"


# ---------------------------------------------------------------- reading results.json back


class ReportError(ValueError):
    """A results.json that cannot be re-rendered; one line naming the file and the key."""


_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
# What render_readme and the plots read from `settings` (method_text, recommend, the SLO line).
_SETTINGS_NUMBERS = ("slo_ms",)


def _check_value(value: Any, annotation: str, where: str) -> None:
    """`value` against a dataclass field's annotation ("float | None", "int", "str", ...), as json.loads gives it."""
    kinds = [k.strip() for k in annotation.split("|")]
    if (value is None and "None" in kinds) or not all(k in _TYPES or k == "None" for k in kinds):
        return  # lists and objects (steps, settings...) are checked by read_run itself
    allowed = tuple(t for k in kinds for t in _TYPES.get(k, ()))
    ok = isinstance(value, allowed) and (bool not in allowed) == (not isinstance(value, bool))
    if ok and isinstance(value, float) and not math.isfinite(value):
        ok = False
    if not ok:
        raise ReportError(f"{where}: expected {' or '.join(kinds)}, got {json.dumps(value, default=str)[:40]}")


def _row(kind: type, data: Any, where: str, sep: str = ".") -> Any:
    if not isinstance(data, dict):
        raise ReportError(f"{where}: expected an object")
    fields = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ReportError(f"{where}: unknown key {unknown[0]!r}")
    for name, field in fields.items():
        if name in data:
            _check_value(data[name], str(field.type), f"{where}{sep}{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ReportError(f"{where}: missing key {name!r}")
    return data


def read_run(path: Path) -> BenchRun:
    """results.json read strictly: every key known, every value of its type; ReportError names the key."""
    # Through the one bounded reader, as bench.reports.record reads it: /dev/zero or a FIFO would never end or never
    # start.
    text = read_text_file(path, MAX_RESULTS_BYTES, "a bench results.json (give a bench --out folder)", ReportError)
    data = parse_json(text, path, ReportError)
    _row(BenchRun, data, str(path), ": ")
    lists = {"steps": StepRow, "summaries": VariantSummary, "costs": dict, "pricing": dict, "notes": str}
    for key, kind in lists.items():
        items = data.get(key, [])
        if not isinstance(items, list):
            raise ReportError(f"{path}: {key}: expected a list")
        for index, item in enumerate(items):
            where = f"{path}: {key}[{index}]"
            if dataclasses.is_dataclass(kind):
                _row(kind, item, where)
            elif not isinstance(item, kind):
                raise ReportError(f"{where}: expected {'an object' if kind is dict else 'a string'}")
    for key in ("settings", "machine"):
        if not isinstance(data[key], dict):
            raise ReportError(f"{path}: {key}: expected an object")
    for key in _SETTINGS_NUMBERS:
        _check_value(data["settings"].get(key), "float", f"{path}: settings.{key}")
    data["steps"] = [StepRow(**row) for row in data.get("steps", [])]
    data["summaries"] = [VariantSummary(**row) for row in data.get("summaries", [])]
    return BenchRun(**data)


# A `bench tune` folder (its results.json is the recommended configuration's, for the records: its README is
# tune's own) or a `bench compare-tuners` folder: `bench report` re-renders their plot from these, nothing else.
TUNING_FILES = ("tune.json", "comparison.json")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="triton-gke bench report",
        description="Re-render a bench run from its results.json (README, CSV, plots); in a `bench tune` or "
        "`bench compare-tuners` folder, its plot from tune.json or comparison.json.",
    )
    parser.add_argument("results", type=Path, help="a bench, bench tune or bench compare-tuners --out folder")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)  # a bad option: one line, exit 2
    out: Path = args.results
    try:
        if not out.is_dir():
            what = "not a folder" if out.exists() else "no such folder"
            raise ReportError(f"{out}: {what}; give a bench --out folder")
        if any((out / name).is_file() for name in TUNING_FILES):  # a tuning or a comparison: its plot only
            paths = plots.write_tuning_plots(out, TUNING_FILES)
        else:
            paths = write_all(read_run(out / "results.json"), out)
    except (ReportError, plots.PlotError) as err:
        print(f"error: triton-gke bench report: {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # a settings or machine value of odd shape
        line = f"error: triton-gke bench report: {out / 'results.json'}: does not render ({err!r})"
        print(line[:300], file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: triton-gke bench report: {out}: cannot write ({err.strerror or err})", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def rate_rule_text(s: dict[str, Any]) -> str:
    """How the run decided a rate: the rule it recorded (slo_search.RATE_RULE), else the earlier one."""
    if s.get("rule") == RATE_RULE:
        return (
            f"A rate passes when {s['stop_after']} steps at it passed and fails when {s['stop_after']} failed, "
            "whichever comes first: one rule both ways."
        )
    return (
        f"A rate fails only after {s['stop_after']} failing steps in a row at it (a failure followed by a pass "
        "is noise)."
    )
