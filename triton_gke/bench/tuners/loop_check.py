"""triton-gke bench loop-check: one configuration, one tritonserver, closed loop and open loop side by side.

    triton-gke bench loop-check [--stack dev] [--variant original] [--delay-us 20000] [--batch 1/1] [--instances 1]
                                [--concurrency 1:4] [--rates 2,4,8,12,16] [--out DIR]

Why: Model Analyzer measured the no-batching configuration at 28.3 infer/s with p95 82.9 ms at concurrency 2 (a
closed loop), while open-loop rate searches of the same configuration found 4.3-6.3 requests/s at p95 <= 100 ms
(results/bench/tuners-dev-2026-12-02d). Both cannot describe one server. This command measures both on ONE fresh
CPU-twin server in one run, with perf_analyzer (a tool we did not write) doing all the measuring:

1. a discarded warm-up (concurrency 1);
2. the closed loop Model Analyzer uses: perf_analyzer --concurrency-range N for each N ("N requests are always
   outstanding", https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/perf_analyzer/docs/
   inference_load_modes.html);
3. an open-loop rate ladder: perf_analyzer --request-rate-range R --request-distribution=poisson --async (arrivals
   independent of the answers; without --async at most --max-threads requests are in flight, perf_analyzer's cli.md);
4. the same rate ladder from Locust, the project's locustfile (Poisson arrivals, at most --locust-users in flight),
   --locust-seconds per rate: the load tool the benchmark's other searches use, in Python, whose CPU competes with the
   server's on a small machine; its figures are Locust's own (its --json-file), the server's queue and compute times
   Triton's own statistics (GET v2/models/MODEL/stats, the statistics extension:
   https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_statistics.md);
5. the closed loop at the first concurrency again, to see whether the server drifted during the run (warm-up, other
   work on the machine).

For every level it records, besides the load tool's figures, the CPU each party used over that level's wall time:
the load tool's own (its rusage from wait4, user + system, all its threads; Locust's includes its start, about a
second of imports), the server's (psutil: tritonserver and
its child processes, the Python backend's stubs), and the rest of the machine (psutil.cpu_times minus those two and
this process). Writes loop_check.json and README.md (the table) into --out. Bad input: one line, exit 2; a
measurement that failed: exit 1 with what was measured before it written.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triton_gke.bench import command
from triton_gke.bench.metrics import conditions, machine
from triton_gke.bench.metrics.queue_model import single_queue
from triton_gke.bench.reports import record
from triton_gke.bench.runners import perf_analyzer, runner
from triton_gke.bench.tuners import tune
from triton_gke.bounded_files import one_line
from triton_gke.contracts.loadtest import LocustEnvironment
from triton_gke.contracts.paths import LOCUSTFILE, project_dir
from triton_gke.sandbox.processes import interrupts_held, locust_base_environment

PROG = "triton-gke bench loop-check"
MAX_LEVELS = 16


@dataclasses.dataclass(frozen=True)
class CpuSample:
    """CPU seconds at one instant: the server's (with its children), this process's and the whole machine's busy."""

    at: float
    server_s: float
    own_s: float
    machine_busy_s: float


def cpu_sample(server_pid: int | None) -> CpuSample:
    import psutil

    server_s = 0.0
    if server_pid is not None:
        try:
            proc = psutil.Process(server_pid)
            for p in [proc, *proc.children(recursive=True)]:
                try:
                    t = p.cpu_times()
                    server_s += t.user + t.system
                except psutil.NoSuchProcess:
                    continue
        except psutil.NoSuchProcess:
            pass
    own = psutil.Process().cpu_times()
    total = psutil.cpu_times()
    busy = sum(total) - total.idle - getattr(total, "iowait", 0.0)
    return CpuSample(time.monotonic(), server_s, own.user + own.system, busy)


