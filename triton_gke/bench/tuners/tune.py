"""triton-gke bench tune: search one variant's serving configuration for the most capacity at the stack's SLO.

    triton-gke bench tune [--stack dev] [--variant original] [--budget-minutes 20] [--max-candidates N]
                          [--out DIR] [--write-stack] [--url HOST:PORT [--grpc-url HOST:PORT]]

--url tunes a Triton the tuner did not start (the sandbox's, a cluster's through a port-forward), loading each
candidate into it through its model-control API (bench/runners/remote.py); it needs --model-control-mode=explicit, and a
server that refuses loads is refused in one line (exit 2) before anything is measured.

The search strategy (issue 46): the space is the full factorial of tune_candidates.py's stated levels (batch sizes
with batching off, instances, the batcher's delay as a share of the SLO, and where the tuner starts the server the
client's protocol and payload), the stack's default first; the rest is searched in a random order drawn from the
run's seed (--seed, recorded in tune.json), so a budget that reaches N configurations measures a uniform random
sample of the space (random search), taken from no earlier result. Every candidate is checked through the settings
layer first, so every `pulumi config set` line printed is one the stack accepts. One run tunes one variant
(--variant): the variant is a dimension of the space across runs, not within one.

--search open-loop: each candidate's objective is the bench's own open-loop rate search: the achieved rate at the
highest offered rate whose p95 met sloLatencyMs (runner.capacity). The sampled candidates then go through successive
halving within the budget (bench/tuners/tune_search.py); the default is measured to the end, beside the winner. The
budget is sized from the timed first search of the default; the best measured is recommended only when it beat the
default beyond noise (tune_search.py). --search screen: one prediction per candidate from closed-loop measurements
(tune_screen.py), by the dynamic batcher's model where the served model's batch timings are known (a GPU twin's
curve, a server's statistics), else M/D/c; a running server (--url) whose batch timings are unknown is refused.

Writes into --out (default results/bench/tune-<stack>-<date>/): tune.json (every candidate, every measurement, the
schedule, the machine's conditions), README.md, results.json and records/ (the winner's capacity record, as
`make bench` writes them). --write-stack sets the winner's keys in Pulumi.<stack>.yaml, keeping its comments.
Bad input: one line on stderr, exit 2, nothing started.
"""

from __future__ import annotations

import argparse
import datetime
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench import command
from triton_gke.bench.metrics import conditions, machine
from triton_gke.bench.plans.load_plan import LoadPlan
from triton_gke.bench.reports import record
from triton_gke.bench.runners import runner
from triton_gke.bench.runners.remote import Remote, RemoteError
from triton_gke.bench.tuners import tune_search
from triton_gke.bench.tuners.tune_candidates import (
    INTRA_PARAMETER,
    STACK_KEYS,
    Candidate,
    accepted,
    candidate_grid,
    pulumi_lines,
    set_stack_keys,
    stack_refusal,
    write_stack,
)
from triton_gke.bench.tuners.tune_measure import (
    Measurer,
    TuneProgress,
    candidate_server,
    remote_edit,
    remote_grid,
    twin_folder,
)
from triton_gke.bench.tuners.tune_options import (
    BUDGET_RANGE,
    MAX_CANDIDATES,
    PROG,
    SEARCHES,
    add_search_options,
    check_args,
    check_out_folder,
    check_search_args,
    load_plan,
    parser,
    pick_variant,
    unit_seconds,
)
from triton_gke.bench.tuners.tune_report import finish, make_report, readme, screened
from triton_gke.bench.tuners.tune_screen import (
    SCREEN_FIRST,
    SCREEN_WINDOW_S,
    Screener,
    screen_count,
    screen_curve,
    screen_row,
)

# tune's public names, wherever they live since the split: importers (tests, compare-tuners, loop-check,
# model-analyzer) keep using tune.X.
__all__ = [
    "BUDGET_RANGE",
    "Candidate",
    "INTRA_PARAMETER",
    "MAX_CANDIDATES",
    "Measurer",
    "PROG",
    "SCREEN_FIRST",
    "SEARCHES",
    "STACK_KEYS",
    "TuneProgress",
    "accepted",
    "add_search_options",
    "budget_stop",
    "candidate_grid",
    "candidate_server",
    "check_args",
    "check_out_folder",
    "check_search_args",
    "load_plan",
    "log",
    "main",
    "parser",
    "pick_variant",
    "pulumi_lines",
    "readme",
    "remote_edit",
    "screen_count",
    "screen_row",
    "screened",
    "set_stack_keys",
    "sized_search",
    "stack_refusal",
    "twin_folder",
    "unit_seconds",
    "write_stack",
]

if TYPE_CHECKING:
    from triton_gke.bench.tuners.tune_search import Outcome
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings


# ---------------------------------------------------------------- the run


log = command.log


def main(argv: list[str] | None = None) -> int:
    return command.run(argv, _tune, stopped="stopped every process the tuner started", refuse=(RemoteError,))


