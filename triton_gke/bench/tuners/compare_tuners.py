"""triton-gke bench compare-tuners: the stack's default, our tuner's pick and Triton Model Analyzer's, side by side.

    triton-gke bench compare-tuners --tune DIR --model-analyzer DIR [--stack dev] [--rounds 2] [--out DIR]

--tune: a `bench tune` output folder (tune.json: the default, the best measured, the recommended configuration, the
search's wall time). --model-analyzer: a `bench.tuners.model_analyzer.search` output folder (Model Analyzer's pick, its
own closed-loop figures and its search time). Each distinct configuration is measured on the CPU twin, in `--rounds`
rounds, every configuration once per round (so a drift of the machine reaches each alike), by two tools:

- our open-loop rate search (bench/runners/runner.py through bench/tuners/tune_measure.py's Measurer: a fresh
  tritonserver, Locust with Poisson arrivals, the achieved rate at the highest offered rate whose p95 met the
  stack's SLO);
- perf_analyzer's own rate search with --async (Poisson arrivals, --binary-search on --latency-threshold at p95;
  bench/runners/perf_analyzer.py search), on a fresh server of the same configuration: a tool we did not write.

Model Analyzer measured its candidates with perf_analyzer's concurrency mode, a closed loop (each of N clients
waits for its answer before sending the next), which never lets a queue build beyond N requests: its figure is a
throughput at a concurrency, not a rate the service holds at the SLO under arrivals it does not control. Both are
reported; the comparison is on the open-loop capacity.

Writes comparison.json and README.md into --out (default results/bench/tuners-<stack>-<date>/). Bad input: one line,
exit 2; a configuration no tool could measure: exit 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import random
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench import command
from triton_gke.bench.metrics import conditions, machine
from triton_gke.bench.plans.slo_search import spread
from triton_gke.bench.reports import plots, record
from triton_gke.bench.runners import perf_analyzer, runner
from triton_gke.bench.tuners import tune, tune_search
from triton_gke.bounded_files import one_line, parse_json, read_text_file

if TYPE_CHECKING:
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings

PROG = "triton-gke bench compare-tuners"
MAX_INTRA_OP_THREADS = 1024  # what the twin accepts (model_repo/twin_model.py _threads): more fails its load mid-run
TUNE_JSON_MAX_BYTES = 4 << 20
ROUNDS_RANGE = (1, 10)
# Per perf_analyzer window; it decides a rate on its last 3 windows merged (bench/runners/perf_analyzer.py
# search_command): 90 requests, about what our search's steps hold at these rates (40 requests or 4 s, confirmed by a
# second step).
PA_WINDOW_REQUESTS = 30


@dataclass(frozen=True)
class Entry:
    """A configuration to measure and who proposed it."""

    source: str  # "default", "bench tune (recommended)", "bench tune (best measured)", "Model Analyzer"
    candidate: tune.Candidate
    claim: str  # the proposing tool's own figure, as it stated it
    search_s: float | None  # how long the proposing tool searched
    asked: Asked | None = None  # what the proposing run searched for (None: the stack's default, nothing asked)


@dataclass(frozen=True)
class Asked:
    """The question a tuning run answered: a variant's best configuration at p<percentile> <= latency_ms."""

    where: str  # the option and file it came from, for the error
    variant: str
    latency_ms: int
    percentile: int = 95


# ---------------------------------------------------------------- inputs


def _candidate(fields: Any, where: str) -> tune.Candidate:
    names = [f.name for f in dataclasses.fields(tune.Candidate)]
    if not isinstance(fields, dict) or any(n not in fields for n in names[:4]):
        raise runner.BenchError(f"{where}: not a configuration (expected {', '.join(names[:4])})")
    values = [fields.get(n) for n in names[:5]]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values[:4]) or not (
        values[4] is None or (isinstance(values[4], int) and not isinstance(values[4], bool))
    ):
        raise runner.BenchError(f"{where}: a configuration's values are whole numbers")
    if values[4] is not None and not 0 <= values[4] <= MAX_INTRA_OP_THREADS:
        raise runner.BenchError(f"{where}: intra_op_threads {values[4]}: expected 0 to {MAX_INTRA_OP_THREADS}")
    protocol, other_payload = fields.get("protocol", "http"), fields.get("other_payload", False)
    if protocol not in ("http", "grpc") or not isinstance(protocol, str):
        raise runner.BenchError(f"{where}: protocol {one_line(repr(protocol))[:40]}: expected 'http' or 'grpc'")
    if not isinstance(other_payload, bool):
        raise runner.BenchError(f"{where}: other_payload {one_line(repr(other_payload))[:40]}: expected true or false")
    return tune.Candidate(*values, protocol=protocol, other_payload=other_payload)


