"""triton-gke bench: the measure-and-tune benchmark of a stack's model variants.

    triton-gke bench [--stack dev] [--target sandbox|stack] [--variants original trt_int8] [--slo-ms 100]
                   [--repeats 2] [--step-seconds 6] [--start-rps 2] [--max-users 32] [--out DIR] [--record]

Writes results.csv, summary.csv, cost.csv, results.json, README.md and plots into --out (default
results/bench/<stack>-<date>/), and the run's capacity records into its records/ (--record: also into
capacity/records/; bench/reports/record.py). Bad input: one line on stderr, exit 2. See bench/runners/runner.py for the
procedure and the two targets, bench/plans/slo_search.py for the search rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from triton_gke.bench import command
from triton_gke.bench.metrics import conditions, cost, machine
from triton_gke.bench.plans.load_plan import LoadPlan, PlanError
from triton_gke.bench.plans.results import BenchRun
from triton_gke.bench.plans.slo_search import RateLadder, SloCriteria
from triton_gke.bench.reports import record, report
from triton_gke.bench.runners import runner
from triton_gke.capacity.records import RECORDS_DIR
from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.loadtest.arrivals import MAX_RATE  # the locustfile's own cap on rates (pure module: no Locust needed)

if TYPE_CHECKING:
    from triton_gke.settings.values import StackSettings

# (first rate, cap, concurrency bound) per target. 2 CPU cores run ResNet-50 at ~25-56 images/s: the
# climb starts at 4 requests/s (and comes down if even that fails). A T4 reaches 250-2,300 RPS
# (reference tutorial): start at 20, cap at 5,000; 1,000 users keep up with ~2,000 RPS at 500 ms each.
LADDERS = {"sandbox": (4.0, 500.0, 32), "stack": (20.0, 5000.0, 1000)}
SATURATION_USERS = {"sandbox": (1, 2, 4, 8, 16), "stack": (8, 16, 32, 64, 128, 256, 512)}


def _names(values: list[str] | None) -> tuple[str, ...]:
    """Names given space- or comma-separated."""
    return tuple(n.strip() for v in values or [] for n in v.split(",") if n.strip())


def _users(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(u) for u in text.split(",")) if text.strip() else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None


def parser() -> command.BenchParser:
    p = command.BenchParser(
        prog="triton-gke bench",
        description="Measure-and-tune benchmark of the stack's model variants.",
        epilog="Also: triton-gke bench record (capacity records from a run's results.json), triton-gke bench report "
        "(re-render a run from its results.json), triton-gke bench pa-rates (perf_analyzer at fixed rates), "
        "triton-gke bench tune (search the serving configuration), triton-gke bench model-analyzer (Triton Model "
        "Analyzer's search), triton-gke bench compare-tuners (their picks side by side); "
        "each with --help. Exit 0 measured, 1 no variant could be measured, 2 bad input, 128+N stopped by signal N.",
    )
    p.add_stack("variants, SLO and prices")
    p.add_argument(
        "--target",
        choices=("sandbox", "stack"),
        default="sandbox",
        help="sandbox: local tritonserver on the CPU twins; stack: the deployed stack",
    )
    p.add_argument("--variants", nargs="+", help="subset of the stack's variants (default: all deployed)")
    p.add_argument(
        "--uint8",
        nargs="*",
        help="sandbox: also bench these variants with the other input type, UINT8 or FP32 (default: original, when "
        "it is among the variants benched; none: --uint8)",
    )
    p.add_argument("--slo-ms", type=float, help="p95 objective in ms (default: the stack's sloLatencyMs)")
    p.add_argument(
        "--max-failure-pct", type=float, help="tolerated failed requests, %% (default: sloMaxFailurePercent)"
    )
    p.add_argument("--repeats", type=int, default=2, help="ramps per variant (default 2)")
    p.add_argument("--step-seconds", type=float, default=6.0, help="measured seconds per step (default 6)")
    p.add_argument("--settle-seconds", type=float, default=2.0, help="unmeasured seconds after each user change")
    p.add_argument("--warmup-seconds", type=float, default=4.0, help="the discarded first step (default 4)")
    p.add_argument("--start-rps", type=float, help="first request rate of the search (sandbox 4, stack 20)")
    p.add_argument("--max-rps", type=float, help="highest request rate the search tries (sandbox 500, stack 5000)")
    p.add_argument("--growth", type=float, default=1.5, help="factor between climbing rates (default 1.5)")
    p.add_argument("--precision", type=float, default=0.05, help="bisection ends within this fraction (0.05)")
    p.add_argument("--max-users", type=int, help="users bounding requests in flight (sandbox 32, stack 1000)")
    p.add_argument("--arrival", choices=("poisson", "constant"), default="poisson", help="arrival process (poisson)")
    p.add_argument(
        "--saturation-users",
        type=_users,
        help="closed-loop user counts for the saturation phase, rising ('' skips it; sandbox 1,2,4,8,16)",
    )
    p.add_argument("--stop-after", type=int, default=2, help="failing steps in a row that make a rate fail (default 2)")
    p.add_argument(
        "--min-requests", type=int, default=40, help="requests a passing step needs (default 40: p95 is not the max)"
    )
    p.add_argument("--protocol", choices=("http", "grpc"), help="default: the stack's locustProtocol")
    p.add_argument("--no-perf-analyzer", action="store_true", help="skip perf_analyzer's own search (cross-check)")
    p.add_argument("--raw-seconds", type=float, default=3.0, help="seconds per raw ONNX Runtime measurement")
    p.add_argument("--saddr", help="stack target: Triton host:port instead of the stack's httpEndpoint output")
    p.add_argument("--metrics-url", help="stack target: Triton metrics URL (batch size, GPU use), e.g. port-forwarded")
    p.add_out("")  # as text: --out '' is refused, not taken as the current folder
    p.add_build_dir(twins=True, as_path=True)
    p.add_argument(
        "--record",
        action="store_true",
        help="also write the capacity records (OUT/records/, always written) into --records-dir: revision + 1",
    )
    p.add_argument("--records-dir", type=Path, default=RECORDS_DIR, help="the records --record updates")
    record.add_guard_options(p)
    return p


GROWTH_RANGE = (1.05, 10.0)  # the factors RateLadder accepts (bench/plans/slo_search.py)
MIN_RATE = 0.1  # requests/s: one request in 10 s; below it a step of minutes holds no request at all
# (lowest, highest) of each float option: finite, and a run of hours at most (MAX_HOURS bounds the whole plan).
FLOAT_RANGES = {
    "step_seconds": (1.0, 600.0),
    "settle_seconds": (0.0, 600.0),
    "warmup_seconds": (1.0, 600.0),
    "raw_seconds": (0.5, 600.0),
    "slo_ms": (1.0, float(MAX_SLO_LATENCY_MS)),  # contracts/slo.py, the stack's sloLatencyMs bound
    "max_failure_pct": (0.0, 99.0),
}
MAX_HOURS = 24.0  # a longer planned run is a mistake in the options, not a benchmark


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_args(args: argparse.Namespace, out: Path) -> None:
    """Refuse option values that cannot work, before the stack file is read or anything starts."""
    for option, value in (("--start-rps", args.start_rps), ("--max-rps", args.max_rps)):
        if value is not None and not (math.isfinite(value) and value <= MAX_RATE):
            raise runner.BenchError(f"{option} {value:g}: expected a rate of at most {MAX_RATE:g} requests/s")
        if value is not None and 0 < value < MIN_RATE:  # 0 and below: RateLadder's "expected 0 < start <= max"
            raise runner.BenchError(f"{option} {value:g}: expected a rate of at least {MIN_RATE:g} requests/s")
    low, high = GROWTH_RANGE
    if not low <= args.growth <= high:  # NaN fails this too
        raise runner.BenchError(f"--growth {args.growth:g}: expected a factor from {low:g} to {high:g}")
    for dest, (low, high) in FLOAT_RANGES.items():
        value = getattr(args, dest)
        if value is not None and not low <= value <= high:  # NaN and infinities fail this too
            raise runner.BenchError(f"{_option(dest)} {value:g}: expected a number from {low:.10g} to {high:.10g}")
    _check_target_options(args)
    runner.refuse_empty_paths(args, "--out")
    _check_out_folder(out)
    runner.check_writable(out, "--out")
    runner.check_writable(args.build_dir, "--build-dir")


def _check_out_folder(out: Path) -> None:
    """The bench writes README.md, results.json, CSVs and plots into --out: only into a new or empty folder, or over
    an earlier bench run's (it holds results.json), never over someone else's files (`--out .` replaced the
    project's own README.md: found by the red team of issue 45)."""
    if out.is_dir() and any(out.iterdir()) and not (out / "results.json").is_file():
        raise runner.BenchError(f"--out {out}: a folder holding other files than a bench run's; choose a new one")


def _check_target_options(args: argparse.Namespace) -> None:
    """--saddr and --metrics-url address a deployed Triton: refused with the sandbox (which starts its own), and
    checked for syntax before the stack file is read (reachability: prepare())."""
    if args.target == "sandbox":
        for option, value in (("--saddr", args.saddr), ("--metrics-url", args.metrics_url)):
            if value is not None:
                raise runner.BenchError(f"{option}: only with --target stack (the sandbox serves its own Triton)")
        return
    if args.saddr is not None:
        runner.split_saddr(args.saddr)
    if args.metrics_url is not None:
        _check_metrics_url(args.metrics_url)


def _check_metrics_url(url: str) -> None:
    # Triton serves Prometheus metrics over plain HTTP at /metrics, port 8002 by default
    # (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html).
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:
        ok = False
    if not ok or any(c.isspace() for c in url):
        raise runner.BenchError(f"--metrics-url {url[:80]!r}: expected http://host:port/metrics")


def bench_config(args: argparse.Namespace, settings: StackSettings) -> runner.BenchConfig:
    slo = settings.monitoring.slo
    failure_pct = args.max_failure_pct if args.max_failure_pct is not None else 100 * slo.max_failure_ratio
    try:
        criteria = SloCriteria(
            slo_ms=args.slo_ms if args.slo_ms is not None else float(slo.latency_ms),
            max_failure_ratio=failure_pct / 100,
            stop_after=args.stop_after,
            min_requests=args.min_requests,
        )
        start, cap, users = LADDERS[args.target]
        start = args.start_rps if args.start_rps is not None else start
        ladder = RateLadder(
            start=start,
            growth=args.growth,
            precision=args.precision,
            max_rate=args.max_rps if args.max_rps is not None else max(cap, start),
            floor=start / args.growth**4,
        )
        plan = LoadPlan(
            ladder=ladder,
            users=args.max_users if args.max_users is not None else users,
            step_s=args.step_seconds,
            settle_s=args.settle_seconds,
            warmup_s=args.warmup_seconds,
            criteria=criteria,
            arrival=args.arrival,
            saturation_users=SATURATION_USERS[args.target] if args.saturation_users is None else args.saturation_users,
        )
    except (ValueError, PlanError) as err:
        raise runner.BenchError(str(err)) from None
    if args.repeats < 1 or args.raw_seconds <= 0:
        raise runner.BenchError("--repeats must be >= 1 and --raw-seconds > 0")
    variants, uint8 = _names(args.variants), _uint8(args, settings)
    _check_duration(plan, args.repeats, len(variants or settings.model_repo.variants) + len(uint8))
    return runner.BenchConfig(
        stack=args.stack,
        target=args.target,
        plan=plan,
        repeats=args.repeats,
        protocol=args.protocol or settings.load_test.protocol,
        variants=variants,
        uint8=uint8,
        perf_analyzer=not args.no_perf_analyzer,
        raw_seconds=args.raw_seconds,
        saddr=args.saddr,
        metrics_url=args.metrics_url,
        build_dir=args.build_dir,
    )


def _uint8(args: argparse.Namespace, settings: StackSettings) -> tuple[str, ...]:
    """The variants to copy with the other input type: --uint8 as given, else `original` when it is benched (a
    run of other variants alone gets no copy it did not ask for)."""
    if args.target != "sandbox":
        return ()
    if args.uint8 is not None:
        return _names(args.uint8)
    deployed = {v.name for v in settings.model_repo.variants}
    chosen = _names(args.variants) or tuple(deployed)
    return ("original",) if "original" in chosen and "original" in deployed else ()


def _check_duration(plan: LoadPlan, repeats: int, models: int) -> None:
    """The longest the Locust runs could take (LoadPlan.max_duration_s per ramp): refused above MAX_HOURS."""
    hours = plan.max_duration_s() * repeats * models / 3600
    if not hours <= MAX_HOURS:
        raise runner.BenchError(
            f"--step-seconds/--settle-seconds/--repeats: the plan could run {hours:,.1f} h ({models} models x "
            f"{repeats} repeats), over {MAX_HOURS:g} h; lower them or bench fewer --variants"
        )


def prepare(config: runner.BenchConfig, settings: StackSettings) -> tuple[list[runner.Model], runner.Serve]:
    """The models to bench and how to serve each one, for the chosen target."""
    deployed = settings.model_repo.variants
    chosen = runner.select_variants(deployed, config.variants)
    if config.target == "stack":
        saddr = config.saddr or runner.endpoint_from_outputs(runner.stack_outputs(config.stack))
        runner.check_reachable(saddr, config.protocol)  # before any Locust starts
        return [runner.read_model(v, None) for v in chosen], runner.stack_serve(saddr, config.metrics_url)
    variants = chosen + runner.payload_copies(deployed, config.uint8)
    cpu_repo = runner.build_sandbox_repository(settings.model_repo, variants, config.build_dir / config.stack)
    models = [runner.read_model(v, cpu_repo / v.name) for v in variants]
    return models, lambda name: runner.sandbox_server(cpu_repo, name)


def settings_record(config: runner.BenchConfig) -> dict[str, Any]:
    plan = config.plan
    return {
        **dataclasses.asdict(plan.criteria),
        **{f"ladder_{k}": v for k, v in dataclasses.asdict(plan.ladder).items()},
        "users": plan.users,
        "arrival": plan.arrival,
        "saturation_users": list(plan.saturation_users),
        "step_s": plan.step_s,
        "settle_s": plan.settle_s,
        "warmup_s": plan.warmup_s,
        "repeats": config.repeats,
        "protocol": config.protocol,
    }


def costs(settings: StackSettings, summaries: list[Any], target: str) -> tuple[list[dict], list[dict]]:
    prices = cost.pricings(settings)
    measured = {s.variant: s.max_rps for s in summaries}
    sizes = {s.variant: s.bytes_per_request for s in summaries}
    label = "measured (CPU twin)" if target == "sandbox" else "measured (stack)"
    return cost.records(cost.cost_rows(prices, measured, sizes, label)), cost.records(prices)


log = command.log


def main(argv: list[str] | None = None) -> int:
    """The bench; SIGINT, SIGTERM or SIGHUP stops every server and Locust it started: one line, exit 128 + signal."""
    return command.run(argv, _bench, stopped="stopped every process the bench started")


def _bench(argv: list[str]) -> int:
    started, stamp = time.monotonic(), datetime.datetime.now().astimezone()
    p = parser()
    args = p.parse_args(argv)
    out = p.default_out(args, stamp)
    check_args(args, out)
    record.check_guard_options(args.record, args.force, args.accept_regression)
    record.check_before_run(args.target, args.saddr, args.record, args.records_dir, out)
    settings = record.stack_settings(args.stack, "--stack")
    config = bench_config(args, settings)
    models, serve = prepare(config, settings)
    facts = {**machine.facts(), "load_start": machine.load_average()}
    _warn_if_busy(facts)
    watch = conditions.Watch()
    before = watch.start()  # the baseline before any server starts (bench/metrics/conditions.py)
    log(f"baseline: raw onnxruntime {before.inferences_per_s:.1f} inferences/s, {_others(before)}")
    outcome = runner.run_all(config, models, serve, log)
    facts["conditions"] = _finish(watch)
    if not outcome.runs:
        print("error: no variant could be measured: " + "; ".join(outcome.failed), file=sys.stderr)
        return 1
    facts["load_end"] = machine.load_average()
    facts["triton"] = "2.51.0 (nvidia-pytriton 0.7.0 wheel)" if config.target == "sandbox" else "the stack's image"
    cost_rows, pricing = costs(settings, outcome.summaries, config.target)
    run = BenchRun(
        command=" ".join(["triton-gke bench", shlex.join(argv)]).strip(),
        stack=args.stack,
        target=config.target,
        started=stamp.isoformat(timespec="seconds"),
        wall_s=time.monotonic() - started,
        settings=settings_record(config),
        machine=facts,
        steps=[row for r in outcome.runs for row in r.rows],
        summaries=outcome.summaries,
        costs=cost_rows,
        pricing=pricing,
        notes=outcome.failed + _notes(facts, config),
    )
    for path in report.write_all(run, out):
        print(path)
    # the capacity records (bench/reports/record.py): OUT/records/ always, --records-dir with --record; a refusal
    # (CapacityError) is one line and exit 2 through command.run, after the report above is written
    in_out, updated, notes = record.write_run_records(
        json.loads(run.to_json()),
        settings,
        out,
        record=args.record,
        records_dir=args.records_dir,
        force=args.force,
        accept_regression=args.accept_regression,
    )
    for written in in_out:
        print(written.path)
    for written in updated:
        log(f"updated {record.describe(written)}")
    for note in notes:
        log(note)
    log(f"done in {run.wall_s / 60:.1f} min")
    return 0


def _warn_if_busy(facts: dict[str, Any]) -> None:
    load = facts.get("load_start")
    if load and load[0] > 0.75 * facts["cores"]:
        log(f"warning: load average {load[0]:.2f} on {facts['cores']} cores: other work will lower the numbers")


def _others(baseline: conditions.Baseline) -> str:
    if baseline.others_pct is None:
        return "other processes: unknown (no /proc/stat)"
    return f"other processes {baseline.others_pct:.0f} % of the machine, steal {baseline.steal_pct:.1f} %"


def _finish(watch: conditions.Watch) -> dict[str, Any]:
    found = watch.finish()
    drift = f"{found.drift:+.0%}" if found.drift is not None else "n/a"
    log(f"baseline after: {found.baseline_after:.1f} inferences/s (drift {drift}); load average {found.load_average}")
    for reason in found.noisy:
        log(f"warning: this run is marked noisy: {reason}")
    return found.to_dict()


def _notes(facts: dict[str, Any], config: runner.BenchConfig) -> list[str]:
    found = facts.get("conditions") or {}
    notes = []
    if found.get("noisy"):
        notes.append(
            "**This run is marked NOISY**: " + "; ".join(found["noisy"]) + ". Its figures are lower than a quiet "
            "machine's; its capacity records say so, and `--record` writes them only with `--force`."
        )
    for key in ("load_start", "load_end"):
        load = facts.get(key)
        if load and load[0] > 0.75 * facts["cores"]:
            notes.append(
                f"{key.replace('_', ' at ')}: load average {load[0]:.2f} on {facts['cores']} cores: "
                "other processes competed for the cores; the numbers are lower than on an idle machine."
            )
    if config.target == "sandbox":
        notes.append(
            "Locust runs on the same cores as the server (its CPU use is in the machine CPU column), as the "
            "perf_analyzer check does; on the stack, Locust runs on its own CPU pool."
        )
    return notes


if __name__ == "__main__":
    sys.exit(main())