def _tune(argv: list[str]) -> int:
    started, stamp = time.monotonic(), datetime.datetime.now().astimezone()
    p = parser()
    args = p.parse_args(argv)
    check_args(args)
    out = p.default_out(args, stamp)
    runner.check_writable(out, "--out")
    settings = record.stack_settings(args.stack, "--stack")
    variant = pick_variant(args.variant, settings)
    plan = load_plan(args, settings)
    # The budget is sized from a measured search later; a screen's unit is seconds.
    if args.search == "open-loop" and 60 * args.budget_minutes < unit_seconds(plan):
        raise runner.BenchError(
            f"--budget-minutes {args.budget_minutes:g}: too short for one rate search of about "
            f"{unit_seconds(plan):.0f} s (the default's, which sizes the rest)"
        )
    # The run's seed draws the order the space is searched in (tune_candidates.shuffled); recorded in tune.json.
    seed = args.seed if args.seed is not None else int(stamp.timestamp()) % 2**31
    slo_ms = float(settings.monitoring.slo.latency_ms)
    remote = None
    if args.url:  # a running server: its configuration is the default, candidates are loaded into it
        remote = Remote(args.url.removeprefix("http://"), variant.name, args.grpc_url)
        remote.connect()
        default, grid = remote_grid(remote, slo_ms, seed, args.stack)
        base = args.build_dir  # unused: nothing is built or started
    else:
        default = Candidate.of(variant)
        grid = accepted(candidate_grid(default, slo_ms, seed), args.stack, log)
        copies = runner.payload_copies([variant], [variant.name]) if any(c.other_payload for c in grid) else []
        repo = settings.model_repo
        base = runner.build_sandbox_repository(repo, [variant, *copies], args.build_dir / args.stack) / variant.name
    try:
        if args.search == "screen":
            outcome, measurer, facts = _screen(args, settings, variant, base, grid, remote)
        else:
            outcome, measurer, facts = _search(args, settings, variant, base, grid, plan, remote)
    finally:
        if remote is not None:
            remote.restore()
            log(f"{args.url}: {variant.name} serves the configuration it had before the tuning again")
    facts.update(seed=seed, space=len(grid))
    if outcome is None or outcome.best is None:
        print("error: the default configuration could not be measured", file=sys.stderr)
        return 1
    if not any(score > 0 for found in outcome.scores.values() for score in found):
        slo = settings.monitoring.slo.latency_ms
        print(f"error: no configuration met p95 <= {slo} ms at any rate tried: nothing to recommend", file=sys.stderr)
        return 1
    report = make_report(args, argv, settings, variant, outcome, measurer, facts, stamp, time.monotonic() - started)
    return finish(args, out, settings, report, outcome, measurer, default)


def _search(
    args: argparse.Namespace,
    settings: StackSettings,
    variant: VariantSettings,
    base: Path,
    grid: list[Candidate],
    plan: LoadPlan,
    remote: Remote | None = None,
) -> tuple[Outcome[Candidate] | None, Measurer, dict[str, Any]]:
    """Time one search of the default, size the search from it (how many searches the budget pays for, so how many
    configurations), then successive halving with that search as the default's first."""
    log(f"tuning {variant.name} at p95 <= {settings.monitoring.slo.latency_ms} ms within {args.budget_minutes:g} min")
    facts = {**machine.facts(), "load_start": machine.load_average()}
    watch = conditions.Watch()
    before = watch.start()
    log(f"baseline: raw onnxruntime {before.inferences_per_s:.1f} inferences/s")
    workdir = Path(tempfile.mkdtemp(prefix="tune-"))
    budget_s = 60 * args.budget_minutes
    progress = TuneProgress(max(2, math.floor(budget_s / unit_seconds(plan))), unit_seconds(plan), log)
    measurer = Measurer(args, settings, variant, base, workdir, progress, log, remote=remote)
    started = time.monotonic()
    deadline = started + budget_s
    default = grid[0]
    try:
        first = measurer(default, 1)
        search_s = time.monotonic() - started
        if not first:
            return None, measurer, facts
        units, candidates, rungs = sized_search(grid, budget_s, search_s, args.max_candidates)
        progress.ramps = sum(r.cost for r in rungs)
        log(
            f"one search of the default took {search_s:.0f} s: the budget pays for {units} searches, "
            f"{len(candidates)} configurations; rungs " + ", ".join(f"{r.candidates} x {r.effort}" for r in rungs)
        )
        outcome = _halve(candidates, measurer, units, deadline, first)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _close(facts, watch, remote, default_search_s=round(search_s, 1))
    return outcome, measurer, facts


def _halve(
    candidates: list[Candidate],
    measure: Callable[[Candidate, int], list[float]],
    units: int,
    deadline: float,
    first: list[float],
    first_effort: int = tune_search.FIRST_EFFORT,
) -> Outcome[Candidate]:
    """Successive halving over `candidates` (the default first, already measured: `first`) within `units`,
    stopping at `deadline` once the default was compared with one other."""
    default, searched = candidates[0], {candidates[0]}

    def measured(candidate: Candidate, effort: int) -> list[float]:
        searched.add(candidate)
        return measure(candidate, effort)

    return tune_search.successive_halving(
        candidates, measured, units, default, stop=budget_stop(deadline, searched), measured={default: first},
        first=first_effort,
    )  # fmt: skip


