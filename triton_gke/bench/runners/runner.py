"""Run the measure-and-tune benchmark: the reference tutorial's procedure, automated.

Per variant: a fresh server (restarted per model, as the reference does), then R repeats of a
Locust run (the project's locustfile plus bench/runners/locust_steps.py: a discarded warm-up step, the
rate search with open-loop Poisson arrivals, then closed-loop saturation), perf_analyzer's own
open-loop search on the same server as a cross-check, and afterwards, with no server running,
raw ONNX Runtime throughput of the same ONNX file at the batch size the server achieved at
saturation (served/raw).

Targets:
- sandbox: the CPU twins of the stack's variants (plus UINT8-input copies for the FP32 vs UINT8
  comparison), built into build/bench/<stack>/ and served by the local tritonserver on 127.0.0.1.
  CPU numbers show the mechanics (batching, queueing, the search), not GPU capacity.
- stack: the deployed stack; the address comes from `pulumi stack output --json` (httpEndpoint,
  which exists with globalLoadBalancer: true) or from --saddr (e.g. a kubectl port-forward).
  Nothing is restarted there (the warm-up step still absorbs a cold start); batch size and GPU
  use need Triton's metrics port (--metrics-url, e.g. port-forwarded), which the load balancer
  does not route. Locust runs on this machine: for loads beyond what one machine can send
  (2,000 RPS of FP32 images is ~10 Gbps), use the stack's in-cluster Locust instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bench.metrics import registry
from triton_gke.bench.metrics.probes import Sampler
from triton_gke.bench.plans.load_plan import LoadPlan
from triton_gke.bench.plans.results import PerfAnalyzerOpinion, StepRow, VariantSummary
from triton_gke.bench.plans.slo_search import PASS, SloCriteria, SloResult, Step, rate_search, spread, verdict
from triton_gke.bench.runners import perf_analyzer, raw_ort
from triton_gke.bounded_files import output_folder_problem, read_text_file
from triton_gke.contracts.loadtest import LocustEnvironment
from triton_gke.contracts.paths import (
    IMPORT_ROOT,
    LOCUST_STEPS_FILE,
    LOCUSTFILE,
    bench_build_dir,
    bench_results_dir,
    project_dir,
)
from triton_gke.contracts.triton import READY_PATH
from triton_gke.model_repo.settings import ModelRepoSettings, VariantSettings
from triton_gke.model_repo.sync_source import CONFIG_MAX_BYTES
from triton_gke.sandbox.processes import interrupts_held, locust_base_environment

if TYPE_CHECKING:  # started only by the sandbox runs: imported there
    from triton_gke.sandbox.triton import TritonServer

# The package's own folder (the repository root in a checkout): on the locustfile's PYTHONPATH.
SHAPE_FILE = LOCUST_STEPS_FILE
LOCUST = Path(sys.executable).parent / "locust"
_TYPE_BYTES = {"TYPE_FP32": 4, "TYPE_FP16": 2, "TYPE_BF16": 2, "TYPE_UINT8": 1, "TYPE_INT8": 1, "TYPE_INT32": 4}


def results_dir() -> Path:
    """Where bench, tune and the tuner comparison write by default: the current project's results/bench (not the
    installed package's folder: a command acts on the project in the current folder, settings/schema.py)."""
    return bench_results_dir()


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why in one line."""


@dataclass(frozen=True)
class BenchConfig:
    stack: str
    target: str  # "sandbox" | "stack"
    plan: LoadPlan
    repeats: int
    protocol: str = "http"
    variants: tuple[str, ...] = ()  # empty: every variant the stack deploys
    uint8: tuple[str, ...] = ("original",)  # sandbox: add a UINT8-input copy of these
    perf_analyzer: bool = True
    raw_seconds: float = 3.0
    saddr: str | None = None  # stack target: overrides the stack output
    metrics_url: str | None = None  # stack target: Triton's metrics, e.g. via port-forward
    build_dir: Path = field(default_factory=lambda: bench_build_dir())  # the CPU twins the sandbox serves, per stack

    @property
    def criteria(self) -> SloCriteria:
        return self.plan.criteria


@dataclass(frozen=True)
class Endpoint:
    http: str  # host:port, as tritonclient and the locust-config `saddr` take it
    grpc: str
    metrics_url: str | None
    pid: int | None  # local server process, for CPU accounting
    ready_s: float | None  # restart to READY

    def address(self, protocol: str) -> str:
        return self.grpc if protocol == "grpc" else self.http


@dataclass(frozen=True)
class Model:
    """A variant as the benchmark serves it: settings, ONNX file (sandbox) and request shape."""

    settings: VariantSettings
    onnx: Path | None
    input_name: str
    output_name: str
    bytes_per_request: int

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def payload(self) -> str:
        return "uint8" if self.settings.uint8_input else "fp32"


Serve = Callable[[str], contextlib.AbstractContextManager[Endpoint]]
Log = Callable[[str], None]


# ---------------------------------------------------------------- variants and targets


# ---------------------------------------------------------------- input checks (before anything is measured)

CONNECT_TIMEOUT_S = 3.0  # a Triton that does not accept a TCP connection in 3 s would fail every step anyway


def refuse_empty_paths(args: Any, *options: str) -> None:
    """Folder options given as '' (Path('') is '.', the current folder, whose files would be read or replaced):
    refused naming the option. Each option is read from its argparse attribute."""
    for option in options:
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None and not str(value).strip():
            raise BenchError(f"{option}: an empty path (it would mean the current folder)")


def check_writable(folder: Path, option: str) -> None:
    """BenchError naming `option` when the run could not write into `folder` (bounded_files.output_folder_problem):
    before the run's minutes of work, not after them."""
    problem = output_folder_problem(folder)
    if problem is not None:
        raise BenchError(f"{option} {folder}: {problem}")


