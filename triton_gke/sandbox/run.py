"""The stack's serving path on this machine, with real software: `make sandbox`.

    triton-gke sandbox [--stack dev] [--duration 20] [--users N] [--keep-data] [--no-isolation]
                   [--out build/sandbox] [--set KEY=VALUE] [--config-file FILE] [--scenario load|rollout]

1. builds the stack's model repository (CPU twins in build/model_repository_cpu);
2. starts a GCS emulator and uploads the twins with model_repo.sync into gs://BUCKET/PREFIX;
3. starts the real tritonserver with the GKE command line, reading gs://BUCKET/PREFIX, inside a
   loopback-only network namespace shared with the emulator where the machine allows it;
4. starts Prometheus with the generated config (file_sd in place of kubernetes_sd) and rules;
5. runs the project's locustfile headless against Triton with the stack's load-test settings;
6. prints a report and writes it to OUT/report.json, with Locust's CSV files beside it.

--scenario rollout runs sandbox/rollout.py instead: two replicas behind haproxy through a rolling replacement,
a scale-in, a Spot preemption, a model update, a crash and a change of the inference key, with the stack's
lifecycle values; OUT/rollout/.

Every process it starts is stopped on success, failure, Ctrl-C, SIGTERM and SIGHUP. A part that cannot
start is named in one line on stderr; exit codes: 1 a part failed, 2 bad settings, 130/143/129 interrupted
(SIGINT/SIGTERM/SIGHUP).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.contracts.naming import model_bucket_name
from triton_gke.contracts.paths import built_repository, cpu_twin_repository, project_dir, sandbox_build_dir
from triton_gke.contracts.triton import ADMIN_KEY_HEADER, inference_key_header
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.observability.settings import TRITON_PODS
from triton_gke.one_line import OneLineParser, file_path, invoked_as
from triton_gke.sandbox import components as parts
from triton_gke.sandbox import inference_key, leftovers, out_folder, rollout, single_run
from triton_gke.sandbox import report as reporting
from triton_gke.sandbox.components import ComponentError, LoadSettings, LocustLoad, ScrapeTargets
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.processes import Interrupted, InterruptSignals
from triton_gke.sandbox.prometheus import LocalPrometheus
from triton_gke.sandbox.triton import TritonServer
from triton_gke.settings import ConfigError, StackSettings, from_stack_file
from triton_gke.settings.schema import overrides_from

SCENARIOS = ("load", "rollout")
SCRAPE_INTERVAL_S = 2  # short, so a run of a few seconds still gets a dozen samples
TICK_S = 5.0
FIRST_SCRAPE_TIMEOUT_S = 30.0
# Inferences per protocol the run sends without and with the inference key before the load (check_inference_key).
KEY_CHECKS = 5


class Progress:
    """Progress lines with the time since start, flushed at once (the output may be a pipe)."""

    def __init__(self) -> None:
        import psutil  # the 'local' extra: imported when used, so --help needs no extra

        # From the process's start: imports take a few seconds before the first line.
        self.started = time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:5.1f}s] {message}", flush=True)


# ---------------------------------------------------------------- signals


# ---------------------------------------------------------------- steps


def build_models(settings: StackSettings, progress: Progress) -> None:
    from triton_gke.model_repo.build import build_repository  # onnx, onnxruntime: imported when used (--help)

    started = time.monotonic()
    result = build_repository(settings.model_repo, built_repository(), cpu_out=cpu_twin_repository())
    progress(
        f"model repository: {len(result.models)} models ({', '.join(result.models)}) in "
        f"{time.monotonic() - started:.1f} s; CPU twins in {_shown(cpu_twin_repository())}"
    )


def open_namespace(no_isolation: bool, progress: Progress, cleanup: contextlib.ExitStack) -> NetworkNamespace | None:
    if no_isolation or not isolation_available():
        why = "--no-isolation" if no_isolation else "no permission for network namespaces (unshare -n) here"
        progress(f"network: {why}; everything runs plainly on 127.0.0.1 with free ports")
        return None
    try:
        netns = NetworkNamespace().open()
    except RuntimeError as err:
        raise ComponentError(f"network namespace could not be created: {parts.one_line(err)}") from None
    cleanup.callback(netns.close)
    progress(
        "network: GCS emulator and tritonserver share a loopback-only network namespace "
        "(GKE's ports 8000-8002 inside), forwarded to 127.0.0.1"
    )
    return netns


def start_storage(
    settings: StackSettings, netns: NetworkNamespace | None, progress: Progress, cleanup: contextlib.ExitStack
) -> tuple[parts.GcsEmulator, str]:
    gcs = parts.start_emulator(netns)
    cleanup.callback(gcs.stop)
    progress(f"GCS emulator: {gcs.endpoint} (Triton uses {gcs.internal_endpoint})")
    bucket = model_bucket_name(settings.project, settings.stack)  # the name `pulumi up` gives the stack's bucket
    started = time.monotonic()
    sync = parts.upload(gcs, cpu_twin_repository(), bucket, settings.model_store.prefix)
    repository = f"gs://{bucket}/{settings.model_store.prefix}"
    progress(
        f"uploaded {len(sync.uploaded)} files ({sync.bytes_uploaded / 2**20:.0f} MiB) to {repository} "
        f"with model_repo.sync in {time.monotonic() - started:.1f} s"
    )
    return gcs, repository


def prepare_triton(
    repository: str,
    gcs: parts.GcsEmulator,
    netns: NetworkNamespace | None,
    out: Path,
    cleanup: contextlib.ExitStack,
    inference: dict[str, str],
    slot: str,
) -> tuple[TritonServer, str, list[Path]]:
    """The server with its ports chosen, not started: Prometheus can be told where to scrape it first. `inference`:
    the inference key's header and key (inference_headers), empty without inferenceAuth."""
    key = parts.admin_key()
    server = parts.prepare_triton(repository, gcs, netns, key, next(iter(inference.values()), None), slot)
    copies: list[Path] = []  # filled once it runs; removed if it ever leaves them behind
    cleanup.callback(parts.stop_triton, server, copies, out / out_folder.TRITON_LOG)
    return server, key, copies