def cpu_shares(before: CpuSample, after: CpuSample, client_s: float) -> dict[str, float]:
    """Cores used over the interval by the load generator (client_s CPU seconds), the server and everything else."""
    wall = max(after.at - before.at, 1e-6)
    server = (after.server_s - before.server_s) / wall
    own = (after.own_s - before.own_s) / wall
    busy = (after.machine_busy_s - before.machine_busy_s) / wall
    client = client_s / wall
    return {
        "wall_s": round(wall, 2),
        "client_cores": round(client, 3),
        "server_cores": round(server, 3),
        "others_cores": round(max(0.0, busy - server - client - own), 3),
        "machine_busy_cores": round(busy, 3),
    }


def run_measured(args: list[str], binary: Path, out_csv: Path) -> float:
    """Run perf_analyzer (perf_analyzer.command's argv) to its end; its CPU seconds. PerfAnalyzerError when it
    failed."""
    out_csv.unlink(missing_ok=True)
    return run_tool("perf_analyzer", args, perf_analyzer.binary_env(binary), out_csv, out_csv.with_suffix(".log"))


def run_tool(name: str, args: list[str], env: dict[str, str], result: Path, log_path: Path) -> float:
    """Run a load tool to its end; its CPU seconds (user + system of it and its waited-for children, from wait4's
    rusage: psutil cannot read a process that has been reaped). PerfAnalyzerError when it exited non-zero or wrote
    no `result`, with its log's last lines."""
    proc: subprocess.Popen[bytes] | None = None
    with log_path.open("wb") as log_file:
        try:
            with interrupts_held():  # a signal during the start is raised here, with `proc` ours to stop
                proc = subprocess.Popen(
                    args,
                    env=env,
                    cwd=project_dir(),
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + 300
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    raise perf_analyzer.PerfAnalyzerError(f"{name} ran over 300 s")
                time.sleep(0.05)
        except BaseException:  # over time, or a signal (run_interruptible): the tool goes with it
            if proc is not None and proc.returncode is None:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode or not result.is_file():
        tail = log_path.read_bytes()[-2000:].decode("utf-8", "replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        raise perf_analyzer.PerfAnalyzerError(
            f"{name} failed: {' '.join(lines[-2:]) or f'exit code {proc.returncode}'}"
        )
    return usage.ru_utime + usage.ru_stime


def measure_level(
    binary: Path, model: str, url: str, load: perf_analyzer.Load, out_csv: Path, server_pid: int | None
) -> dict[str, Any]:
    """One perf_analyzer run at `load` on the running server: its figures and every party's CPU over it."""
    stability = 100 if load.request_rate is not None else 50
    args = perf_analyzer.command(binary, model, url, "http", load, out_csv, stability=stability)
    before = cpu_sample(server_pid)
    try:
        client_s = run_measured(args, binary, out_csv)
    except perf_analyzer.PerfAnalyzerError as err:
        if load.concurrency is None or "stable" not in str(err):
            raise
        args = perf_analyzer.command(binary, model, url, "http", load, out_csv, stability=100)
        before = cpu_sample(server_pid)
        client_s = run_measured(args, binary, out_csv)
    after = cpu_sample(server_pid)
    result = perf_analyzer.parse_csv(out_csv, load)
    row: dict[str, Any] = {
        "loop": "closed" if load.concurrency is not None else "open",
        "load": load.describe(),
        "concurrency": load.concurrency,
        "offered_rps": load.request_rate,
        "infer_per_s": round(result.rps, 2),
        "p50_ms": round(result.p50_ms, 1),
        "p95_ms": round(result.p95_ms, 1),
        "server_queue_ms": round(result.server_queue_ms, 1),
        "server_compute_ms": round(result.server_compute_ms, 1),
        **cpu_shares(before, after, client_s),
    }
    if load.concurrency is not None and result.rps > 0:  # Little's law: the mean time a request spends in the loop
        row["little_ms"] = round(1000.0 * load.concurrency / result.rps, 1)
    return row


@dataclasses.dataclass(frozen=True)
class ServerTimes:
    """Triton's cumulative statistics of one model: successful requests, and their queue and compute nanoseconds
    (inference_stats.success.count, .queue.ns, .compute_infer.ns of GET v2/models/MODEL/stats)."""

    requests: int
    queue_ns: int
    compute_ns: int

    def since(self, before: ServerTimes) -> dict[str, float | int | None]:
        """The requests served since `before`, and their mean queue and compute milliseconds."""
        served = self.requests - before.requests
        if served <= 0:
            return {"server_requests": max(served, 0), "server_queue_ms": None, "server_compute_ms": None}
        return {
            "server_requests": served,
            "server_queue_ms": round((self.queue_ns - before.queue_ns) / served / 1e6, 1),
            "server_compute_ms": round((self.compute_ns - before.compute_ns) / served / 1e6, 1),
        }


def server_times(url: str, model: str) -> ServerTimes:
    """Triton's statistics of `model` now; PerfAnalyzerError (a failed measurement, one line) when the server does not
    answer them or answers something else (a server gone mid-run, a statistics extension switched off)."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    try:
        client = httpclient.InferenceServerClient(url, connection_timeout=10, network_timeout=30)
        try:
            (stats,) = client.get_inference_statistics(model)["model_stats"]
        finally:
            client.close()
        inference = stats["inference_stats"]
        return ServerTimes(
            int(inference["success"]["count"]), int(inference["queue"]["ns"]), int(inference["compute_infer"]["ns"])
        )
    except (InferenceServerException, OSError, KeyError, TypeError, ValueError) as err:
        why = one_line(str(err)) or type(err).__name__
        raise perf_analyzer.PerfAnalyzerError(f"Triton's statistics of {model} at {url}: {why}") from None


@dataclasses.dataclass(frozen=True)
class LocustLevel:
    """One open-loop level from Locust: `rate` requests/s, Poisson, at most `users` in flight, for `seconds`."""

    rate: float
    users: int
    seconds: int

    def describe(self) -> str:
        return f"{self.rate:g} requests/s (Poisson, Locust, {self.users} users)"

    def command(self, prefix: Path) -> list[str]:
        users = str(self.users)
        return [
            str(runner.LOCUST),
            *("-f", str(LOCUSTFILE), "--headless", "-u", users, "-r", users, "-t", f"{self.seconds}s"),
            # The whole run as Locust counted it, written at exit (sandbox/report.py locust_results).
            *("--json-file", str(prefix), "--exit-code-on-error", "0", "--only-summary", "--loglevel", "WARNING"),
        ]

    def environment(self, model: runner.Model, url: str) -> dict[str, str]:
        env = locust_base_environment()
        locust = LocustEnvironment(
            model=model.name,
            saddr=url,
            protocol="http",
            payload=model.payload,
            rate=self.rate,
            arrival="poisson",
            input_name=model.input_name,
            output_name=model.output_name,
            metrics_port=0,
        )
        return env | locust.to_env()


def locust_levels(rates: list[float], seconds: int, users: int) -> list[LocustLevel]:
    """Locust's levels at `rates` (none for 0 seconds); --locust-seconds 0-600 and --locust-users 1-1000."""
    if not 0 <= seconds <= 600:
        raise runner.BenchError(f"--locust-seconds {seconds}: expected 0 (no Locust levels) to 600")
    if not 1 <= users <= 1000:
        raise runner.BenchError(f"--locust-users {users}: expected 1 to 1000")
    return [LocustLevel(rate, users, seconds) for rate in rates] if seconds else []


def locust_row(
    level: LocustLevel, results: dict[str, Any], shares: dict[str, float], server: dict[str, Any]
) -> dict[str, Any]:
    """A Locust level as a row of the table: Locust's own counts, rate and percentiles, and Triton's own count of
    the requests it served meanwhile, with their mean queue and compute times. infer/s counts the requests answered
    without failure, as perf_analyzer's does; failed requests are named in the load's cell (their times are in
    Locust's percentiles)."""
    failures = results["failures"]
    load = level.describe() + (f"; {failures} of {results['requests']} FAILED" if failures else "")
    return {
        "loop": "open",
        "tool": "locust",
        "load": load,
        "concurrency": None,
        "offered_rps": level.rate,
        "infer_per_s": round((results["requests"] - failures) / level.seconds, 2),
        "p50_ms": results["p50_ms"],
        "p95_ms": results["p95_ms"],
        "requests": results["requests"],
        "failures": results["failures"],
        **server,
        **shares,
    }


def measure_locust_level(
    level: LocustLevel, model: runner.Model, url: str, workdir: Path, server_pid: int | None
) -> dict[str, Any]:
    """One Locust run at `level` on the running server: its figures, Triton's times and every party's CPU over it."""
    from triton_gke.sandbox.report import ReportError, locust_results

    prefix = workdir / f"locust-{len(list(workdir.glob('locust-*.log')))}"  # one per level, repeated rates too
    times_before = server_times(url, model.name)
    before = cpu_sample(server_pid)
    client_s = run_tool(
        "locust",
        level.command(prefix),
        level.environment(model, url),
        Path(f"{prefix}.json"),
        prefix.with_suffix(".log"),
    )
    after = cpu_sample(server_pid)
    try:
        results = locust_results(prefix, level.seconds)
    except ReportError as err:
        raise perf_analyzer.PerfAnalyzerError(f"locust: {err}") from None
    served = server_times(url, model.name).since(times_before)
    return locust_row(level, results, cpu_shares(before, after, client_s), served)


def parse_concurrency(text: str) -> list[int]:
    """'1:4' (a range, both ends included) or '1,2,4'; each 1-64, at most MAX_LEVELS."""
    try:
        if ":" in text:
            low, high = (int(x) for x in text.split(":"))
            levels = list(range(low, high + 1))
        else:
            levels = [int(x) for x in text.split(",")]
    except ValueError:
        raise runner.BenchError(f"--concurrency {text[:40]!r}: expected LOW:HIGH or N,N,...") from None
    if not levels or len(levels) > MAX_LEVELS or not all(1 <= n <= 64 for n in levels):
        raise runner.BenchError(f"--concurrency {text[:40]!r}: expected 1 to {MAX_LEVELS} levels, each 1 to 64")
    return levels


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",")]
    except ValueError:
        raise runner.BenchError(f"--rates {text[:40]!r}: expected comma-separated requests/s") from None
    if not rates or len(rates) > MAX_LEVELS or not all(0.1 <= r <= 1000 for r in rates):  # refuses nan too
        raise runner.BenchError(f"--rates {text[:40]!r}: expected 1 to {MAX_LEVELS} rates, each 0.1 to 1000")
    return rates