def check_new_or_empty(out: Path, writer: str) -> None:
    """--out for a command that writes only into a new or empty folder: writable (check_writable) and holding
    nothing, so no earlier result or someone else's file is replaced."""
    check_writable(out, "--out")
    held = sorted(out.iterdir()) if out.is_dir() else []
    if held:
        # Name what is there: an interrupted run leaves its partial files, and a bare "not empty" left users guessing.
        more = f" and {len(held) - 1} more" if len(held) > 1 else ""
        raise BenchError(
            f"--out {out}: not empty (it holds {held[0].name[:80]!r}{more}: an earlier or interrupted run's?); "
            f"{writer} writes into a new or empty folder: give another --out or remove this one"
        )


def split_saddr(saddr: str) -> tuple[str, int]:
    """(host, port) of a --saddr, as tritonclient and the locustfile take it: host:port, [IPv6]:port, no scheme."""
    if "://" in saddr or "/" in saddr or not saddr.strip() or any(c.isspace() for c in saddr):
        raise BenchError(f"--saddr {saddr[:80]!r}: expected host:port (e.g. 127.0.0.1:8000), no scheme or path")
    try:
        parts = urlsplit(f"//{saddr}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a bad port or an unclosed [ (https://docs.python.org/3/library/urllib.parse.html)
        host = port = None
    if not host or port is None or port == 0:
        raise BenchError(f"--saddr {saddr[:80]!r}: expected host:port with a port from 1 to 65535")
    return host, port


def check_reachable(saddr: str, protocol: str = "http", timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Triton answers at `saddr` before any Locust starts: a TCP connection, and over HTTP its readiness path
    (READY_PATH, 200 when ready: the KServe v2 protocol cited in contracts/triton.py). A TCP connection alone is
    not enough: a proxy or a load balancer accepts one for any address."""
    import socket
    import urllib.error
    import urllib.request

    host, port = split_saddr(saddr)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
        if protocol == "http":
            # No proxy from the environment: Locust and tritonclient reach saddr directly (locust_env drops them).
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(f"http://{saddr}{READY_PATH}", timeout=timeout_s) as response:
                response.read(1024)
    except urllib.error.HTTPError as err:
        raise BenchError(f"--saddr {saddr}: Triton is not ready ({READY_PATH} answered {err.code})") from None
    except (OSError, ValueError) as err:
        why = getattr(err, "reason", None) or err
        reason = "timed out" if isinstance(why, TimeoutError) else (getattr(why, "strerror", None) or str(why))
        raise BenchError(f"--saddr {saddr}: Triton is not reachable ({reason} within {timeout_s:g} s)"[:300]) from None


def select_variants(deployed: Sequence[VariantSettings], names: Sequence[str]) -> list[VariantSettings]:
    known = {v.name: v for v in deployed}
    for name in names:
        if name not in known:
            raise BenchError(f"--variants: {name!r} is not deployed by the stack (deployed: {', '.join(known)})")
    return [known[n] for n in names] if names else list(deployed)


def payload_copies(deployed: Sequence[VariantSettings], names: Sequence[str]) -> list[VariantSettings]:
    """For the FP32 vs UINT8 comparison: each named variant with the other input type, named
    <variant>_uint8 (or <variant>_fp32 where the stack already serves it with a UINT8 input)."""
    known = {v.name: v for v in deployed}
    copies = []
    for name in names:
        if name not in known:
            raise BenchError(f"--uint8: {name!r} is not deployed by the stack (deployed: {', '.join(known)})")
        other = "FP32" if known[name].uint8_input else "UINT8"
        copies.append(dataclasses.replace(known[name], name=f"{name}_{other.lower()}", input_dtype=other))
    return copies


def build_sandbox_repository(repo: ModelRepoSettings, variants: list[VariantSettings], root: Path) -> Path:
    """The CPU twins to serve (the GPU folder beside them is what the stack would upload)."""
    from triton_gke.model_repo.build import build_repository  # onnx and onnxruntime: only when building

    result = build_repository(dataclasses.replace(repo, variants=tuple(variants)), root / "gpu", root / "cpu")
    return result.cpu_out


def read_config(folder: Path) -> mc.ModelConfig:
    """The model folder's config.pbtxt. Built earlier into a folder the user can write to: read through the one
    bounded reader."""
    text = read_text_file(folder / "config.pbtxt", CONFIG_MAX_BYTES, "a Triton model configuration", BenchError)
    return text_format.Parse(text, mc.ModelConfig())


def read_model(settings: VariantSettings, folder: Path | None) -> Model:
    """Request shape from the built config.pbtxt (sandbox); the locustfile's defaults otherwise."""
    if folder is None:
        size = 224 * 224 * 3 * (1 if settings.uint8_input else 4)
        return Model(settings, None, "input", "probabilities", size)
    config = read_config(folder)
    first = config.input[0]
    size = _TYPE_BYTES.get(mc.DataType.Name(first.data_type), 4)
    for dim in first.dims:
        size *= dim
    return Model(settings, folder / "1" / "model.onnx", first.name, config.output[0].name, size)


def sandbox_triton(repository: Path, model: str) -> TritonServer:
    """A tritonserver (not started) with only `model` loaded. Not in a network namespace: its port relay runs in this
    process and would add its own CPU use and latency to every request."""
    from triton_gke.sandbox.triton import TritonServer

    flags = {"model-control-mode": "explicit", "load-model": [model]}
    return TritonServer(repository, flags=flags, ready_timeout_s=300)


@contextlib.contextmanager
def sandbox_server(repository: Path, model: str) -> Iterator[Endpoint]:
    """A fresh tritonserver with only `model` loaded (sandbox_triton), for as long as the block runs."""
    started = time.monotonic()
    with sandbox_triton(repository, model) as server:
        ready = time.monotonic() - started
        yield Endpoint(server.http_url, server.grpc_url, server.metrics_url, server.pid, ready)


def stack_outputs(stack: str) -> dict[str, Any]:
    """`pulumi stack output --json` of the deployed stack."""
    command = ["pulumi", "stack", "output", "--json", "--stack", stack]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=project_dir())
    except FileNotFoundError:
        raise BenchError(
            "--target stack needs the Pulumi CLI (`pulumi stack output --json`); or pass --saddr"
        ) from None
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"pulumi stack output --stack {stack} failed: {last}")
    return json.loads(result.stdout)