def inference_headers(settings: StackSettings) -> dict[str, str]:
    """A fresh inference key in the header of the stack's inferenceKeySlot; {} with inferenceAuth false."""
    if not settings.serving.inference_auth:
        return {}
    return {inference_key_header(settings.serving.inference_key_slot): parts.admin_key()}


def check_inference_key(server: TritonServer, load: LoadSettings, headers: dict[str, str], progress: Progress) -> None:
    """What the key does, with the load test's model and payload: inferences served without it and with it."""
    model = {"model": load.model, "dtype": "UINT8" if load.payload == "uint8" else "FP32"}
    without = inference_key.count_served(lambda: (server,), {}, KEY_CHECKS, **model)
    if not headers:
        progress(f"inference: no key (inferenceAuth false); served {without.line()} without one")
        return
    with_key = inference_key.count_served(lambda: (server,), headers, KEY_CHECKS, **model)
    progress(f"inference key ({next(iter(headers))}): served without it {without.line()}, with it {with_key.line()}")


def launch_triton(server: TritonServer, key: str, copies: list[Path], progress: Progress) -> None:
    started = time.monotonic()
    parts.launch_triton(server)
    copies.extend(parts.model_copies(server))
    denied, _ = parts.repository_index(server, {})
    allowed, models = parts.repository_index(server, {ADMIN_KEY_HEADER: key})
    ready = [m.get("name", "?") for m in models if m.get("state") == "READY"]
    progress(
        f"tritonserver: {len(ready)} models READY from {server.model_repository} in "
        f"{time.monotonic() - started:.1f} s (GKE command line; admin API answered {denied} without the "
        f"generated key, {allowed} with it; model copies in "
        f"{'its own /tmp' if parts.has_private_tmp(server) else 'its work folder'}); "
        f"http {server.http_url}, grpc {server.grpc_url}, metrics {server.metrics_url}"
    )


def start_prometheus(
    settings: StackSettings,
    server: TritonServer,
    locust: LocustLoad,
    out: Path,
    keep_data: bool,
    progress: Progress,
    cleanup: contextlib.ExitStack,
) -> LocalPrometheus:
    """Started before Triton loads its models: Prometheus hands new targets to its scrapers only
    every 5 s, and that wait then overlaps the loading instead of delaying the load test."""
    prometheus = parts.SandboxPrometheus(out / out_folder.PROMETHEUS_DATA if keep_data else None)
    cleanup.callback(prometheus.close)
    triton_ports = {"http": server.http_url, "grpc": server.grpc_url, "metrics": f"127.0.0.1:{server.metrics_port}"}
    targets = ScrapeTargets(triton=triton_ports, locust={"metrics": locust.metrics_address})
    interval = f"{SCRAPE_INTERVAL_S}s"
    config = parts.prometheus_files(out, prometheus, settings.stack, settings.monitoring.slo, targets, interval)
    parts.start_prometheus(prometheus, config)
    progress(
        f"Prometheus: {prometheus.url} with the generated config (region {parts.REGION}, file_sd for "
        f"kubernetes_sd) and rules ({_shown(out)}/prometheus.yml, rules.yml), scraping tritonserver and "
        f"the Locust master every {interval}"
    )
    return prometheus


