"""triton-gke bench loop-check: one configuration, one tritonserver, closed loop and open loop side by side.

    triton-gke bench loop-check [--stack dev] [--variant original] [--delay-us 20000] [--batch 1/1] [--instances 1]
                                [--concurrency 1:4] [--rates 2,4,8,12,16] [--out DIR]

Why: Model Analyzer measured the no-batching configuration at 28.3 infer/s with p95 82.9 ms at concurrency 2 (a
closed loop), while open-loop rate searches of the same configuration found 4.3-6.3 requests/s at p95 <= 100 ms
(bench/results/tuners-dev-2026-12-02d). Both cannot describe one server. This command measures both on ONE fresh
CPU-twin server in one run, with perf_analyzer (a tool we did not write) doing all the measuring:

1. a discarded warm-up (concurrency 1);
2. the closed loop Model Analyzer uses: perf_analyzer --concurrency-range N for each N ("N requests are always
   outstanding", https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/perf_analyzer/docs/
   inference_load_modes.html);
3. an open-loop rate ladder: perf_analyzer --request-rate-range R --request-distribution=poisson --async (arrivals
   independent of the answers; without --async at most --max-threads requests are in flight, perf_analyzer's cli.md);
4. the closed loop at the first concurrency again, to see whether the server drifted during the run (warm-up, other
   work on the machine).

For every level it records, besides perf_analyzer's figures, the CPU each party used over that level's wall time:
perf_analyzer's own (its rusage from wait4, user + system, all its threads), the server's (psutil: tritonserver and
its child processes, the Python backend's stubs), and the rest of the machine (psutil.cpu_times minus those two and
this process). Writes loop_check.json and README.md (the table) into --out. Bad input: one line, exit 2; a
measurement that failed: exit 1 with what was measured before it written.
"""

from __future__ import annotations

import argparse
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