def endpoint_from_outputs(outputs: dict[str, Any]) -> str:
    """host:port of the stack's HTTP inference endpoint (httpEndpoint: http://IP/v2/models/MODEL/infer)."""
    url = outputs.get("httpEndpoint")
    if not url:
        raise BenchError(
            "the stack has no httpEndpoint output (only with globalLoadBalancer: true); "
            "port-forward Triton and pass --saddr 127.0.0.1:8000"
        )
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def stack_serve(saddr: str, metrics_url: str | None) -> Serve:
    @contextlib.contextmanager
    def serve(_model: str) -> Iterator[Endpoint]:
        yield Endpoint(saddr, saddr, metrics_url, None, None)

    return serve


# ---------------------------------------------------------------- Locust


def locust_env(plan: LoadPlan, model: Model, endpoint: Endpoint, protocol: str) -> dict[str, str]:
    # Keys of the locust-config ConfigMap: never inherited from the caller's environment by accident.
    env = locust_base_environment()
    env.update(plan.env())
    locust = LocustEnvironment(
        model=model.name,
        saddr=endpoint.address(protocol),
        protocol=protocol,
        payload=model.payload,
        rate=plan.ladder.start,  # open loop from the first request; the shape sets each step's rate
        arrival=plan.arrival,
        input_name=model.input_name,
        output_name=model.output_name,
        metrics_port=0,  # no Prometheus endpoint for a throw-away run
    )
    env.update(locust.to_env())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), os.environ.get("PYTHONPATH")]))
    return env