def run_load(
    locust: LocustLoad, prometheus: LocalPrometheus, progress: Progress, cleanup: contextlib.ExitStack
) -> None:
    load = locust.load
    cleanup.callback(locust.stop)
    locust.start()
    progress(f"Locust: {load.describe()} on {load.model} over {load.protocol} ({load.payload}) for {load.duration_s} s")
    locust.wait(TICK_S, lambda elapsed: progress(_load_line(prometheus, elapsed, load.duration_s)))
    shown = _shown(locust.csv_prefix)
    progress(f"Locust finished; statistics in {shown}.json and {shown}_stats.csv")


def _load_line(prometheus: LocalPrometheus, elapsed: float, duration_s: int) -> str:
    """What Prometheus has scraped from the Locust master so far."""
    requests = reporting.scalar(prometheus, "sum(locust_requests_total)")
    if requests is None:
        return f"  load {elapsed:.0f}/{duration_s} s: waiting for Prometheus' first scrape of Locust"
    failures = reporting.scalar(prometheus, "sum(locust_failures_total)") or 0
    return (
        f"  load {elapsed:.0f}/{duration_s} s: {requests:.0f} requests, {failures:.0f} failures "
        "(Prometheus' latest scrape of the Locust master)"
    )


def collect(
    settings: StackSettings, load: LoadSettings, locust: LocustLoad, prometheus: LocalPrometheus, window_s: int
) -> reporting.Report:
    # One more scrape and rule evaluation, so the recording rules cover the end of the load.
    time.sleep(2 * SCRAPE_INTERVAL_S + 0.5)
    slo = settings.monitoring.slo
    results = reporting.run_queries(prometheus, reporting.report_queries(load.model, slo, window_s))
    summary: dict[str, Any] = {
        "stack": settings.stack,
        "region": parts.REGION,
        **asdict(load),
        "locust": reporting.locust_results(locust.csv_prefix, load.duration_s),
        "triton": reporting.triton_summary(results, slo),
        "alerts": reporting.alerts(results),
        "targets": reporting.targets(results),
        "slo": {"latency_ms": slo.latency_ms, "quantile": slo.quantile, "for_minutes": slo.for_minutes},
        "random_weights": True,
    }
    return reporting.Report(summary, results)


def _shown(path: Path) -> str:
    path = Path(path)
    here = project_dir()
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)


def _files(out: Path) -> list[str]:
    return sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())


# ---------------------------------------------------------------- the run


def track_this_run(progress: Progress, cleanup: contextlib.ExitStack) -> leftovers.RunState:
    """Stop what an earlier, killed run left behind (its own processes only, then its run folder), then record
    this run's; every temporary folder of this run lives in its run folder (state.run_folder) from here on."""
    cleaned = leftovers.clean_leftovers()
    if cleaned or cleaned.spared:
        progress(cleaned.summary())
    state = leftovers.RunState().open()
    cleanup.callback(state.close)  # registered first, so it runs last: after every process was stopped
    return state


