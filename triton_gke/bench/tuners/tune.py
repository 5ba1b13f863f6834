"""triton-gke bench tune: search one variant's serving configuration for the most capacity at the stack's SLO.

    triton-gke bench tune [--stack dev] [--variant original] [--budget-minutes 20] [--max-candidates N]
                          [--out DIR] [--write-stack] [--url HOST:PORT [--grpc-url HOST:PORT]]

--url tunes a Triton the tuner did not start (the sandbox's, a cluster's through a port-forward), loading each
candidate into it through its model-control API (bench/runners/remote.py); it needs --model-control-mode=explicit, and a
server that refuses loads is refused in one line (exit 2) before anything is measured.

On the CPU twin in the local sandbox (bench/runners/runner.py: a fresh tritonserver per measurement, real Locust), each
candidate's objective is the bench's own open-loop rate search: the achieved rate at the highest offered rate whose p95
met sloLatencyMs (runner.capacity). The candidates vary the stack's batching keys (modelMaxQueueDelayUs,
modelPreferredBatchSize, modelMaxBatchSize, modelInstanceCount) and, on the twin only, ONNX Runtime's intra-op threads;
each is checked through the settings layer first, so every `pulumi config set` line printed is one the stack accepts.
The stack's default configuration is always one of them and is measured to the end, beside the winner
(bench/tuners/tune_search.py: successive halving within the budget). The budget is sized from the timed first search of
the default; the best measured is recommended only when it beat the default beyond noise (tune_search.py).

Writes into --out (default results/bench/tune-<stack>-<date>/): tune.json (every candidate, every measurement, the
schedule, the machine's conditions), README.md, results.json and records/ (the winner's capacity record, as
`make bench` writes them). --write-stack sets the winner's keys in Pulumi.<stack>.yaml, keeping its comments.
Bad input: one line on stderr, exit 2, nothing started.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench import command
from triton_gke.bench.metrics import conditions, machine
from triton_gke.bench.plans.load_plan import LoadPlan, PlanError
from triton_gke.bench.plans.results import BenchRun
from triton_gke.bench.plans.slo_search import RateLadder, SloCriteria, spread
from triton_gke.bench.reports import plots, record
from triton_gke.bench.runners import runner
from triton_gke.bench.runners.remote import Remote, RemoteError, current, edited
from triton_gke.bench.tuners import tune_search
from triton_gke.capacity.records import CapacityError

if TYPE_CHECKING:
    from triton_gke.bench.tuners.tune_search import Outcome
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings

PROG = "triton-gke bench tune"
BUDGET_RANGE = (1.0, 600.0)  # minutes: under one there is no rate search, over 10 h the options are a mistake
MAX_CANDIDATES = 64
SEARCHES = ("open-loop", "screen")
# The stack keys of a candidate (Pulumi.yaml): every variant but trt_int8_bs16_count4 reads the batch and instance
# keys, every variant the queue delay (settings/serving.py).
STACK_KEYS = ("modelMaxQueueDelayUs", "modelPreferredBatchSize", "modelMaxBatchSize", "modelInstanceCount")
# ONNX Runtime's thread options under the names Triton's onnxruntime backend reads from a model's parameters
# ("Model Config Options": intra_op_thread_count, inter_op_thread_count; 0 = ONNX Runtime's default,
# https://github.com/triton-inference-server/onnxruntime_backend#model-config-options). The CPU twin's model.py reads
# the same names (model_repo/twin_model.py). Only the intra-op count is searched: the inter-op count "is ignored" under
# sequential execution (same README), the twin's and the backend's default mode.
INTRA_PARAMETER = "intra_op_thread_count"


@dataclass(frozen=True)
class Candidate:
    """A serving configuration: the four stack keys, ONNX Runtime's intra-op threads on the twin (None: the twin's
    own choice, cores / instances), and what Model Analyzer cannot search, the client's side (issue 35): the protocol
    requests travel over (http or grpc) and the payload (other_payload: the variant's other input type, UINT8 for an
    FP32 variant, the bench's payload copy, runner.payload_copies: 150,528 instead of 602,112 bytes per image)."""

    max_queue_delay_us: int
    preferred_batch_size: int
    max_batch_size: int
    instance_count: int
    intra_op_threads: int | None = None
    protocol: str = "http"
    other_payload: bool = False

    @classmethod
    def of(cls, variant: VariantSettings) -> Candidate:
        return cls(variant.max_queue_delay_us, variant.preferred_batch_size, variant.max_batch_size,
                   variant.instance_count)  # fmt: skip

    def stack_values(self) -> dict[str, int]:
        values = (self.max_queue_delay_us, self.preferred_batch_size, self.max_batch_size, self.instance_count)
        return dict(zip(STACK_KEYS, values, strict=True))

    def label(self) -> str:
        threads = "auto" if self.intra_op_threads is None else str(self.intra_op_threads)
        client = (", over gRPC" if self.protocol == "grpc" else "") + (", other payload" if self.other_payload else "")
        return (
            f"delay {self.max_queue_delay_us} us, batch {self.preferred_batch_size}/{self.max_batch_size}, "
            f"{self.instance_count} instance(s), {threads} intra-op threads{client}"
        )

    def client_lines(self, variant: VariantSettings) -> list[str]:
        """The client-side choices of the candidate, which no `pulumi config set` line makes."""
        lines = ["clients: send over gRPC (Triton's port 8001) instead of HTTP"] if self.protocol == "grpc" else []
        if self.other_payload:
            other = "FP32" if variant.uint8_input else "UINT8"
            lines.append(
                f"clients: send {other} images; the stack serves that input for the variants listed in modelUint8Input"
            )
        return lines

    def apply(self, variant: VariantSettings) -> VariantSettings:
        return dataclasses.replace(
            variant,
            max_queue_delay_us=self.max_queue_delay_us,
            preferred_batch_size=self.preferred_batch_size,
            max_batch_size=self.max_batch_size,
            instance_count=self.instance_count,
        )


def candidate_grid(default: Candidate, cores: int) -> list[Candidate]:
    """The default first, then the changes most likely to pay on a CPU twin near its SLO, each knob early (a short
    budget measures only the first few: on a slow host 20 minutes pay for two): no batching at all, a shorter
    batcher delay (it is pure waiting below saturation), smaller batches (compute grows with the batch on CPU), two
    instances (one thread each), the intra-op threads; then more delays and combinations. Duplicates of the default
    are dropped."""
    d = default
    grid = [
        d,
        # No batching: Model Analyzer's pick, which beat every other in results/bench/tuners-dev-2026-12-02 (a batch
        # of 4 costs about 4 single images on 2 CPU cores, so near the SLO waiting for one only adds latency).
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1),
        dataclasses.replace(d, max_queue_delay_us=5000),
        # What Model Analyzer cannot search (issue 35): the client's protocol and payload, on no batching.
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, protocol="grpc"),
        dataclasses.replace(d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, other_payload=True),
        # Model Analyzer's instance sweep on its pick: two instances of one thread each.
        dataclasses.replace(
            d, max_queue_delay_us=0, preferred_batch_size=1, max_batch_size=1, instance_count=2, intra_op_threads=1
        ),
        dataclasses.replace(d, max_queue_delay_us=2000, preferred_batch_size=4, max_batch_size=8),
        dataclasses.replace(d, max_queue_delay_us=5000, instance_count=2, intra_op_threads=max(1, cores // 2)),
        dataclasses.replace(d, max_queue_delay_us=0),
        dataclasses.replace(d, max_queue_delay_us=5000, intra_op_threads=1),
        dataclasses.replace(d, max_queue_delay_us=10000),
        dataclasses.replace(d, max_queue_delay_us=1000, preferred_batch_size=2, max_batch_size=4),
        dataclasses.replace(d, max_queue_delay_us=10000, preferred_batch_size=8, max_batch_size=16),
        dataclasses.replace(d, max_queue_delay_us=2000, instance_count=2, preferred_batch_size=4, max_batch_size=8),
    ]
    unique: list[Candidate] = []
    for candidate in grid:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def overrides(candidate: Candidate, project: str) -> dict[str, str]:
    """The candidate's keys as the engine passes config: 'project:key' -> text."""
    return {f"{project}:{key}": str(value) for key, value in candidate.stack_values().items()}


def accepted(candidates: Sequence[Candidate], stack: str, log: runner.Log) -> list[Candidate]:
    """The candidates the stack accepts with their keys set (settings.from_stack_file: the SLO knobs' order
    modelMaxQueueDelayUs < autoscaleQueueTimeMs < sloQueueTimeMs < sloLatencyMs, preferred <= max batch, the GPU
    memory bound); each refused one is logged with the stack's own reason."""
    kept = []
    for candidate in candidates:
        refusal = stack_refusal(candidate, stack)
        if refusal:
            log(f"  skipped {candidate.label()}: the stack refuses it: {refusal}")
            continue
        kept.append(candidate)
    return kept


def stack_refusal(candidate: Candidate, stack: str) -> str | None:
    """The stack's one-line refusal of the candidate's keys, or None when it accepts them."""
    from triton_gke.settings import ConfigError, from_stack_file
    from triton_gke.settings.schema import config_schema

    try:
        from_stack_file(stack, overrides(candidate, config_schema()[0]))
    except ConfigError as err:
        return str(err)
    return None


# ---------------------------------------------------------------- options


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


# ---------------------------------------------------------------- the twin of each candidate


def twin_folder(base: Path, candidate: Candidate, root: Path) -> Path:
    """A copy of the built twin folder `base` under root/ with the candidate's config.pbtxt (ONNX hard-linked)."""
    from triton_gke.model_repo.cpu_twin import edited_copy

    def apply(config: Any) -> None:
        config.max_batch_size = candidate.max_batch_size
        del config.dynamic_batching.preferred_batch_size[:]
        config.dynamic_batching.preferred_batch_size.append(candidate.preferred_batch_size)
        config.dynamic_batching.max_queue_delay_microseconds = candidate.max_queue_delay_us
        config.instance_group[0].count = candidate.instance_count
        if candidate.intra_op_threads is not None:
            config.parameters[INTRA_PARAMETER].string_value = str(candidate.intra_op_threads)

    return edited_copy(base, root / base.name, apply, f"bench tune candidate: {candidate.label()}")


class TuneProgress(runner.Progress):
    """The bench's progress line, naming the candidate being measured."""

    label: str = ""

    def step(self, where: str, record: dict, verdict: str) -> None:
        super().step(f"[{self.label}] {where}", record, verdict)


@dataclass
class Measurer:
    """measure(candidate, effort) for the search: `effort` rate searches on a fresh server for the candidate,
    each the achieved capacity at the SLO (0 where no rate met it). Later searches start near what the candidate's
    earlier ones found (0.7 x their median), so they spend their steps where the answer is."""

    args: argparse.Namespace
    settings: StackSettings
    variant: VariantSettings
    base: Path  # the built twin folder of the variant
    workdir: Path
    progress: TuneProgress
    log: runner.Log
    runs: dict[Candidate, list[runner.VariantRun]] = dataclasses.field(default_factory=dict)
    copy: VariantSettings | None = None  # the variant's payload copy (runner.payload_copies), for other_payload
    remote: Remote | None = None  # --url: a running server, each candidate loaded through its model-control API

    def __call__(self, candidate: Candidate, effort: int) -> list[float]:
        from triton_gke.sandbox.triton import TritonStartError

        found = [runner.capacity(r) for run in self.runs.get(candidate, []) for r in run.results]
        earlier = spread(found)
        try:
            plan = load_plan(self.args, self.settings, 0.7 * earlier.median if earlier else None)
        except runner.BenchError:  # a lower start the step limits cannot serve: start where the first search did
            plan = load_plan(self.args, self.settings)
        config = runner.BenchConfig(
            stack=self.args.stack, target="sandbox", plan=plan, repeats=effort,
            protocol=candidate.protocol, variants=(self.variant.name,), uint8=(), perf_analyzer=False,
            build_dir=self.args.build_dir,
        )  # fmt: skip
        repo = self.workdir / "candidate"  # one server at a time: the folder is removed after each measurement
        self.progress.label = candidate.label()
        self.log(f"{candidate.label()}: {effort} rate search(es)")
        model, serve = candidate_server(candidate, self.variant, self.base, repo, self.copy, self.remote)
        try:
            run = runner.bench_variant(model, config, serve, self.workdir, self.log, self.progress)
        except (runner.BenchError, TritonStartError, RemoteError) as err:
            self.progress.finished += effort
            self.log(f"  not measured: {str(err).splitlines()[0]}")
            return []
        finally:
            shutil.rmtree(repo, ignore_errors=True)
        self.runs.setdefault(candidate, []).append(run)
        return [runner.capacity(r) or 0.0 for r in run.results]

    def merged(self, candidate: Candidate) -> runner.VariantRun | None:
        runs = self.runs.get(candidate)
        if not runs:
            return None
        return runner.VariantRun(
            runs[0].model,
            [c for r in runs for c in r.records],
            [x for r in runs for x in r.results],
            [row for r in runs for row in r.rows],
            runs[-1].opinion,
            runs[0].ready_s,
        )


def candidate_server(
    candidate: Candidate,
    variant: VariantSettings,
    base: Path,
    repo: Path,
    copy: VariantSettings | None = None,
    remote: Remote | None = None,
) -> tuple[runner.Model, runner.Serve]:
    """The model a candidate is measured on and how its server starts: on the CPU twin, a copy of the built twin
    folder `base` (or of the variant's payload copy beside it, for other_payload) under `repo` with the candidate's
    config.pbtxt, served by a fresh tritonserver; with a running server (remote), the candidate's configuration
    loaded into it through its model-control API."""
    if remote is not None:
        edits = remote_edit(remote.original, candidate)
        return runner.read_model(candidate.apply(variant), None), lambda name: remote.serve(edits, candidate.label())
    served = variant
    if candidate.other_payload:
        served = copy or runner.payload_copies([variant], [variant.name])[0]
        base = base.parent / served.name
    model = runner.read_model(candidate.apply(served), twin_folder(base, candidate, repo))
    return model, lambda name: runner.sandbox_server(repo, name)


# ---------------------------------------------------------------- the screen: closed loop and a queue model

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
                    row = screen_row(result.rps, result.p95_ms, candidate.instance_count, slo)
                    self.rows.setdefault(candidate, []).append(row)
                    found.append(row["predicted_rps"])
                    self.log(
                        f"  [{candidate.label()}] {level.describe()}: {result.rps:.1f} infer/s, p95 "
                        f"{result.p95_ms:.0f} ms: {row['service_ms'] or 'no answer, no'} ms per request, "
                        f"M/D/{candidate.instance_count} p95 <= {slo:g} ms up to {row['predicted_rps']:g} req/s | "
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


def screen_row(infer_per_s: float, p95_ms: float, instances: int, slo_ms: float) -> dict[str, Any]:
    """One closed-loop measurement at a concurrency of `instances` and its prediction: the time per request by
    Little's law (in flight / throughput) and the highest Poisson rate whose M/D/c p95 meets slo_ms (0 when the
    server answered nothing: no time per request to model)."""
    from triton_gke.bench.metrics import queue_model

    service_ms = 1000.0 * instances / infer_per_s if 0 < infer_per_s < math.inf else math.inf
    predicted = queue_model.capacity(service_ms, instances, slo_ms) if 0 < service_ms < math.inf else 0.0
    return {
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


def remote_edit(config: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """The running server's model configuration with the candidate's values (bench/runners/remote.py)."""
    c = candidate
    return edited(config, c.max_queue_delay_us, c.preferred_batch_size, c.max_batch_size, c.instance_count,
                  c.intra_op_threads, INTRA_PARAMETER)  # fmt: skip


def remote_grid(remote: Remote, cores: int, stack: str) -> tuple[Candidate, list[Candidate]]:
    """The running server's own configuration as the default, and the candidates it can serve: not the other payload
    (its model copy is not in that server's repository), gRPC only with --grpc-url."""
    default = Candidate(*current(remote.original, INTRA_PARAMETER))
    grid = [c for c in candidate_grid(default, cores) if not c.other_payload and (c.protocol == "http" or remote.grpc)]
    return default, accepted(grid, stack, log)


# ---------------------------------------------------------------- the stack file


def set_stack_keys(text: str, project: str, values: dict[str, int]) -> str:
    """The stack file's text with `project:key: value` set for each key: an existing line keeps its indentation and
    trailing comment, a missing key is added at the end of the config block, with its indentation. Every other line
    (comments included) stays as it was."""
    lines = text.splitlines(keepends=True)
    for key, value in values.items():
        pattern = re.compile(rf"^(\s+{re.escape(project)}:{re.escape(key)}:[ \t]*)([^#\n]*?)([ \t]+#.*)?(\r?\n)?$")
        for i, line in enumerate(lines):
            match = pattern.match(line)
            if match:
                lines[i] = f"{match[1]}{value}{match[3] or ''}{match[4] or ''}"
                break
        else:
            lines = _add_key(lines, f"{project}:{key}: {value}")
    return "".join(lines)


def _add_key(lines: list[str], entry: str) -> list[str]:
    start = next((i for i, line in enumerate(lines) if re.match(r"^config:\s*(#.*)?$", line)), None)
    if start is None:
        tail = "" if not lines or lines[-1].endswith("\n") else "\n"
        return [*lines, f"{tail}config:\n", f"  {entry}\n"]
    last, indent = start, "  "
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line[0].isspace():
            break  # the next top-level key
        if line.strip() and not line.lstrip().startswith("#"):
            if last == start:
                indent = line[: len(line) - len(line.lstrip())]
            last = i
    if not lines[last].endswith("\n"):
        lines[last] += "\n"
    return [*lines[: last + 1], f"{indent}{entry}\n", *lines[last + 1 :]]


def write_stack(stack: str, candidate: Candidate, current: Candidate) -> Path:
    """Set the keys the candidate changes (those `pulumi_lines` prints) in Pulumi.<stack>.yaml, after the settings
    layer accepted the edited file. A linked stack file is edited where it lies; the file keeps its mode."""
    from triton_gke.contracts.paths import project_dir
    from triton_gke.settings import from_stack_file
    from triton_gke.settings.schema import config_schema
    from triton_gke.settings.stack_file import stack_file_text

    path = Path(os.path.realpath(project_dir() / f"Pulumi.{stack}.yaml"))
    edited = set_stack_keys(stack_file_text(path), config_schema()[0], changed_values(candidate, current))
    handle, temporary = tempfile.mkstemp(prefix=f".Pulumi.{stack}.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(edited)
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        from_stack_file(stack, config_file=Path(temporary))  # the edited file, read as the stack would read it
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def changed_values(candidate: Candidate, current: Candidate) -> dict[str, int]:
    return {k: v for k, v in candidate.stack_values().items() if current.stack_values()[k] != v}


def pulumi_lines(candidate: Candidate, current: Candidate, project: str, stack: str) -> list[str]:
    changed = changed_values(candidate, current)
    return [f"pulumi config set {project}:{key} {value} -s {shlex.quote(stack)}" for key, value in changed.items()]


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
    remote = None
    if args.url:  # a running server: its configuration is the default, candidates are loaded into it
        remote = Remote(args.url.removeprefix("http://"), variant.name, args.grpc_url)
        remote.connect()
        default, grid = remote_grid(remote, conditions.cpu_count(), args.stack)
        base = args.build_dir  # unused: nothing is built or started
    else:
        default = Candidate.of(variant)
        grid = accepted(candidate_grid(default, conditions.cpu_count()), args.stack, log)
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
    if outcome is None or outcome.best is None:
        print("error: the default configuration could not be measured", file=sys.stderr)
        return 1
    if not any(score > 0 for found in outcome.scores.values() for score in found):
        slo = settings.monitoring.slo.latency_ms
        print(f"error: no configuration met p95 <= {slo} ms at any rate tried: nothing to recommend", file=sys.stderr)
        return 1
    report = _report(args, argv, settings, variant, outcome, measurer, facts, stamp, time.monotonic() - started)
    return _finish(args, out, settings, report, outcome, measurer, default)


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


def _capacity(outcome: Outcome[Candidate], candidate: Candidate) -> dict[str, Any]:
    found = spread(outcome.scores.get(candidate, []))
    if found is None:
        return {"median": None, "min": None, "max": None, "searches": 0}
    return {"median": found.median, "min": found.low, "max": found.high, "searches": found.count}


def _report(
    args: argparse.Namespace,
    argv: list[str],
    settings: StackSettings,
    variant: VariantSettings,
    outcome: Outcome[Candidate],
    measurer: Measurer,
    facts: dict[str, Any],
    stamp: datetime.datetime,
    wall_s: float,
) -> dict[str, Any]:
    from triton_gke.settings.schema import config_schema

    best, default, chosen = outcome.best, outcome.reference, outcome.recommended
    assert best is not None
    best_cap, default_cap = _capacity(outcome, best), _capacity(outcome, default)
    ratio = best_cap["median"] / default_cap["median"] if best_cap["median"] and default_cap["median"] else None
    searches = (len(outcome.scores[best]), len(outcome.scores[default]))
    return {
        "command": " ".join([PROG, shlex.join(argv)]).strip(),
        "stack": args.stack,
        "variant": variant.name,
        "slo_ms": settings.monitoring.slo.latency_ms,
        "started": stamp.isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1),
        "budget_minutes": args.budget_minutes,
        "search": args.search,
        "units_spent": outcome.spent,
        "stopped_early": outcome.stopped_early,
        "rungs": [dataclasses.asdict(r) for r in outcome.rungs],
        "candidates": [
            {
                **dataclasses.asdict(c),
                "label": c.label(),
                "default": c == default,
                "capacities": outcome.scores[c],
                "median": outcome.median(c),
            }
            for c in outcome.scores
        ],  # fmt: skip
        "best": {**dataclasses.asdict(best), "label": best.label(), **best_cap},
        "default": {**dataclasses.asdict(default), "label": default.label(), **default_cap},
        "ratio": ratio,
        # Adopted only when every search of the best beat every search of the default and that is unlikely by
        # chance (bench/tuners/tune_search.py significantly_better).
        "significant": outcome.significant,
        "chance": tune_search.chance_of_separation(*searches) if best != default else None,
        "recommended": {**dataclasses.asdict(chosen), "label": chosen.label(), **_capacity(outcome, chosen)},
        "pulumi": pulumi_lines(chosen, default, config_schema()[0], args.stack),
        "client": chosen.client_lines(variant),
        "twin_only": {INTRA_PARAMETER: chosen.intra_op_threads},
        "machine": facts,
        "noisy": facts["conditions"]["noisy"],
    }


def _finish(
    args: argparse.Namespace,
    out: Path,
    settings: StackSettings,
    report: dict[str, Any],
    outcome: Outcome[Candidate],
    measurer: Measurer,
    default: Candidate,
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    drawn = plots.write_tuning_plots(out, ("tune.json",))  # tune.png: every search of every configuration
    (out / "README.md").write_text(readme(report, [p.name for p in drawn]), encoding="utf-8")
    print(out / "tune.json")
    for path in drawn:
        print(path)
    print(out / "README.md")
    try:
        for path in _records(report, settings, out, measurer.merged(outcome.recommended)):
            print(path)
    except CapacityError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary(report))
    if args.write_stack and report["pulumi"]:
        from triton_gke.settings import ConfigError

        try:
            log(f"updated {write_stack(args.stack, outcome.recommended, default)}")
        except ConfigError as err:
            print(f"error: --write-stack: the stack refuses the edited file: {err}", file=sys.stderr)
            return 2
        except OSError as err:
            print(f"error: --write-stack: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
            return 2
    return 0


def _records(report: dict[str, Any], settings: StackSettings, out: Path, run: runner.VariantRun | None) -> list[Path]:
    """results.json (the recommended configuration as a bench run) and its capacity record in OUT/records/
    (bench/reports/record.py)."""
    if run is None:
        return []
    summary_row = runner.summarise(run, None)
    slo = settings.monitoring.slo
    bench_run = BenchRun(
        command=report["command"],
        stack=report["stack"],
        target="sandbox",
        started=report["started"],
        wall_s=report["wall_s"],
        settings={
            "slo_ms": float(slo.latency_ms),
            "max_failure_ratio": slo.max_failure_ratio,
            "arrival": "poisson",
            "ladder_growth": 1.5,
            "ladder_precision": 0.1,
            "stop_after": 2,
            "step_s": run.rows[0].duration_s if run.rows else 0,
            "repeats": summary_row.repeats,
        },  # fmt: skip
        machine=report["machine"],
        steps=run.rows,
        summaries=[summary_row],
        costs=[],
        pricing=[],
        notes=[f"bench tune: the recommended configuration ({report['recommended']['label']})"],
    )
    (out / "results.json").write_text(bench_run.to_json(), encoding="utf-8")
    in_out, _, notes = record.write_run_records(json.loads(bench_run.to_json()), settings, out, record=False)
    for note in notes:
        log(note)
    return [out / "results.json", *(r.path for r in in_out)]


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def screened(report: dict[str, Any]) -> bool:
    """Whether the report's figures are a screen's predictions (--search screen), not open-loop rate searches."""
    return report.get("search") == "screen"


def units(report: dict[str, Any]) -> str:
    """What one figure of the report is: a rate search, or a closed-loop measurement and its prediction."""
    return "closed-loop measurements" if screened(report) else "searches"


def _figure(capacity: dict[str, Any], noun: str = "searches") -> str:
    if capacity["median"] is None:
        return "not measured"
    return (
        f"{capacity['median']:.1f} req/s (min {capacity['min']:.1f}, max {capacity['max']:.1f} over "
        f"{capacity['searches']} {noun})"
    )


def verdict(report: dict[str, Any]) -> str:
    """Why the recommended configuration is the one to apply."""
    best, default, noun = report["best"], report["default"], units(report)
    if best["label"] == default["label"]:
        return "recommended: the default (no configuration measured better)"
    odds = f"chance {report['chance']:.2g} when they are equal, at most {tune_search.ALPHA:g} needed"
    if report["significant"]:
        return (
            f"recommended: the best: each of its {best['searches']} {noun} beat each of the default's "
            f"{default['searches']} ({odds})"
        )
    return (
        f"recommended: keep the default: the best measured did not beat it beyond noise over {best['searches']} and "
        f"{default['searches']} {noun} ({odds} when every one beats)"
    )


def summary(report: dict[str, Any]) -> str:
    ratio = f"{report['ratio']:.2f}x the default" if report["ratio"] else "no ratio (the default found no rate)"
    noun = units(report)
    spent = (
        f"{report['units_spent']} closed-loop measurements; capacities predicted by M/D/c, not measured open loop"
        if screened(report)
        else f"{report['units_spent']} rate searches"
    )
    lines = [
        f"best measured: {report['best']['label']}: {_figure(report['best'], noun)}",
        f"default: {report['default']['label']}: {_figure(report['default'], noun)}",
        f"ratio: {ratio} at p95 <= {report['slo_ms']} ms ({spent})",
        verdict(report),
    ]
    if report["stopped_early"]:
        lines.append(
            f"STOPPED EARLY at the end of the budget: the best measured had {report['best']['searches']} "
            f"{units(report)}, the default {report['default']['searches']}"
        )
    if report["noisy"]:
        lines.append("NOISY run: " + "; ".join(report["noisy"]))
    unchanged = "the recommended configuration's stack keys are the default's"
    lines += report["pulumi"] or [f"{unchanged}: no stack setting to change"]
    lines += report.get("client", [])
    threads = report["twin_only"][INTRA_PARAMETER]
    if threads is not None:
        lines.append(f"CPU twin only (not a stack setting): ONNX Runtime {INTRA_PARAMETER} {threads}")
    return "\n".join(lines)


def readme(report: dict[str, Any], images: Sequence[str] = ()) -> str:
    rows = "\n".join(
        f"| {c['label']} | {'yes' if c['default'] else ''} | {', '.join(f'{v:.1f}' for v in c['capacities'])} | "
        f"{_rate(c['median'])} |"
        for c in report["candidates"]
    )
    settings_block = "\n".join(report["pulumi"]) or "# no stack setting to change"
    noisy = f"**This run is marked NOISY**: {'; '.join(report['noisy'])}.\n\n" if report["noisy"] else ""
    figures = (
        "predicted capacities (req/s at the SLO by M/D/c, one per closed-loop measurement)"
        if screened(report)
        else "capacities (req/s, one per search)"
    )
    return (
        f"# Tuning {report['variant']} on the CPU twin ({report['stack']}, p95 <= {report['slo_ms']} ms)\n\n{noisy}"
        f"`{report['command']}`, {report['started']}, {report['wall_s'] / 60:.1f} min, {report['units_spent']} "
        f"{'closed-loop measurements' if screened(report) else 'rate searches'}.\n\n{summary(report)}\n\n"
        f"| configuration | default | {figures} | median |\n| --- | --- | --- | --- |\n"
        f"{rows}\n\nThe stack settings of the recommended configuration (they apply to every variant that reads "
        "them):\n\n"
        f"```sh\n{settings_block}\n```\n{screen_table(report)}" + "".join(f"\n![{name}]({name})\n" for name in images)
    )


def screen_table(report: dict[str, Any]) -> str:
    """A screen's own measurements, each with the prediction made from it ('' for an open-loop tuning)."""
    screen = report["machine"].get("screen") if screened(report) else None
    if not screen:
        return ""
    rows = "\n".join(
        f"| {label} | {r['concurrency']} | {r['infer_per_s']:g} | {r['p95_ms']:g} | {r['service_ms'] or 'n/a'} | "
        f"{r['predicted_rps']:g} |"
        for label, found in screen["measurements"].items()
        for r in found
    )
    return (
        f"\nperf_analyzer's closed-loop measurements (windows of {screen['window_s']:g} s, after a discarded warm-up "
        "on each fresh server); ms per request by Little's law, and the rate whose p95 an M/D/c queue keeps within the "
        f"SLO (bench/metrics/queue_model.py):\n\n"
        "| configuration | concurrency | infer/s | p95 ms | ms per request | predicted req/s |\n"
        f"| --- | --- | --- | --- | --- | --- |\n{rows}\n"
    )