def tuner_entries(folder: Path) -> list[Entry]:
    """The default and our tuner's configurations from a `bench tune` output folder."""
    path = folder / "tune.json"
    text = read_text_file(path, TUNE_JSON_MAX_BYTES, "a tuning's tune.json", runner.BenchError)
    report = parse_json(text, path, runner.BenchError)
    if not isinstance(report, dict) or not all(k in report for k in ("default", "best", "wall_s")):
        raise runner.BenchError(f"{path}: not a `bench tune` report (no default, best and wall_s)")
    chosen = report.get("recommended", report["best"])  # reports before the noise rule had no "recommended"
    search = report.get("search", "open-loop")  # reports before the screen had no "search"
    if search not in tune.SEARCHES or not isinstance(search, str):
        expected = " or ".join(repr(s) for s in tune.SEARCHES)
        raise runner.BenchError(f"{path}: search {one_line(repr(search))[:40]}: expected {expected}")

    def claim(part: dict) -> str:
        median, searches = part.get("median"), part.get("searches")
        if median is None:
            return "not measured"
        if isinstance(median, bool) or not isinstance(median, (int, float)) or not math.isfinite(median):
            raise runner.BenchError(f"{path}: a median is a number of requests/s, got {one_line(repr(median))[:80]}")
        if tune.screened(report):
            return f"{median:.1f} req/s predicted (M/D/c), {one_line(str(searches))[:20]} closed-loop measurements"
        return f"{median:.1f} req/s open loop, {one_line(str(searches))[:20]} searches"

    wall = report["wall_s"]
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not 0 <= wall < math.inf:
        raise runner.BenchError(f"{path}: wall_s is the tuning's seconds, got {one_line(repr(wall))[:80]}")
    variant, slo_ms = report.get("variant"), report.get("slo_ms")
    if not isinstance(variant, str) or isinstance(slo_ms, bool) or not isinstance(slo_ms, int):
        raise runner.BenchError(f"{path}: not a `bench tune` report (no variant name and whole slo_ms)")
    asked = Asked(f"--tune {path}", variant, slo_ms)
    entries = [Entry("default", _candidate(report["default"], f"{path}: default"), claim(report["default"]), None)]
    recommended = _candidate(chosen, f"{path}: recommended")
    entries.append(Entry("bench tune (recommended)", recommended, claim(chosen), wall, asked))
    best = _candidate(report["best"], f"{path}: best")
    entries.append(Entry("bench tune (best measured)", best, claim(report["best"]), wall, asked))
    return entries


def model_analyzer_entry(folder: Path, default: tune.Candidate) -> Entry:
    from triton_gke.bench.tuners import model_analyzer

    pick = model_analyzer.load_pick(folder)
    values = pick.stack_values()
    candidate = tune.Candidate(
        values["modelMaxQueueDelayUs"], values["modelPreferredBatchSize"], values["modelMaxBatchSize"],
        values["modelInstanceCount"], default.intra_op_threads,
    )  # fmt: skip
    where = f"--model-analyzer {folder / model_analyzer.PICK_JSON}"
    asked = Asked(where, pick.variant, pick.latency_ms, pick.percentile)
    return Entry("Model Analyzer", candidate, pick.describe(), pick.search_s, asked)


def check_same_question(entries: list[Entry], variant: str, latency_ms: int) -> None:
    """Each tool's pick answers this comparison's question: the same variant at p95 <= the stack's SLO (a tuning of
    another variant or SLO would be measured against a question it never searched)."""
    for entry in entries:
        asked = entry.asked
        if asked and (asked.variant, asked.latency_ms, asked.percentile) != (variant, latency_ms, 95):
            raise runner.BenchError(
                f"{asked.where}: searched {one_line(asked.variant)[:80]!r} at p{asked.percentile} <= "
                f"{asked.latency_ms} ms; this comparison measures {variant!r} at p95 <= {latency_ms} ms"
            )


def distinct(entries: list[Entry]) -> list[Entry]:
    """One entry per configuration: the first proposer keeps it, the others are named with it."""
    kept: dict[tune.Candidate, Entry] = {}
    for entry in entries:
        if entry.candidate in kept:
            first = kept[entry.candidate]
            kept[entry.candidate] = dataclasses.replace(first, source=f"{first.source} = {entry.source}")
        else:
            kept[entry.candidate] = entry
    return list(kept.values())