def run(args: argparse.Namespace, settings: StackSettings, progress: Progress, cleanup: contextlib.ExitStack) -> int:
    try:  # one run per checkout (sandbox/single_run.py says why); released last, after everything stopped
        cleanup.enter_context(single_run.only_run())
    except single_run.SandboxBusy as err:
        raise ComponentError(str(err)) from None
    state = track_this_run(progress, cleanup)
    if args.scenario == "rollout":  # sandbox/rollout.py: replicas behind haproxy through rollouts, under load
        # Only OUT/rollout, and only when OUT/.sandbox-files lists it (sandbox/out_folder.py).
        out = out_folder.prepare_out_folder(args.out.resolve(), args.scenario) / out_folder.ROLLOUT
        out.mkdir()
        return rollout.run(settings, out, progress, cleanup, state)
    out = out_folder.prepare_out_folder(args.out.resolve(), args.scenario, args.keep_data)
    lt = settings.load_test
    load = LoadSettings(
        lt.model, lt.protocol, lt.payload, lt.rps_per_user, args.users, args.duration, rate=lt.rate, arrival=lt.arrival
    )
    timings: dict[str, float] = {}
    mark = time.monotonic()

    def timed(step: str) -> None:
        nonlocal mark
        timings[step], mark = round(time.monotonic() - mark, 1), time.monotonic()

    build_models(settings, progress)
    timed("build_s")
    netns = open_namespace(args.no_isolation, progress, cleanup)
    gcs, repository = start_storage(settings, netns, progress, cleanup)
    state.add_folder(gcs.workdir)
    timed("storage_s")
    headers = inference_headers(settings)
    server, key, copies = prepare_triton(
        repository, gcs, netns, out, cleanup, headers, settings.serving.inference_key_slot
    )
    state.add_folder(server.workdir)
    state.add_shm_prefix(server.shm_prefix)
    locust = LocustLoad(load, server, out, headers)
    prometheus = start_prometheus(settings, server, locust, out, args.keep_data, progress, cleanup)
    state.add_folder(prometheus.workdir)
    prometheus_started = time.monotonic()
    timed("prometheus_s")
    launch_triton(server, key, copies, progress)
    check_inference_key(server, load, headers, progress)
    state.snapshot()  # tritonserver and its stubs, at once
    for folder in copies:
        state.add_folder(folder)
    parts.wait_for_first_scrape(prometheus, TRITON_PODS.job, FIRST_SCRAPE_TIMEOUT_S)
    timed("triton_s")
    run_load(locust, prometheus, progress, cleanup)
    timed("load_s")
    window_s = int(time.monotonic() - prometheus_started) + 10
    report = collect(settings, load, locust, prometheus, window_s)
    timings["total_s"] = round(time.monotonic() - progress.started, 1)
    report.summary.update(
        network="namespace" if netns else "host",
        bucket=repository,
        triton_command=parts.masked_command(server, key),
        timings_s=timings,
        out_dir=_shown(out),
    )
    report.summary["files"] = sorted({*_files(out), out_folder.REPORT, out_folder.TRITON_LOG})  # the log: at cleanup
    reporting.write_json(report, out / out_folder.REPORT)
    print(reporting.render(report), flush=True)
    locust_results = report.summary["locust"]
    if locust_results["requests"] == locust_results["failures"]:
        raise ComponentError(
            f"Locust got no successful answer from tritonserver; see {_shown(out)}/locust_failures.csv"
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], **invoked_as("sandbox", "sandbox"))
    parser.add_argument("--stack", default="dev", help="stack whose settings are used (default: dev)")
    parser.add_argument("--duration", type=_positive, default=20, help="seconds of load (default: 20)")
    parser.add_argument("--users", type=_positive, default=4, help="simulated Locust users (default: 4)")
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default=SCENARIOS[0],
        help="load: one Triton under load (default); rollout: two replicas behind haproxy through rollouts, "
        "scale-in, Spot preemption, a model update, a crash and an inference key change, counting every failed "
        "request (OUT/rollout/; "
        "its load is fixed: --duration, --users, --keep-data and --no-isolation do not apply)",
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the Prometheus TSDB in OUT/prometheus-data")
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="run on 127.0.0.1 with free ports even where a network namespace is possible",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=sandbox_build_dir(),
        help="results folder: new, empty or an earlier run's (default: build/sandbox)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a stack setting")
    # The same settings options as make plan: make_args hands them to make model-repo first, so the repository
    # built and the sandbox run read the same settings.
    parser.add_argument("--config-file", type=file_path, metavar="FILE", help="stack settings from FILE instead")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def check_out(out: Path, scenario: str) -> None:
    """ConfigError, one line naming --out, before anything starts: a results folder this run could not write into
    (an existing file, a path under /proc or /sys, a read-only folder), a link, or a folder holding files the sandbox
    did not write (sandbox/out_folder.py: it removes only what its list names)."""
    out_folder.check_out_folder(out, scenario)


def _settings(args: argparse.Namespace) -> StackSettings:
    try:
        return from_stack_file(args.stack, overrides_from(args.set), args.config_file)
    except FileNotFoundError as err:  # no Pulumi.<stack>.yaml
        raise ConfigError(f"--stack {args.stack}: {err}") from None


# Options of the load scenario that the rollout scenario's fixed load does not take: refused, not ignored.
LOAD_ONLY_OPTIONS = ("--duration", "--users", "--keep-data", "--no-isolation")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.scenario == "rollout":
        words = sys.argv[1:] if argv is None else argv
        given = [o for o in LOAD_ONLY_OPTIONS if any(w == o or w.startswith(f"{o}=") for w in words)]
        if given:
            parser.error(f"{given[0]}: not with --scenario rollout (its load is fixed)")
    progress = Progress()
    signals = InterruptSignals()
    with signals.installed():
        try:
            check_out(args.out, args.scenario)
            settings = _settings(args)
            progress(f"stack {args.stack}: settings loaded as the Pulumi program reads them")
            with contextlib.ExitStack() as cleanup:
                try:
                    code = run(args, settings, progress, cleanup)
                finally:
                    signals.shielded = True
                    progress("stopping every process the sandbox started")
            progress("stopped")
            if signals.received:  # arrived during the cleanup: the run still counts as interrupted
                raise Interrupted(signals.received)
            return code
        except (ConfigError, ModelRepoError) as err:
            print(f"error: {parts.one_line(err)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except (ComponentError, reporting.ReportError) as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_FAILED
        except Interrupted as err:
            print(f"interrupted by {err}: stopped every process the sandbox started", file=sys.stderr)
            return 128 + err.signum


if __name__ == "__main__":
    sys.exit(main())