from triton_gke.bench.metrics import conditions, machine
from triton_gke.bench.reports import record
from triton_gke.bench.runners import perf_analyzer, runner
from triton_gke.bench.tuners import tune
from triton_gke.bounded_files import one_line
from triton_gke.one_line import OneLineParser
from triton_gke.sandbox import run_folder
from triton_gke.sandbox.processes import interrupts_held, run_interruptible

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
    """Run perf_analyzer (perf_analyzer.command's argv) to its end; its CPU seconds (user + system, from wait4's
    rusage: psutil cannot read a process that has been reaped). PerfAnalyzerError when it failed."""
    out_csv.unlink(missing_ok=True)
    env = perf_analyzer.binary_env(binary)
    log_path = out_csv.with_suffix(".log")
    proc: subprocess.Popen[bytes] | None = None
    with log_path.open("wb") as log_file:
        try:
            with interrupts_held():  # a signal during the start is raised here, with `proc` ours to stop
                proc = subprocess.Popen(args, env=env, stdout=log_file, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 300
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    raise perf_analyzer.PerfAnalyzerError("perf_analyzer ran over 300 s")
                time.sleep(0.05)
        except BaseException:  # over time, or a signal (run_interruptible): perf_analyzer goes with it
            if proc is not None and proc.returncode is None:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode or not out_csv.is_file():
        tail = log_path.read_bytes()[-2000:].decode("utf-8", "replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        raise perf_analyzer.PerfAnalyzerError(
            f"perf_analyzer failed: {' '.join(lines[-2:]) or f'exit code {proc.returncode}'}"
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


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description="One configuration on one CPU-twin tritonserver: perf_analyzer's closed loop (concurrency) and "
        "open loop (Poisson rates, --async) side by side, with the load generator's and the server's CPU use.",
        epilog="Exit 0 done, 1 a measurement failed (what came before it is written), 2 bad input.",
        hint=None,
        raise_as=runner.BenchError,
    )
    p.add_argument("--stack", default="dev", help="stack whose variant and SLO apply (default dev)")
    p.add_argument("--variant", help="the variant (default: the stack's capacityVariant, else locustModel)")
    p.add_argument("--delay-us", type=int, default=20000, help="batcher delay in us (default 20000)")
    p.add_argument("--batch", default="1/1", help="preferred/max batch size (default 1/1: Model Analyzer's pick)")
    p.add_argument("--instances", type=int, default=1, help="model instances (default 1)")
    p.add_argument("--intra-op-threads", type=int, help="ONNX Runtime intra-op threads (default: the twin's choice)")
    p.add_argument("--concurrency", default="1:4", help="closed-loop levels, LOW:HIGH or N,N (default 1:4)")
    p.add_argument("--rates", default="2,4,8,12,16", help="open-loop requests/s (default 2,4,8,12,16)")
    p.add_argument("--out", help="output folder, new or empty (default bench/results/loop-check-<stack>-<date>)")
    p.add_argument("--build-dir", default=runner.bench_build_dir(), help="where the CPU twin is built")
    return p


def main(argv: list[str] | None = None) -> int:
    with run_folder.this_run():
        return run_interruptible(lambda: _loop_check(argv), "stopped the server it started")


def _loop_check(argv: list[str] | None) -> int:
    from triton_gke.model_repo.errors import ModelRepoError
    from triton_gke.sandbox.triton_wheel import TritonStartError
    from triton_gke.settings import ConfigError
    from triton_gke.settings.stack import check_stack_name

    stamp = datetime.datetime.now().astimezone()
    started = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser().parse_args(argv)
        levels, rates = parse_concurrency(args.concurrency), parse_rates(args.rates)
        preferred, largest = parse_batch(args.batch)
        if not 0 <= args.delay_us <= 10_000_000 or not 1 <= args.instances <= 64:
            raise runner.BenchError("--delay-us 0 to 10000000 and --instances 1 to 64 expected")
        if args.intra_op_threads is not None and not 1 <= args.intra_op_threads <= 64:
            raise runner.BenchError(f"--intra-op-threads {args.intra_op_threads}: expected 1 to 64")
        check_stack_name(args.stack, "--stack")
        runner.refuse_empty_paths(args, "--out", "--build-dir")
        out = Path(args.out) if args.out else runner.results_dir() / f"loop-check-{args.stack}-{stamp:%Y-%m-%d}"
        runner.check_new_or_empty(out, "the loop check")
        build = Path(args.build_dir)
        runner.check_writable(build, "--build-dir")
        settings = record.stack_settings(args.stack, "--stack")
        variant = tune.pick_variant(args.variant, settings)
        candidate = tune.Candidate(args.delay_us, preferred, largest, args.instances, args.intra_op_threads)
        base = runner.build_sandbox_repository(settings.model_repo, [variant], build / args.stack) / variant.name
        binary = perf_analyzer.ensure_binary()
    except (runner.BenchError, ConfigError, ModelRepoError, perf_analyzer.PerfAnalyzerError) as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return 2
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
            plan = [("warm-up", perf_analyzer.Load(concurrency=1))]
            plan += [("closed", perf_analyzer.Load(concurrency=n)) for n in levels]
            plan += [("open", perf_analyzer.Load(request_rate=r, asynchronous=True)) for r in rates]
            plan += [("closed again", perf_analyzer.Load(concurrency=levels[0]))]
            for number, (phase, load) in enumerate(plan):
                row = measure_level(binary, folder.name, server.http, load, workdir / f"level-{number}.csv", server.pid)
                row["phase"] = phase
                report["rows"].append(row)
                log(
                    f"  {phase}, {load.describe()}: {row['infer_per_s']} infer/s, p95 {row['p95_ms']} ms; cores: "
                    f"perf_analyzer {row['client_cores']}, server {row['server_cores']}, others {row['others_cores']}"
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


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def table(report: dict[str, Any]) -> str:
    head = (
        "| phase | load | infer/s | p50 ms | p95 ms | server queue ms | server compute ms | Little's law ms | "
        "perf_analyzer cores | server cores | other cores | machine busy cores |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    rows = [
        f"| {r['phase']} | {r['load']} | {r['infer_per_s']} | {r['p50_ms']} | {r['p95_ms']} | {r['server_queue_ms']} | "
        f"{r['server_compute_ms']} | {r.get('little_ms', '')} | {r['client_cores']} | {r['server_cores']} | "
        f"{r['others_cores']} | {r['machine_busy_cores']} |"
        for r in report["rows"]
    ]
    return "\n".join([head, *rows])


def readme(report: dict[str, Any]) -> str:
    noisy = f"**This run is marked NOISY**: {'; '.join(report['noisy'])}.\n\n" if report["noisy"] else ""
    return (
        f"# Closed loop and open loop, one server: {report['variant']} on the CPU twin ({report['stack']})\n\n{noisy}"
        f"`{report['command']}`, {report['started']}, {report['wall_s'] / 60:.1f} min. Configuration: "
        f"{report['configuration']}. Every figure is perf_analyzer's own; the cores are CPU seconds per wall second "
        "over each level (perf_analyzer from its rusage, the server with its child processes, others: the rest of "
        f"the machine's busy time), on a machine of {report['machine'].get('cores', '?')} cores.\n\n"
        f"{table(report)}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