def check_with_stack(entries: list[Entry], stack: str) -> None:
    """Every configuration loaded through the stack's checks with its keys set, before anything is built: a
    tune.json or an MA folder is a file anyone can edit."""
    for entry in entries:
        refusal = tune.stack_refusal(entry.candidate, stack)
        if refusal:
            raise runner.BenchError(f"{entry.source}'s configuration: the stack refuses it: {refusal}")


# ---------------------------------------------------------------- measuring


@dataclass
class PaMeasurer:
    """perf_analyzer's --async rate search on a fresh server of a configuration, between half and twice `near`."""

    settings: StackSettings
    variant: VariantSettings
    base: Path
    workdir: Path
    log: runner.Log

    def __call__(self, candidate: tune.Candidate, near: float | None) -> perf_analyzer.SearchResult | None:
        binary = perf_analyzer.ensure_binary()
        centre = near if near and near > 0 else 2.0
        # A bracket around what our search found (a bisection to a tenth of it: ~5 levels of 3 windows each).
        rates = perf_analyzer.RateRange(max(0.25, centre / 2), max(centre * 2, 1.0), max(0.1, centre / 10))
        repo = self.workdir / "pa-candidate"
        # The candidate's protocol and payload (the UINT8 copy built beside the twin) as our search sends them.
        model, serve = tune.candidate_server(candidate, self.variant, self.base, repo)
        slo = float(self.settings.monitoring.slo.latency_ms)
        self.log(f"{candidate.label()}: perf_analyzer --async, {rates.describe()}")
        try:
            with serve(model.name) as endpoint:
                found = perf_analyzer.search(
                    binary, model.name, endpoint.address(candidate.protocol), candidate.protocol, rates, slo,
                    PA_WINDOW_REQUESTS, self.workdir / "pa.csv",
                )  # fmt: skip
        except perf_analyzer.PerfAnalyzerError as err:
            self.log(f"  perf_analyzer: {err}")
            return None
        finally:
            shutil.rmtree(repo, ignore_errors=True)
        self.log(f"  perf_analyzer: {found.rps or 0:.1f} inferences/s at p95 <= {slo:g} ms (asked {found.max_rate})")
        return found


def measure_rounds(
    entries: list[Entry],
    rounds: int,
    ours: Callable[[tune.Candidate, int], list[float]],
    theirs: Callable[[tune.Candidate, float | None], perf_analyzer.SearchResult | None],
    log: runner.Log,
    seed: int | None = None,
    orders: list[list[str]] | None = None,
) -> dict[tune.Candidate, dict[str, list[float | None]]]:
    """Each configuration once per round, by both tools, rounds one after the other. With a seed, each round visits
    the configurations in an order drawn from it (issue 46: a fixed order lets a drift of the machine favour the same
    configuration every round), each round's order appended to `orders` (the run records them)."""
    found: dict[tune.Candidate, dict[str, list[float | None]]] = {e.candidate: {"ours": [], "pa": []} for e in entries}
    draw = random.Random(seed) if seed is not None else None
    for number in range(rounds):
        order = list(entries)
        if draw is not None:
            draw.shuffle(order)
        if orders is not None:
            orders.append([e.source for e in order])
        for entry in order:
            log(f"round {number + 1}/{rounds}: {entry.source}")
            measured = ours(entry.candidate, 1)
            capacity = measured[0] if measured else None
            found[entry.candidate]["ours"].append(capacity)
            result = theirs(entry.candidate, capacity)
            # A finished search that met no rate is 0, as ours is; only a failed one is a gap (None): a gap is left
            # out of the median, and a "none met" left out with it raised the median (the first 3-round run did).
            found[entry.candidate]["pa"].append((result.rps or 0.0) if result else None)
    return found


# ---------------------------------------------------------------- the run


OUT_PREFIX = "tuners-"  # --out's default: results/bench/tuners-<stack>-<date>


def parser() -> command.BenchParser:
    p = command.BenchParser(
        prog=PROG,
        description="Measure the stack's default, `bench tune`'s pick and Model Analyzer's pick side by side on the "
        "CPU twin, with our open-loop rate search and with perf_analyzer --async.",
        epilog="Exit 0 done, 1 nothing could be measured, 2 bad input, 128+N stopped by signal N.",
    )
    p.add_argument("--tune", required=True, help="a `bench tune` output folder (holding tune.json)")
    p.add_argument("--model-analyzer", required=True, help="a bench.tuners.model_analyzer output folder")
    p.add_stack("variant, SLO and settings")
    p.add_variant("the variant the tuning searched")
    p.add_argument("--rounds", type=int, default=2, help="measurements of each configuration by each tool (2)")
    p.add_argument(
        "--seed", type=int, help="seed of each round's random order (default: from the start time; recorded)"
    )
    tune.add_search_options(p, start_rps=4.0, first="a search")
    p.add_out(OUT_PREFIX)
    p.add_build_dir()
    return p