def parse_batch(text: str) -> tuple[int, int]:
    try:
        preferred, largest = (int(x) for x in text.split("/"))
    except ValueError:
        raise runner.BenchError(f"--batch {text[:40]!r}: expected PREFERRED/MAX, e.g. 1/1") from None
    if not 1 <= preferred <= largest <= 1024:
        raise runner.BenchError(f"--batch {text[:40]!r}: expected 1 <= preferred <= max <= 1024")
    return preferred, largest


OUT_PREFIX = "loop-check-"  # --out's default: results/bench/loop-check-<stack>-<date>


def parser() -> command.BenchParser:
    p = command.BenchParser(
        prog=PROG,
        description="One configuration on one CPU-twin tritonserver: perf_analyzer's closed loop (concurrency) and "
        "open loop (Poisson rates, --async) side by side, with the load generator's and the server's CPU use.",
        epilog="Exit 0 done, 1 a measurement failed (what came before it is written), 2 bad input.",
    )
    p.add_stack("variant and SLO")
    p.add_variant()
    p.add_argument("--delay-us", type=int, default=20000, help="batcher delay in us (default 20000)")
    p.add_argument("--batch", default="1/1", help="preferred/max batch size (default 1/1: Model Analyzer's pick)")
    p.add_argument("--instances", type=int, default=1, help="model instances (default 1)")
    p.add_argument("--intra-op-threads", type=int, help="ONNX Runtime intra-op threads (default: the twin's choice)")
    p.add_argument("--concurrency", default="1:4", help="closed-loop levels, LOW:HIGH or N,N (default 1:4)")
    p.add_argument("--rates", default="2,4,8,12,16", help="open-loop requests/s (default 2,4,8,12,16)")
    p.add_argument(
        "--locust-seconds",
        type=int,
        default=30,
        help="seconds of each Locust level at the same rates (default 30; 0: no Locust levels)",
    )
    p.add_argument("--locust-users", type=int, default=32, help="Locust's bound on requests in flight (default 32)")
    p.add_out(OUT_PREFIX, new_or_empty=True)
    p.add_build_dir()
    return p