def run_locust(
    plan: LoadPlan,
    model: Model,
    endpoint: Endpoint,
    protocol: str,
    workdir: Path,
    on_step: Callable[[dict], None] | None = None,
) -> list[dict]:
    """One ramp: real Locust, headless, with the project's locustfile; returns the steps it wrote. `on_step` gets
    each step as the shape writes it (the progress line), polled every POLL_S while Locust runs."""
    steps_file = workdir / f"{model.name}-{len(list(workdir.glob('*.jsonl')))}.jsonl"
    plan = dataclasses.replace(plan, steps_file=str(steps_file))
    command = [str(LOCUST), "-f", f"{LOCUSTFILE},{SHAPE_FILE}", "--headless", "--only-summary"]
    log_path = steps_file.with_suffix(".log")
    deadline = time.monotonic() + plan.max_duration_s() + 60
    seen = 0
    with log_path.open("wb") as log:
        env = locust_env(plan, model, endpoint, protocol)
        locust: subprocess.Popen[bytes] | None = None
        try:
            with interrupts_held():  # a signal during the start is raised here, with `locust` ours to stop
                locust = subprocess.Popen(command, cwd=project_dir(), env=env, stdout=log, stderr=subprocess.STDOUT)
            while locust.poll() is None:
                seen = _new_steps(steps_file, seen, on_step)
                if time.monotonic() > deadline:
                    raise BenchError(f"locust overran its plan: {_tail(log_path)}")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    locust.wait(POLL_S)
        except BaseException:  # overrun, or a signal (run_interruptible): Locust goes with it
            if locust is not None:
                locust.kill()
                locust.wait()
            raise
    _new_steps(steps_file, seen, on_step)
    rows = [json.loads(line) for line in steps_file.read_text().splitlines()] if steps_file.is_file() else []
    # Locust exits 1 when any request failed: failures are results here, not errors.
    if locust.returncode not in (0, 1) or not rows:
        raise BenchError(f"locust exited {locust.returncode} without steps: {_tail(log_path)}")
    return rows


POLL_S = 0.5  # how often a running ramp's steps file is read for the progress line


def _new_steps(steps_file: Path, seen: int, on_step: Callable[[dict], None] | None) -> int:
    """Hand the complete lines after the first `seen` to on_step; returns how many lines are complete now."""
    if on_step is None or not steps_file.is_file():
        return seen
    lines = steps_file.read_text(encoding="utf-8").split("\n")[:-1]  # the last is partial (or empty)
    for line in lines[seen:]:
        on_step(json.loads(line))
    return len(lines)


# ---------------------------------------------------------------- progress