def _close(facts: dict[str, Any], watch: conditions.Watch, remote: Remote | None, **found: Any) -> None:
    """The run's conditions (noisy or not, said on stderr too), the server and what the search found into facts."""
    checked = watch.finish()
    for reason in checked.noisy:
        log(f"warning: this run is marked noisy: {reason}")
    facts.update(
        conditions=checked.to_dict(),
        load_end=machine.load_average(),
        triton="2.51.0 (nvidia-pytriton 0.7.0 wheel)",
        **found,
    )
    if remote is not None:  # what was tuned, and every configuration loaded through its API
        facts.update(remote={"url": remote.http, "model": remote.model, "loads": remote.loads})  # the restore too


def _screen(
    args: argparse.Namespace,
    settings: StackSettings,
    variant: VariantSettings,
    base: Path,
    grid: list[Candidate],
    remote: Remote | None = None,
) -> tuple[Outcome[Candidate] | None, Screener, dict[str, Any]]:
    """--search screen: time the default's screening (SCREEN_FIRST closed-loop measurements on a fresh server), size
    the search from it, then screen as many configurations as the budget pays for the same way; each unit is one
    prediction of the open-loop capacity (Screener), ranked and judged by tune_search like rate searches."""
    from triton_gke.bench.runners import perf_analyzer

    slo = settings.monitoring.slo.latency_ms
    log(f"screening {variant.name} for p95 <= {slo} ms within {args.budget_minutes:g} min (closed loop + M/D/c)")
    try:
        binary = perf_analyzer.ensure_binary()
    except perf_analyzer.PerfAnalyzerError as err:
        raise runner.BenchError(str(err)) from None
    facts = {**machine.facts(), "load_start": machine.load_average()}
    watch = conditions.Watch()
    log(f"baseline: raw onnxruntime {watch.start().inferences_per_s:.1f} inferences/s")
    workdir = Path(tempfile.mkdtemp(prefix="tune-"))
    screener = Screener(settings, variant, base, workdir, log, binary, remote=remote)
    if remote is not None:  # its batch timings, or a one-line refusal (tune_screen.screen_curve)
        screener.curve = screen_curve(remote.original, remote.stats(), args.url)
        log(f"{args.url}: batch timings known for sizes {min(screener.curve)}..{max(screener.curve)}: the screen "
            "predicts the dynamic batcher on them")  # fmt: skip
    budget_s = 60 * args.budget_minutes
    deadline = screener.started + budget_s
    default = grid[0]
    try:
        first = screener(default, SCREEN_FIRST)
        visit_s = screener.elapsed()
        if not first:
            return None, screener, facts
        # One visit per configuration, each as long as the default's (a fresh server, the warm-up, SCREEN_FIRST
        # measurements): one rung, no halving after it, since a later rung would pay a server's start and a warm-up
        # for each measurement it adds.
        count = screen_count(len(grid), args.max_candidates, budget_s, visit_s)
        candidates, units = grid[:count], count * SCREEN_FIRST
        log(
            f"the default's screening took {visit_s:.0f} s ({SCREEN_FIRST} measurements on a fresh server): the "
            f"budget pays for {count} configurations, {units} measurements"
        )
        outcome = _halve(candidates, screener, units, deadline, first, SCREEN_FIRST)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    measurements = {c.label(): rows for c, rows in screener.rows.items()}
    _close(facts, watch, remote, default_search_s=round(visit_s, 1),
           screen={"window_s": SCREEN_WINDOW_S, "measurements": measurements})  # fmt: skip
    return outcome, screener, facts


def budget_stop(deadline: float, searched: Collection[Candidate]) -> Callable[[], bool]:
    """The search's stop: the budget's end (time.monotonic() past `deadline`), once `searched` holds the default and
    one other configuration. sized_search pays for that comparison even when one search outlasts the budget; cut
    after the default alone, a run compared nothing and still said "no configuration measured better" (seen: a
    one-minute budget on busy cores, the default's search 111 s). Later searches stop at the deadline."""
    return lambda: len(searched) >= 2 and time.monotonic() > deadline


def sized_search(
    grid: list[Candidate],
    budget_s: float,
    search_s: float,
    max_count: int | None,
    first: int = tune_search.FIRST_EFFORT,
) -> tuple[int, list[Candidate], list[tune_search.Rung]]:
    """The searches the budget pays for at the measured time of one (the default's: the slowest kind, at the lowest
    rates), the configurations that fit a complete schedule with `first` units each in the first rung, and its rungs.
    At least the default and one other."""
    units = max(2, math.floor(budget_s / max(search_s, 1.0)))
    count = min(len(grid), tune_search.max_candidates(units, first=first), max_count or MAX_CANDIDATES)
    candidates = grid[: max(count, 1)]
    return units, candidates, tune_search.schedule(len(candidates), units, first=first)