def main(argv: list[str] | None = None) -> int:
    from triton_gke.bench.tuners.model_analyzer import ModelAnalyzerError

    return command.run(
        argv, _compare, stopped="stopped every process the comparison started", refuse=(ModelAnalyzerError,)
    )


def _compare(argv: list[str]) -> int:
    started, stamp = time.monotonic(), datetime.datetime.now().astimezone()
    p = parser()
    args = p.parse_args(argv)
    if not ROUNDS_RANGE[0] <= args.rounds <= ROUNDS_RANGE[1]:
        raise runner.BenchError(f"--rounds {args.rounds}: expected {ROUNDS_RANGE[0]} to {ROUNDS_RANGE[1]}")
    tune.check_search_args(args)
    runner.refuse_empty_paths(args, "--tune", "--model-analyzer")  # '' would read the current folder's files
    out = p.default_out(args, stamp)
    # Never over other files: a tuning's README, or a committed comparison (the default is dated by day)
    runner.check_new_or_empty(out, "the comparison")
    settings = record.stack_settings(args.stack, "--stack")
    entries = tuner_entries(Path(args.tune))
    entries = distinct([*entries, model_analyzer_entry(Path(args.model_analyzer), entries[0].candidate)])
    variant = tune.pick_variant(args.variant, settings)
    check_same_question(entries, variant.name, settings.monitoring.slo.latency_ms)
    if entries[0].candidate != tune.Candidate.of(variant):
        raise runner.BenchError(f"--tune {args.tune}: its default is not stack {args.stack!r}'s {variant.name}")
    check_with_stack(entries, args.stack)
    copies = runner.payload_copies([variant], [variant.name]) if any(e.candidate.other_payload for e in entries) else []
    base = runner.build_sandbox_repository(settings.model_repo, [variant, *copies], args.build_dir / args.stack)
    found, facts = _measure(args, settings, variant, base / variant.name, entries)
    report = _report(args, argv, settings, variant, entries, found, facts, stamp, time.monotonic() - started)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    drawn = plots.write_tuning_plots(out, ("comparison.json",))  # comparison.png: every round of every tool
    (out / "README.md").write_text(readme(report, [p.name for p in drawn]), encoding="utf-8")
    print(out / "comparison.json")
    for path in drawn:
        print(path)
    print(out / "README.md")
    print(table(report))
    return 0 if all(row["ours"]["median"] is not None for row in report["rows"]) else 1


def _measure(
    args: argparse.Namespace, settings: StackSettings, variant: VariantSettings, base: Path, entries: list[Entry]
) -> tuple[dict[tune.Candidate, dict[str, list[float | None]]], dict[str, Any]]:
    facts = {**machine.facts(), "load_start": machine.load_average()}
    watch = conditions.Watch()
    before = watch.start()
    tune.log(f"baseline: raw onnxruntime {before.inferences_per_s:.1f} inferences/s")
    workdir = Path(tempfile.mkdtemp(prefix="compare-tuners-"))
    plan = tune.load_plan(args, settings)
    progress = tune.TuneProgress(len(entries) * args.rounds, tune.unit_seconds(plan), tune.log)
    ours = tune.Measurer(args, settings, variant, base, workdir, progress, tune.log)
    theirs = PaMeasurer(settings, variant, base, workdir, tune.log)
    seed = args.seed if args.seed is not None else int(time.time()) % 2**31
    orders: list[list[str]] = []
    try:
        found = measure_rounds(entries, args.rounds, ours, theirs, tune.log, seed, orders)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    checked = watch.finish()
    for reason in checked.noisy:
        tune.log(f"warning: this run is marked noisy: {reason}")
    facts.update(conditions=checked.to_dict(), load_end=machine.load_average(), seed=seed, round_orders=orders)
    return found, facts


def _figures(values: list[float | None]) -> dict[str, Any]:
    found = spread(values)
    if found is None:
        return {"median": None, "min": None, "max": None, "values": values}
    return {"median": found.median, "min": found.low, "max": found.high, "values": values}


