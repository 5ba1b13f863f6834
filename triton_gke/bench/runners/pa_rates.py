"""perf_analyzer alone at fixed open-loop rates: what p95 does NVIDIA's own tool see at each rate?

    .venv/bin/triton-gke bench pa-rates --model original --rates 25,30,35,40 --out DIR

A check of the benchmark that shares none of its code paths for load or latency: a fresh sandbox
tritonserver serving the model `make bench` built (build/bench/<stack>/cpu), one perf_analyzer run per
rate, in perf_analyzer's two rate modes side by side (Poisson arrivals over HTTP): `sync`, its default, where
at most 4 requests are in flight (--max-threads) and a request that waits for a free thread is timed from when
it is sent, and `async`, where arrivals stay independent of the answers (the open loop `make bench` uses); the
figures are perf_analyzer's own. Writes DIR/pa_rates.csv and prints it, and DIR/meta.json: the command line, the
date (UTC), the git commit and the machine (bench/metrics/machine.py), so that the folder says how it was made.
"""

from __future__ import annotations

import csv
import datetime
import json
import shlex
import sys
from pathlib import Path

from triton_gke.bench.metrics import machine
from triton_gke.bench.runners import perf_analyzer
from triton_gke.bench.runners.runner import BenchError, check_new_or_empty, sandbox_server
from triton_gke.contracts.naming import MODEL_NAME_RE
from triton_gke.contracts.paths import bench_build_dir
from triton_gke.one_line import CONSOLE_SCRIPT, OneLineParser, hint_command
from triton_gke.sandbox.processes import run_interruptible
from triton_gke.sandbox.triton_wheel import TritonStartError
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.stack import check_stack_name

FIELDS = ("mode", "requested_rps", "delivered_rps", "p50_ms", "p95_ms", "server_queue_ms", "server_compute_ms")


def parse_rates(text: str) -> list[float]:
    """Comma-separated requests/s, each in (0, 1000]."""
    try:
        rates = [float(r) for r in text.split(",")]
    except ValueError:
        raise ValueError("expected comma-separated numbers") from None
    if not all(0 < r <= 1000 for r in rates):  # also refuses nan
        raise ValueError("each rate must be in (0, 1000]")
    return rates


def check_model_name(name: str) -> str:
    """A model name as the stack accepts it (model_repo's MODEL_NAME_RE: a Triton model folder, one path component,
    so never '.', '..' or a path); ValueError naming the rule otherwise. It becomes part of a path below
    build/bench/<stack>/cpu."""
    if not MODEL_NAME_RE.fullmatch(name):
        raise ValueError("not a model name (a letter or digit, then letters, digits, '_', '-' or '.', at most 64)")
    return name


def measure(
    binary: Path, model: str, url: str, rates: list[float], out: Path, rows: list[dict] | None = None
) -> list[dict]:
    """One row per mode and rate, appended to `rows` as measured (so a failure keeps those before it); a failed run
    is a PerfAnalyzerError naming its mode and rate."""
    rows = [] if rows is None else rows
    for mode in ("sync", "async"):
        for rate in rates:
            load = perf_analyzer.Load(request_rate=rate, asynchronous=mode == "async")
            try:
                result = perf_analyzer.run(binary, model, url, "http", load, out / f"pa-{mode}-{rate:g}.csv")
            except perf_analyzer.PerfAnalyzerError as err:
                raise perf_analyzer.PerfAnalyzerError(f"{mode} at {rate:g} requests/s: {err}") from None
            rows.append(
                {
                    "mode": mode,
                    "requested_rps": rate,
                    "delivered_rps": round(result.rps, 2),
                    "p50_ms": round(result.p50_ms, 1),
                    "p95_ms": round(result.p95_ms, 1),
                    "server_queue_ms": round(result.server_queue_ms, 1),
                    "server_compute_ms": round(result.server_compute_ms, 1),
                }
            )
            print(",".join(str(rows[-1][f]) for f in FIELDS), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """SIGINT, SIGTERM or SIGHUP stops the server it started: one line, exit 128 + signal."""
    return run_interruptible(lambda: _pa_rates(argv), "stopped the server it started")


def _pa_rates(argv: list[str] | None) -> int:
    parser = OneLineParser(prog="triton-gke bench pa-rates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="original", help="a variant `make bench` built (default original)")
    parser.add_argument("--rates", default="25,30,35,40", help="comma-separated requests/s")
    parser.add_argument("--stack", default="dev", help="the stack whose bench build to serve (default dev)")
    parser.add_argument("--out", type=Path, required=True, help="folder for pa_rates.csv")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    try:
        rates = parse_rates(args.rates)
    except ValueError as err:
        parser.error(f"--rates {args.rates!r}: {err}")
    try:
        check_model_name(args.model)
    except ValueError as err:
        parser.error(f"--model {args.model!r}: {err}")
    try:  # the name is a folder below build/bench/: a path ('../dev', '') must not reach it
        check_stack_name(args.stack, "--stack")
    except ConfigError as err:
        parser.error(str(err))
    try:  # before minutes of measuring, not after them; never over earlier files (it writes warm-up.csv at once)
        check_new_or_empty(args.out, "pa-rates")
    except BenchError as err:
        print(f"error: {parser.prog}: {err}", file=sys.stderr)
        return 2
    repository = bench_build_dir() / args.stack / "cpu"
    if not (repository / args.model / "config.pbtxt").is_file():
        rebuild = hint_command("make bench", f"{CONSOLE_SCRIPT} bench --stack {args.stack}")
        print(f"error: {parser.prog}: {repository / args.model}: not built; run `{rebuild}` first", file=sys.stderr)
        return 2
    started = datetime.datetime.now(datetime.UTC)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    try:
        binary = perf_analyzer.ensure_binary()
        print(",".join(FIELDS))
        with sandbox_server(repository, args.model) as server:
            warm_up = perf_analyzer.Load(concurrency=1)  # the first measurement after a start is slow: discarded
            try:
                perf_analyzer.run(binary, args.model, server.http, "http", warm_up, args.out / "warm-up.csv")
            except perf_analyzer.PerfAnalyzerError as err:
                raise perf_analyzer.PerfAnalyzerError(f"warm-up: {err}") from None
            measure(binary, args.model, server.http, rates, args.out, rows)
    except (perf_analyzer.PerfAnalyzerError, TritonStartError) as err:
        # One line, and what was measured before it stays written: no traceback, no lost rows.
        _write(args.out, rows, argv, started)
        kept = f"{len(rows)} of {2 * len(rates)} rows in {args.out / 'pa_rates.csv'}"
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]  # a start error adds the server's log
        print(f"error: {parser.prog}: {first} ({kept})", file=sys.stderr)
        return 1
    _write(args.out, rows, argv, started)
    return 0


def _write(out: Path, rows: list[dict], argv: list[str], started: datetime.datetime) -> None:
    with (out / "pa_rates.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    write_meta(out / "meta.json", argv, started)


def write_meta(path: Path, argv: list[str], started: datetime.datetime) -> None:
    """How the folder was made: command, start (UTC), commit and machine facts (cores, CPU, versions)."""
    meta = {
        "command": " ".join(["triton-gke bench pa-rates", shlex.join(argv)]).strip(),
        "started_utc": started.isoformat(timespec="seconds"),
        **machine.facts(),  # its "commit" is the git commit, "(uncommitted changes)" when the tree differs
        "load_end": machine.load_average(),
    }
    path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