def main(argv: list[str] | None = None) -> int:
    return command.run(
        argv, _loop_check, stopped="stopped the server it started", refuse=(perf_analyzer.PerfAnalyzerError,)
    )


def _loop_check(argv: list[str]) -> int:
    from triton_gke.sandbox.triton_wheel import TritonStartError

    stamp = datetime.datetime.now().astimezone()
    started = time.monotonic()
    p = parser()
    args = p.parse_args(argv)
    levels, rates = parse_concurrency(args.concurrency), parse_rates(args.rates)
    preferred, largest = parse_batch(args.batch)
    if not 0 <= args.delay_us <= 10_000_000 or not 1 <= args.instances <= 64:
        raise runner.BenchError("--delay-us 0 to 10000000 and --instances 1 to 64 expected")
    if args.intra_op_threads is not None and not 1 <= args.intra_op_threads <= 64:
        raise runner.BenchError(f"--intra-op-threads {args.intra_op_threads}: expected 1 to 64")
    locust = locust_levels(rates, args.locust_seconds, args.locust_users)
    runner.refuse_empty_paths(args, "--out", "--build-dir")
    out = p.default_out(args, stamp)
    runner.check_new_or_empty(out, "the loop check")
    build = Path(args.build_dir)
    runner.check_writable(build, "--build-dir")
    settings = record.stack_settings(args.stack, "--stack")
    variant = tune.pick_variant(args.variant, settings)
    candidate = tune.Candidate(args.delay_us, preferred, largest, args.instances, args.intra_op_threads)
    base = runner.build_sandbox_repository(settings.model_repo, [variant], build / args.stack) / variant.name
    model = runner.read_model(variant, base)
    binary = perf_analyzer.ensure_binary()
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": " ".join([PROG, shlex.join(argv)]).strip(),
        "started": stamp.isoformat(timespec="seconds"),
        "stack": args.stack,
        "variant": variant.name,
        "configuration": candidate.label(),
        "slo_ms": settings.monitoring.slo.latency_ms,
        "machine": {**machine.facts(), "load_start": machine.load_average()},
        "rows": [],
    }
    watch = conditions.Watch()
    baseline = watch.start()
    report["raw_onnxruntime_start"] = round(baseline.inferences_per_s, 1)
    workdir = Path(tempfile.mkdtemp(prefix="loop-check-"))
    status = 0
    try:
        repo = workdir / "repo"
        folder = tune.twin_folder(base, candidate, repo)
        with runner.sandbox_server(repo, folder.name) as server:
            log(f"{candidate.label()}: server ready in {server.ready_s:.1f} s")
            plan: list[tuple[str, perf_analyzer.Load | LocustLevel]] = [("warm-up", perf_analyzer.Load(concurrency=1))]
            plan += [("closed", perf_analyzer.Load(concurrency=n)) for n in levels]
            plan += [("open", perf_analyzer.Load(request_rate=r, asynchronous=True)) for r in rates]
            plan += [("open", level) for level in locust]
            plan += [("closed again", perf_analyzer.Load(concurrency=levels[0]))]
            twin = dataclasses.replace(model, settings=dataclasses.replace(model.settings, name=folder.name))
            for number, (phase, load) in enumerate(plan):
                if isinstance(load, LocustLevel):
                    row = measure_locust_level(load, twin, server.http, workdir, server.pid)
                else:
                    csv = workdir / f"level-{number}.csv"
                    row = {
                        "tool": "perf_analyzer",
                        **measure_level(binary, folder.name, server.http, load, csv, server.pid),
                    }
                row["phase"] = phase
                report["rows"].append(row)
                log(
                    f"  {phase}, {load.describe()}: {row['infer_per_s']} infer/s, p95 {row['p95_ms']} ms; cores: "
                    f"{row['tool']} {row['client_cores']}, server {row['server_cores']}, others {row['others_cores']}"
                )
    except (perf_analyzer.PerfAnalyzerError, TritonStartError, runner.BenchError) as err:
        print(f"error: {PROG}: {str(err).strip().splitlines()[0] if str(err).strip() else err!r}", file=sys.stderr)
        status = 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    found = watch.finish()
    report["conditions"] = found.to_dict()
    report["noisy"] = found.noisy
    report["machine"]["load_end"] = machine.load_average()
    report["wall_s"] = round(time.monotonic() - started, 1)
    (out / "loop_check.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(readme(report), encoding="utf-8")
    print(out / "loop_check.json")
    print(out / "README.md")
    print(table(report))
    return status


log = command.log


def _service_ms(report: dict[str, Any]) -> float | None:
    """The closed loop's time per request at concurrency 1 (Little's law: one request always in the loop)."""
    return next((r.get("little_ms") for r in report["rows"] if r["phase"] == "closed" and r["concurrency"] == 1), None)


def _model_cell(row: dict[str, Any], service_ms: float | None) -> str:
    if row["loop"] != "open" or service_ms is None:
        return ""
    predicted = single_queue(service_ms, row["offered_rps"])
    return "unstable" if predicted is None else f"{predicted[0]:.0f} / {predicted[1]:.1f}"


def table(report: dict[str, Any]) -> str:
    head = (
        "| phase | load | infer/s | p50 ms | p95 ms | server queue ms | server compute ms | Little's law ms | "
        "M/D/1 p95 / queue ms | load tool cores | server cores | other cores | machine busy cores |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    service_ms = _service_ms(report)
    rows = [
        f"| {r['phase']} | {r['load']} | {r['infer_per_s']} | {_cell(r['p50_ms'])} | {_cell(r['p95_ms'])} | "
        f"{_cell(r.get('server_queue_ms'))} | {_cell(r.get('server_compute_ms'))} | {r.get('little_ms', '')} | "
        f"{_model_cell(r, service_ms)} | {r['client_cores']} | {r['server_cores']} | {r['others_cores']} | "
        f"{r['machine_busy_cores']} |"
        for r in report["rows"]
    ]
    return "\n".join([head, *rows])


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def readme(report: dict[str, Any]) -> str:
    noisy = f"**This run is marked NOISY**: {'; '.join(report['noisy'])}.\n\n" if report["noisy"] else ""
    cores = report["machine"].get("cores", "?")
    return (
        f"# Closed loop and open loop, one server: {report['variant']} on the CPU twin ({report['stack']})\n\n{noisy}"
        f"`{report['command']}`, {report['started']}, {report['wall_s'] / 60:.1f} min. Configuration: "
        f"{report['configuration']}. Every rate and latency is the load tool's own (perf_analyzer's; Locust's "
        "where the load says Locust), the server's queue and compute times Triton's; the cores are CPU seconds per "
        "wall second over each level (the load tool from its rusage, the server with its child processes, others: "
        f"the rest of the machine's busy time), on a machine of {cores} cores. M/D/1 is no measurement: what one "
        "server would give under Poisson arrivals at that rate with a fixed service time, the closed loop's time "
        "per request at concurrency 1 (a seeded simulation).\n\n"
        f"{table(report)}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