def _report(
    args: argparse.Namespace,
    argv: list[str],
    settings: StackSettings,
    variant: VariantSettings,
    entries: list[Entry],
    found: dict[tune.Candidate, dict[str, list[float | None]]],
    facts: dict[str, Any],
    stamp: datetime.datetime,
    wall_s: float,
) -> dict[str, Any]:
    rows = [
        {
            "source": e.source,
            **dataclasses.asdict(e.candidate),
            "label": e.candidate.label(),
            "claim": e.claim,
            "search_s": e.search_s,
            "ours": _figures(found[e.candidate]["ours"]),
            "pa": _figures(found[e.candidate]["pa"]),
        }
        for e in entries
    ]
    default = rows[0]
    for row in rows:
        for tool in ("ours", "pa"):
            base, value = default[tool]["median"], row[tool]["median"]
            row[tool]["vs_default"] = value / base if base and value is not None else None
    return {
        "command": " ".join([PROG, shlex.join(argv)]).strip(),
        "stack": args.stack,
        "variant": variant.name,
        "slo_ms": settings.monitoring.slo.latency_ms,
        "rounds": args.rounds,
        "started": stamp.isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1),
        "rows": rows,
        "machine": facts,
        "noisy": facts["conditions"]["noisy"],
    }


def _cell(figures: dict[str, Any]) -> str:
    if figures["median"] is None:
        return "no rate met the SLO"
    ratio = figures.get("vs_default")
    times = f" ({ratio:.2f}x)" if ratio is not None else ""
    return f"{figures['median']:.1f}{times} [{figures['min']:.1f}-{figures['max']:.1f}]"


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds / 60:.1f} min"


def table(report: dict[str, Any]) -> str:
    head = (
        f"| proposed by | configuration | open-loop capacity at p95 <= {report['slo_ms']} ms, Locust (x default) "
        "[min-max] | perf_analyzer --async (x default) [min-max] | the tool's own figure | its search |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    lines = [
        f"| {r['source']} | {r['label']} | {_cell(r['ours'])} | {_cell(r['pa'])} | {r['claim']} | "
        f"{_minutes(r['search_s'])} |"
        for r in report["rows"]
    ]
    return "\n".join([head, *lines])


def readme(report: dict[str, Any], images: Sequence[str] = ()) -> str:
    noisy = f"**This run is marked NOISY**: {'; '.join(report['noisy'])}.\n\n" if report["noisy"] else ""
    return (
        f"# Tuners side by side: {report['variant']} on the CPU twin ({report['stack']}, p95 <= "
        f"{report['slo_ms']} ms)\n\n{noisy}`{report['command']}`, {report['started']}, "
        f"{report['wall_s'] / 60:.1f} min, {report['rounds']} round(s): each configuration measured once per round "
        "by each tool, requests/s achieved (median over rounds).\n\n"
        f"{table(report)}\n\nModel Analyzer's own figure is closed-loop (perf_analyzer --concurrency-range): a "
        "throughput at a fixed number of clients, not a rate held under arrivals it does not control.\n"
        f"{significance(report)}" + "".join(f"\n![{name}]({name})\n" for name in images)
    )


TOOLS = (("ours", "Locust"), ("pa", "perf_analyzer --async"))


def significance(report: dict[str, Any]) -> str:
    """Whether each difference is more than noise: for our pick against Model Analyzer's and each pick against the
    default, per load tool, Mann-Whitney's U over the rounds (a round that met no rate counts 0, a failed one is
    left out) and its exact one-sided p (tune_search.exact_p_greater)."""
    # A row proposed by several ("default = bench tune (recommended)") is each proposer's row.
    rows = {name: r for r in report["rows"] for name in r["source"].split(" = ")}
    ours, theirs, default = rows.get("bench tune (recommended)"), rows.get("Model Analyzer"), report["rows"][0]
    pairs = [
        (ours, theirs, "bench tune's pick", "Model Analyzer's"),
        (ours, default, "bench tune's pick", "the default"),
        (theirs, default, "Model Analyzer's pick", "the default"),
    ]
    lines = []
    for better, worse, first, second in pairs:
        if better is None or worse is None:
            continue
        if better is worse:  # one configuration, proposed by both: nothing to test
            lines.append(f"| {first} is {second} (the same configuration) | both | - | - |")
            continue
        for tool, name in TOOLS:
            a = [v for v in better[tool]["values"] if v is not None]
            b = [v for v in worse[tool]["values"] if v is not None]
            if a and b:
                u, p = tune_search.u_statistic(a, b), tune_search.exact_p_greater(a, b)
                lines.append(f"| {first} over {second} | {name} | {u:g} of {len(a) * len(b)} | {p:.2f} |")
    if not lines:
        return ""
    return (
        "\nIs each difference more than noise? Mann-Whitney's U over the rounds (pairs of rounds where the first "
        "configuration measured more, a tie counting a half) and its exact one-sided p, the chance of a U at least "
        "this large if both were the same configuration:\n\n"
        "| difference | load tool | U | p |\n| --- | --- | --- | --- |\n" + "\n".join(lines) + "\n"
    )
