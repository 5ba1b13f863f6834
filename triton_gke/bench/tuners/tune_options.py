"""bench tune's options, their checks (shared with bench compare-tuners), the load plan and the variant tuned.
Split from tune.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from triton_gke.bench import command
from triton_gke.bench.plans.load_plan import LoadPlan, PlanError
from triton_gke.bench.plans.slo_search import RateLadder, SloCriteria
from triton_gke.bench.runners import runner

if TYPE_CHECKING:
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings


PROG = "triton-gke bench tune"
BUDGET_RANGE = (1.0, 600.0)  # minutes: under one there is no rate search, over 10 h the options are a mistake
MAX_CANDIDATES = 64
SEARCHES = ("open-loop", "screen")


OUT_PREFIX = "tune-"  # --out's default: results/bench/tune-<stack>-<date>


def parser() -> command.BenchParser:
    p = command.BenchParser(
        prog=PROG,
        description="Search one variant's serving configuration (batcher delay, batch sizes, instances; ONNX "
        "Runtime threads on the CPU twin) for the most open-loop capacity at the stack's SLO, on the CPU twin.",
        epilog="Exit 0 done, 1 nothing could be measured, 2 bad input, 128+N stopped by signal N.",
    )
    p.add_stack("variant, SLO and settings")
    p.add_variant("the variant to tune")
    p.add_argument(
        "--search",
        choices=SEARCHES,
        default="open-loop",
        help="open-loop: rank by open-loop rate searches (Locust, minutes each); screen: by closed-loop perf_analyzer "
        "measurements and the open-loop capacity a queue model predicts from them (~20 s each; CPU twin: a batch "
        "gains nothing there, which the model assumes). Default open-loop",
    )
    p.add_argument("--budget-minutes", type=float, default=20.0, help="time for the search (default 20)")
    p.add_argument("--max-candidates", type=int, help="at most this many configurations, the default included")
    p.add_argument(
        "--seed",
        type=int,
        help="seed of the random order the space is searched in (default: from the run's start time; tune.json "
        "records it)",
    )
    add_search_options(p, start_rps=8.0, first="the first search")
    p.add_out(OUT_PREFIX)
    p.add_build_dir()
    p.add_argument("--write-stack", action="store_true", help="set the winner's keys in Pulumi.<stack>.yaml")
    p.add_argument(
        "--url",
        help="tune this running Triton (HOST:PORT of its HTTP endpoint, started with --model-control-mode=explicit) "
        "by loading each configuration through its model-control API, instead of starting the CPU twin",
    )
    p.add_argument("--grpc-url", help="with --url: HOST:PORT of its gRPC endpoint (without it gRPC is not tried)")
    return p


def add_search_options(p: argparse.ArgumentParser, *, start_rps: float, first: str) -> None:
    """The options of a rate search, checked by check_search_args (shared with bench compare-tuners)."""
    p.add_argument("--step-seconds", type=float, default=4.0, help="measured seconds per step (default 4)")
    p.add_argument("--start-rps", type=float, default=start_rps, help=f"first request rate of {first} ({start_rps:g})")
    p.add_argument("--max-rps", type=float, default=500.0, help="highest request rate a search tries (500)")
    p.add_argument("--min-requests", type=int, default=40, help="requests a passing step needs (default 40)")


def check_args(args: argparse.Namespace) -> None:
    low, high = BUDGET_RANGE
    if not low <= args.budget_minutes <= high:  # NaN and infinities fail this too
        raise runner.BenchError(f"--budget-minutes {args.budget_minutes:g}: expected minutes from {low:g} to {high:g}")
    if args.max_candidates is not None and not 1 <= args.max_candidates <= MAX_CANDIDATES:
        raise runner.BenchError(f"--max-candidates {args.max_candidates}: expected 1 to {MAX_CANDIDATES}")
    check_search_args(args, check_out_folder)
    for option, value in (("--url", args.url), ("--grpc-url", args.grpc_url)):
        if value is not None:
            try:
                runner.split_saddr(value.removeprefix("http://"))
            except runner.BenchError:
                raise runner.BenchError(f"{option} {value[:80]!r}: expected host:port (e.g. 127.0.0.1:8000)") from None
    if args.grpc_url is not None and args.url is None:
        raise runner.BenchError("--grpc-url: only with --url (the CPU twin's gRPC address is the tuner's own)")


def check_search_args(args: argparse.Namespace, out_check: Callable[[Path], None] | None = None) -> None:
    """The options of a rate search and of where it builds and writes (shared with bench compare-tuners, which
    checks --out its own way: out_check None)."""
    if not 1.0 <= args.step_seconds <= 600.0:
        raise runner.BenchError(f"--step-seconds {args.step_seconds:g}: expected a number from 1 to 600")
    for option, value in (("--start-rps", args.start_rps), ("--max-rps", args.max_rps)):
        if not 0.1 <= value <= 100_000:
            raise runner.BenchError(f"{option} {value:g}: expected a rate from 0.1 to 100000 requests/s")
    if args.start_rps > args.max_rps:  # as `bench` refuses it: the search would start above its own ceiling
        raise runner.BenchError(f"--start-rps {args.start_rps:g} / --max-rps {args.max_rps:g}: expected start <= max")
    if args.min_requests < 1:
        raise runner.BenchError(f"--min-requests {args.min_requests}: expected at least 1 request per passing step")
    runner.refuse_empty_paths(args, "--out", "--build-dir")  # taken as text: Path('') would already be '.'
    args.out = Path(args.out) if args.out is not None else None
    args.build_dir = Path(args.build_dir)
    runner.check_writable(args.build_dir, "--build-dir")  # the twins are built there before any measurement
    if args.out is not None and out_check is not None:
        out_check(args.out)


def check_out_folder(out: Path) -> None:
    """A tuning writes README.md, tune.json, results.json and records/ into --out: only into a new or empty folder,
    or over an earlier tuning's (it holds tune.json), never over someone else's files (`--out .`, `--out docs`)."""
    if out.is_dir() and any(out.iterdir()) and not (out / "tune.json").is_file():
        raise runner.BenchError(f"--out {out}: a folder holding other files than a tuning's; choose a new one")


def load_plan(args: argparse.Namespace, settings: StackSettings, start: float | None = None) -> LoadPlan:
    """One short rate search (no closed-loop phase): the bench's, climbing x1.5 and bisected to 10 %."""
    slo = settings.monitoring.slo
    first = min(max(start or args.start_rps, args.start_rps / 2), args.max_rps)
    try:
        criteria = SloCriteria(float(slo.latency_ms), slo.max_failure_ratio, 2, args.min_requests)
        ladder = RateLadder(first, 1.5, 0.1, args.max_rps, first / 1.5**4)
        return LoadPlan(ladder, 32, args.step_seconds, 1.0, 2.0, criteria, saturation_users=())
    except (ValueError, PlanError) as err:
        raise runner.BenchError(str(err)) from None


def unit_seconds(plan: LoadPlan) -> float:
    """A rate search's length guessed before any ran (the warm-up, ~10 steps: the bench's sandbox runs took 9-14 for
    a whole search, a share of the server's restart): only to refuse a budget too short for one and to estimate
    progress until the default's search is timed. At 3-6 requests/s here a search took ~2.3 min, twice the guess."""
    return plan.warmup_s + 10 * (plan.settle_s + plan.step_s + 1) + 10


def pick_variant(name: str | None, settings: StackSettings) -> VariantSettings:
    from triton_gke.settings.serving import reads_small_batch_keys

    chosen = name or settings.capacity.variant
    deployed = {v.name: v for v in settings.model_repo.variants}
    if chosen not in deployed:
        raise runner.BenchError(
            f"--variant {chosen[:80]!r}: not deployed by the stack (deployed: {', '.join(deployed)})"
        )
    if reads_small_batch_keys(deployed[chosen]):
        raise runner.BenchError(
            f"--variant {chosen}: its batch and instances come from modelSmallBatchSize and "
            "modelSmallBatchInstanceCount, which the tuner does not search; tune a variant that reads modelMaxBatchSize"
        )
    return deployed[chosen]