def clock(seconds: float) -> str:
    """1m05s, 12s, 1h02m."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(
    where: str, record: dict, verdict: str, elapsed_s: float, left_s: float | None, at_least: bool = False
) -> str:
    """One line per measured step: where, the rate offered and achieved, p95, the verdict, elapsed and time left
    ("at least" when a part of the run still to come has not been timed yet)."""
    offered = record.get("offered_rps")
    load = f"{record['users']} users" if offered is None else f"offered {offered:.1f} req/s"
    p95 = record.get("p95_ms")
    left = "n/a" if left_s is None else f"{'at least ' if at_least else '~'}{clock(left_s)}"
    return (
        f"  {where} step {record['phase']}: {load}, achieved {record['rps']:.1f} req/s, "
        f"p95 {'n/a' if p95 is None else f'{p95:.0f} ms'}, {verdict} | elapsed {clock(elapsed_s)}, left {left}"
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass
class Progress:
    """The progress of a whole run and its time left, counting what the run does, not only its load windows.

    A run is `ramps` Locust ramps (one rate search each, warm-up and saturation included). With
    `ramps_per_variant`, they come in groups of that many on one server per variant (bench_variant): each group
    has a server start before its first ramp (timed) and work after its last (perf_analyzer's search:
    `after_variant_s`, None while not known, until the first variant has been timed); `tail_s` comes after
    the last variant (raw ONNX Runtime, the baseline after). A ramp's length is the mean of those finished, before
    the first the plan's typical one. The time left is "at least" while a part still to come is untimed."""

    ramps: int
    typical_ramp_s: float
    log: Log
    started: float = field(default_factory=time.monotonic)
    finished: int = 0
    ramp_started: float = field(default_factory=time.monotonic)
    ramps_per_variant: int = 0  # 0: ramps not grouped into variants (bench tune's searches: TuneProgress)
    after_variant_s: float | None = 0.0
    tail_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    in_ramp: bool = False
    ramp_s: list[float] = field(default_factory=list)  # each finished ramp's length
    starts_s: list[float] = field(default_factory=list)  # each variant's server start (to its first ramp)
    afters_s: list[float] = field(default_factory=list)  # each variant's work after its last ramp
    variant_started: float | None = None
    variants_done: int = 0
    variant_ramps: int = 0
    last_ramp_ended: float | None = None

    def per_ramp_s(self) -> float:
        """A ramp's length: grouped per variant, the mean Locust time of those finished (the overheads are counted
        apart); ungrouped, the run's time to the current ramp's start per finished ramp (overheads included)."""
        if self.ramps_per_variant:
            return _mean(self.ramp_s) if self.ramp_s else self.typical_ramp_s
        return (self.ramp_started - self.started) / self.finished if self.finished else self.typical_ramp_s

    def left(self) -> tuple[float, bool]:
        """Seconds left and whether that is a lower bound (a part still to come not timed yet)."""
        now, per_ramp = self.clock(), self.per_ramp_s()
        if not self.ramps_per_variant:  # every ramp alike, its overheads in per_ramp
            return max(0.0, (self.ramps - self.finished) * per_ramp - (now - self.ramp_started)) + self.tail_s, False
        in_ramp = now - self.ramp_started if self.in_ramp else 0.0
        waiting = self.ramps - self.finished - (1 if self.in_ramp else 0)
        seconds = max(0, waiting) * per_ramp + (max(0.0, per_ramp - in_ramp) if self.in_ramp else 0.0)
        variants = -(-self.ramps // self.ramps_per_variant)
        current = self.variant_started is not None
        coming = max(0, variants - self.variants_done - (1 if current else 0))  # variants not started yet
        seconds += coming * (_mean(self.starts_s) if self.starts_s else 0.0)
        after = _mean(self.afters_s) if self.afters_s else self.after_variant_s
        if after is not None:
            seconds += (coming + (1 if current else 0)) * after
        untimed = (after is None and (coming > 0 or current)) or (coming > 0 and not self.starts_s)
        overrun = self.in_ramp and in_ramp >= per_ramp  # this ramp outlasts the estimate: its end is unknown
        return seconds + self.tail_s, untimed or overrun

    def left_s(self) -> float:
        return self.left()[0]

    def start_variant(self) -> None:
        self.variant_started, self.variant_ramps = self.clock(), 0

    def start_ramp(self) -> None:
        self.ramp_started, self.in_ramp = self.clock(), True
        if self.variant_started is not None and self.variant_ramps == 0:
            self.starts_s.append(self.ramp_started - self.variant_started)

    def end_ramp(self) -> None:
        now = self.clock()
        if self.in_ramp:
            self.ramp_s.append(now - self.ramp_started)
        self.finished += 1
        self.in_ramp, self.last_ramp_ended = False, now
        self.variant_ramps += 1

    def end_variant(self) -> None:
        if self.variant_started is not None and self.last_ramp_ended is not None and self.variant_ramps:
            self.afters_s.append(self.clock() - self.last_ramp_ended)
        self.variant_started = None
        self.variants_done += 1

    def skip_variant(self, ramps_done: int) -> None:
        """A variant that failed: its ramps are not coming (the run's count moves to `ramps_done`)."""
        self.finished, self.in_ramp, self.variant_started = ramps_done, False, None
        self.variants_done += 1

    def step(self, where: str, record: dict, verdict: str) -> None:
        seconds, at_least = self.left()
        self.log(progress_line(where, record, verdict, self.clock() - self.started, seconds, at_least))


def run_progress(config: BenchConfig, models: int, log: Log) -> Progress:
    """The progress of a bench run: its ramps grouped per variant; after each variant perf_analyzer's search
    (untimed until the first variant's, or none); after the last, raw ONNX Runtime per model and the baseline."""
    tail = models * (config.raw_seconds + RAW_LOAD_S) + BASELINE_AFTER_S if config.target == "sandbox" else 0.0
    return Progress(
        models * config.repeats,
        typical_ramp_s(config.plan),
        log,
        ramps_per_variant=config.repeats,
        after_variant_s=None if config.perf_analyzer else 0.0,
        tail_s=tail,
    )


# Seconds beyond the measurement itself: loading a model into ONNX Runtime (raw_ort), and the baseline after the
# run (bench/metrics/conditions.py BASELINE_SECONDS of inferences, plus its model's load and the load-average reading).
RAW_LOAD_S = 2.0
BASELINE_AFTER_S = 4.0


def typical_ramp_s(plan: LoadPlan) -> float:
    """A ramp's usual length before any has run: the warm-up, TYPICAL_SEARCH_STEPS steps and the saturation levels
    (the shape acts on 1 s ticks), plus a share of a variant's restart and perf_analyzer search."""
    search = TYPICAL_SEARCH_STEPS * (plan.settle_s + plan.step_s + 1)
    return plan.warmup_s + search + len(plan.saturation_users) * (plan.settle_s + plan.step_s + 1) + 30


# The sandbox runs of results/bench/ took 9-14 search steps per ramp (climb, confirmations, bisection).
TYPICAL_SEARCH_STEPS = 12


def step_verdict(record: dict, criteria: SloCriteria) -> str:
    """The progress line's verdict of a step: pass, fail or skip with the reason, or the phase's."""
    if record.get("phase") == "saturation":
        return "closed loop"
    found = verdict(as_step(record), criteria)
    return found.reason if found.kind == PASS else f"{found.kind}: {found.reason}"


def _tail(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(lines[-3:]) if lines else "(no output)"


def as_step(record: dict) -> Step:
    return Step(**{f.name: record[f.name] for f in dataclasses.fields(Step)})


# ---------------------------------------------------------------- one variant


@dataclass
class VariantRun:
    model: Model
    records: list[list[dict]]  # per repeat, the steps Locust wrote
    results: list[SloResult]  # per repeat, the rate search
    rows: list[StepRow]
    opinion: PerfAnalyzerOpinion
    ready_s: float | None


def capacity(result: SloResult) -> float | None:
    """A search's answer: the ACHIEVED rate (successful responses/s) of the step that met the SLO at the highest
    offered rate. The figure the table, the ranking plot, the curves (x axis) and the records all show: a short
    step's Poisson arrivals can fall well short of the rate offered (6.66 achieved at 9.0 offered, 40 requests)."""
    return result.best.rps if result.best else None


def median_repeat(results: list[SloResult]) -> int | None:
    """Index of the repeat whose capacity is the median one (the lower middle for an even count)."""
    found = sorted((capacity(r), i) for i, r in enumerate(results) if r.found)
    return found[(len(found) - 1) // 2][1] if found else None


def search_steps(curve: list[dict]) -> list[Step]:
    return [as_step(r) for r in curve if r.get("phase", "search") != "saturation"]


def bench_variant(
    model: Model, config: BenchConfig, serve: Serve, workdir: Path, log: Log, progress: Progress | None = None
) -> VariantRun:
    records: list[list[dict]] = []
    results: list[SloResult] = []
    progress = progress or Progress(config.repeats, typical_ramp_s(config.plan), log)
    progress.start_variant()
    with serve(model.name) as endpoint, Sampler(model.name, endpoint.metrics_url, endpoint.pid) as sampler:
        if endpoint.ready_s is not None:
            log(f"  server restarted, {model.name} ready in {endpoint.ready_s:.1f} s")
        for repeat in range(config.repeats):
            where = f"{model.name} repeat {repeat + 1}/{config.repeats}"

            def on_step(record: dict, where: str = where) -> None:
                progress.step(where, record, step_verdict(record, config.criteria))

            progress.start_ramp()
            records.append(run_locust(config.plan, model, endpoint, config.protocol, workdir, on_step))
            progress.end_ramp()
            results.append(rate_search(search_steps(records[-1]), config.criteria))
            log(f"  repeat {repeat + 1}/{config.repeats}: {_describe(results[-1], records[-1])}")
        saturation = max((r["rps"] for curve in records for r in curve if r.get("phase") == "saturation"), default=None)
        opinion = second_opinion(model, config, endpoint, results, saturation, workdir, log)
    progress.end_variant()
    rows = []
    for repeat, curve in enumerate(records):
        searched = iter(results[repeat].verdicts)
        chosen = results[repeat].best_index
        index_in_search = 0
        for index, record in enumerate(curve):
            if record.get("phase") == "saturation":
                rows.append(_row(model.name, repeat, index, record, sampler, "saturation (closed loop)", False))
                continue
            is_chosen = chosen == index_in_search
            rows.append(_row(model.name, repeat, index, record, sampler, next(searched), is_chosen))
            index_in_search += 1
    return VariantRun(model, records, results, rows, opinion, endpoint.ready_s)


def _describe(result: SloResult, curve: list[dict]) -> str:
    measured = sum(1 for r in curve if r.get("phase", "search") == "search")
    saturated = [r for r in curve if r.get("phase") == "saturation"]
    top = max(saturated, key=lambda r: r["rps"], default=None)
    closed = f"; closed loop at most {top['rps']:.1f} RPS ({top['users']} users)" if top else ""
    if not result.found:
        return (
            f"{measured} search steps, no rate met the SLO ({result.verdicts[-1] if result.verdicts else ''}){closed}"
        )
    best = result.best
    return (
        f"{measured} search steps, max {best.rps:.1f} requests/s achieved at the SLO (offered {best.offered_rps:.1f}, "
        f"p95 {best.p95_ms:.0f} ms){closed}"
    )


def _row(variant: str, repeat: int, index: int, record: dict, sampler: Sampler, verdict: str, chosen: bool) -> StepRow:
    stats = sampler.window(record["wall_start"], record["wall_end"])
    errors = "; ".join(f"{count}x {message}" for message, count in record["errors"].items())
    return StepRow(
        variant=variant,
        repeat=repeat + 1,
        step=index,
        users=record["users"],
        offered_rps=record["offered_rps"],
        warmup=record["warmup"],
        duration_s=record["duration_s"],
        requests=record["requests"],
        failures=record["failures"],
        rps=record["rps"],
        p50_ms=record["p50_ms"],
        p95_ms=record["p95_ms"],
        mean_ms=record["mean_ms"],
        **{m.name: getattr(stats, m.name) for m in registry.METRICS},
        verdict=verdict,
        chosen=chosen,
        errors=errors,
        phase=record.get("phase", "search"),
        wait_p95_ms=record.get("wait_p95_ms"),
    )


def pa_range(config: BenchConfig, saturation_rps: float | None) -> perf_analyzer.RateRange:
    """perf_analyzer searches on its own, from the ladder's first rate up to 1.5x the closed-loop
    saturation throughput (no open-loop rate above what the server delivers flat out can meet any
    SLO), or up to the ladder's cap without a saturation figure; its step is the ladder's precision
    at a third of that top."""
    ladder = config.plan.ladder
    high = min(ladder.max_rate, 1.5 * saturation_rps) if saturation_rps else ladder.max_rate
    high = max(high, 2 * ladder.start)
    return perf_analyzer.RateRange(ladder.start, high, max(0.05, ladder.precision * high / 3))


def second_opinion(
    model: Model,
    config: BenchConfig,
    endpoint: Endpoint,
    results: list[SloResult],
    saturation_rps: float | None,
    workdir: Path,
    log: Log,
) -> PerfAnalyzerOpinion:
    """perf_analyzer's own open-loop search (Poisson arrivals, p95 threshold = the SLO) on the same
    server, compared with the median repeat's answer."""
    middle = median_repeat(results)
    step = results[middle].best if middle is not None else None
    compare = (step.rps, step.p95_ms) if step else (None, None)  # achieved, as perf_analyzer's throughput
    rates = pa_range(config, saturation_rps)
    if not config.perf_analyzer:
        return PerfAnalyzerOpinion("", None, None, None, None, *compare, "skipped (--no-perf-analyzer)")
    url, csv_path = endpoint.address(config.protocol), workdir / f"{model.name}.pa.csv"
    try:
        binary = perf_analyzer.ensure_binary()
        found = perf_analyzer.search(
            binary,
            model.name,
            url,
            config.protocol,
            rates,
            config.criteria.slo_ms,
            config.criteria.min_requests,
            csv_path,
        )
    except perf_analyzer.PerfAnalyzerError as err:
        log(f"  perf_analyzer: {err}")
        return PerfAnalyzerOpinion(rates.describe(), None, None, None, None, *compare, str(err))
    if found.max_rate is None:
        log(f"  perf_analyzer ({rates.describe()}): no rate met the SLO")
        return PerfAnalyzerOpinion(rates.describe(), None, None, None, None, *compare, "no rate met the SLO")
    log(f"  perf_analyzer ({rates.describe()}): max {found.max_rate:.1f} requests/s (p95 {found.p95_ms:.0f} ms)")
    note = "" if step else "Locust found no rate that met the SLO"
    return PerfAnalyzerOpinion(
        rates.describe(), None, found.rps, None, found.p95_ms, *compare, note, max_rate=found.max_rate
    )


# ---------------------------------------------------------------- summary


def summarise(run: VariantRun, raw: tuple[int, float] | None) -> VariantSummary:
    v = run.model.settings
    chosen = [row for row in run.rows if row.chosen]
    rps = spread([capacity(r) for r in run.results])
    top = saturation_row(run)
    offered = [r.offered_rps for r in chosen if r.offered_rps is not None]
    raw_batch, raw_rps = raw if raw else (None, None)
    return VariantSummary(
        variant=v.name,
        precision=v.precision,
        input_dtype=v.input_dtype,
        max_batch_size=v.max_batch_size,
        preferred_batch_size=v.preferred_batch_size,
        max_queue_delay_us=v.max_queue_delay_us,
        instance_count=v.instance_count,
        bytes_per_request=run.model.bytes_per_request,
        repeats=len(run.results),
        found=sum(r.found for r in run.results),
        max_rps=rps.median if rps else None,
        max_rps_low=rps.low if rps else None,
        max_rps_high=rps.high if rps else None,
        spread_pct=100 * rps.relative if rps else None,
        users=_median([r.users for r in chosen]),
        offered_rps=_median(offered),
        p50_ms=_median([r.p50_ms for r in chosen]),
        p95_ms=_median([r.p95_ms for r in chosen]),
        **{m.name: m.summarise([getattr(r, m.name) for r in chosen]) for m in registry.METRICS},
        peak_rps=max((r.rps for r in run.rows if not r.warmup), default=None),
        pa_concurrency=run.opinion.concurrency,
        pa_rps=run.opinion.rps,
        pa_p95_ms=run.opinion.p95_ms,
        pa_ratio=run.opinion.ratio,
        pa_note=run.opinion.note,
        pa_load=run.opinion.load,
        pa_p95_ratio=run.opinion.p95_ratio,
        raw_batch=raw_batch,
        raw_rps=raw_rps,
        served_raw=(top.rps / raw_rps) if top and raw_rps else None,
        server_ready_s=run.ready_s,
        pa_max_rps=run.opinion.max_rate,
        saturation_rps=top.rps if top else None,
        saturation_users=top.users if top else None,
        saturation_batch=top.batch if top else None,
    )


def saturation_row(run: VariantRun) -> StepRow | None:
    """The closed-loop level that delivered the most (all repeats)."""
    return max((r for r in run.rows if r.phase == "saturation"), key=lambda r: r.rps, default=None)


def _median(values: Sequence[float | None]) -> float | None:
    found = spread(values)
    return found.median if found else None


def served_batch(run: VariantRun) -> int:
    """The batch size raw ONNX Runtime is measured at: what the server achieved at saturation
    (else at the chosen steps)."""
    top = saturation_row(run)
    batch = top.batch if top and top.batch else _median([row.batch for row in run.rows if row.chosen])
    return max(1, round(batch)) if batch else 1


def raw_throughputs(runs: list[VariantRun], seconds: float, log: Log) -> dict[str, tuple[int, float]]:
    """Raw ONNX Runtime per variant; variants sharing a file and batch size share one measurement."""
    measured: dict[tuple[int, int, int], float] = {}
    found = {}
    for run in runs:
        if run.model.onnx is None:
            continue
        batch = served_batch(run)
        stat = run.model.onnx.stat()
        key = (stat.st_dev, stat.st_ino, batch)  # hard links to one cached file are one file
        if key not in measured:
            measured[key] = raw_ort.throughput(run.model.onnx, batch, seconds)
            log(f"  raw onnxruntime {run.model.name} at batch {batch}: {measured[key]:.1f} images/s")
        found[run.model.name] = (batch, measured[key])
    return found


# ---------------------------------------------------------------- the whole run


@dataclass
class Outcome:
    runs: list[VariantRun]
    summaries: list[VariantSummary]
    failed: list[str]  # one line per variant that could not be measured


def run_all(config: BenchConfig, models: list[Model], serve: Serve, log: Log) -> Outcome:
    """Every variant in turn, then raw ONNX Runtime with no server running, then the summaries.

    A variant whose server does not start or whose Locust run breaks is reported and skipped:
    the other variants' measurements are still worth their minutes.
    """
    from triton_gke.sandbox.triton import TritonStartError

    workdir = Path(tempfile.mkdtemp(prefix="bench-"))  # in the run folder bench/__main__ opened (sandbox.run_folder)
    runs, failed = [], []
    progress = run_progress(config, len(models), log)
    try:
        for number, model in enumerate(models, start=1):
            log(f"[{number}/{len(models)}] {model.name} ({model.payload} payload, {model.bytes_per_request} bytes)")
            try:
                runs.append(bench_variant(model, config, serve, workdir, log, progress))
            except (BenchError, TritonStartError) as err:
                progress.skip_variant(number * config.repeats)  # its ramps are not coming
                failed.append(f"{model.name}: not measured: {str(err).splitlines()[0]}")
                log(f"  {failed[-1]}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    raw = raw_throughputs(runs, config.raw_seconds, log) if config.target == "sandbox" else {}
    return Outcome(runs, [summarise(run, raw.get(run.model.name)) for run in runs], failed)
