"""The real Locust running loadtest/locustfile.py against a real tritonserver (CPU twin of `original`).

Each run is `locust --headless` in a subprocess, configured only through the environment
variables of the `locust-config` ConfigMap, exactly as in the cluster. The model has random
weights: these tests check the load test's behaviour, not the model.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.checkout import PROJECT_DIR
from triton_gke.model_repo.build import BuildResult
from triton_gke.sandbox.netns import isolation_available
from triton_gke.sandbox.processes import free_port
from triton_gke.sandbox.report import locust_results
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.triton_fixtures", "tests.support.bench_fixtures")

LOCUSTFILE = PROJECT_DIR / "loadtest" / "locustfile.py"
LOCUST = Path(sys.executable).parent / "locust"
CONFIG_KEYS = (
    *("model", "saddr", "rps", "protocol", "payload", "input_name", "output_name", "batch", "timeout_s"),
    *("metrics_port", "metrics_addr", "rate", "arrival", "trace", "rate_steps", "users"),
)
# Marks every locust this module starts, to find any left behind.
MARK_KEY, MARK_VALUE = "LOCUST_TEST_RUN", uuid.uuid4().hex
# A deadline that only ends a hung run, never a slow one: the tests wait on what Locust does (its metrics, its exit),
# and a start or shutdown on busy cores can take tens of seconds (imports of numpy, tritonclient, gevent and Locust).
HANG_S = 120
METRICS = (
    "locust_users",
    "locust_requests_per_second",
    "locust_failures_per_second",
    "locust_response_time_p50_ms",
    "locust_response_time_p95_ms",
    "locust_requests_total",
    "locust_failures_total",
)
Samples = dict[str, list[tuple[dict[str, str], float]]]  # metric name -> (labels, value)
NO_PROXY = {"http_proxy", "https_proxy", "grpc_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"}


@dataclass
class LocustRun:
    """A locust process: started, then finished into its exit code, output, CSV files and final JSON stats."""

    process: subprocess.Popen[bytes]
    prefix: Path
    run_time_s: int
    code: int | None = None
    output: str = ""

    def finish(self) -> LocustRun:
        """Wait for locust to stop by itself; kill it and fail if it is still running HANG_S after its time limit."""
        try:
            self.process.wait(timeout=self.run_time_s + HANG_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"locust still running {HANG_S} s after its {self.run_time_s} s time limit:\n{self.log_text()}")
        self.code = self.process.returncode
        self.output = self.log_text()
        return self

    def log_text(self) -> str:
        return self.prefix.with_suffix(".log").read_text(errors="replace")

    def wait_while_running(self, condition: Callable[[], bool], interval_s: float = 0.5) -> bool:
        """Poll `condition` while locust runs: True once it holds, False if locust exited first (or hung: HANG_S
        past its time limit). No time budget: a start that takes long on busy cores only makes the wait longer."""
        deadline = time.monotonic() + self.run_time_s + HANG_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if condition():
                return True
            time.sleep(interval_s)
        return False

    def rows(self, kind: str) -> list[dict[str, str]]:
        with open(f"{self.prefix}_{kind}.csv", newline="") as handle:
            return list(csv.DictReader(handle))

    def counts(self) -> tuple[int, int]:
        """(requests, failures) of the whole run, complete: from the --json-file, which Locust writes at exit
        after runner.quit() (locust 2.47 main.py shutdown(): save_stats_json after runner.quit(); stats.py
        save_stats_json: a list of StatsEntryDict, num_requests and num_failures per entry). The _stats.csv is
        rewritten by a greenlet once a second (stats.py CSV_STATS_INTERVAL_SEC = 1, stats_writer) and not at
        exit (StatsCSVFileWriter.close_files only closes): it misses up to the last second (85 vs 86 seen)."""
        figures = locust_results(self.prefix, self.run_time_s)  # the sandbox report's reader of that file
        return int(figures["requests"] or 0), int(figures["failures"] or 0)

    def aggregated(self) -> dict[str, str]:
        """The CSV's Aggregated row (percentiles, rates), with the complete counts of the JSON file."""
        row = next(row for row in self.rows("stats") if row["Name"] == "Aggregated")
        requests, failures = self.counts()
        return {**row, "Request Count": str(requests), "Failure Count": str(failures)}


def start_locust(
    folder: Path,
    settings: Mapping[str, str],
    users: int,
    run_time_s: int,
    role: Sequence[str] = (),
    launcher: Sequence[str] = (),
) -> LocustRun:
    """A headless run (`role` adds --master options), or a worker when users is 0; `launcher` replaces the
    `locust` command (STALLED_START)."""
    env = {k: v for k, v in os.environ.items() if k not in CONFIG_KEYS and k not in NO_PROXY}
    env.update({"metrics_port": "0", **settings, "no_proxy": "*", MARK_KEY: MARK_VALUE})
    prefix = folder / f"run{len(list(folder.glob('*.log')))}"
    command = [*(launcher or [str(LOCUST)]), "-f", str(LOCUSTFILE), *role]
    if users:
        # --json-file writes {prefix}.json (stats.py save_stats_json); with it Locust prints no summary table.
        command += ["--headless", "--only-summary", "--csv", str(prefix), "--json-file", str(prefix)]
        command += ["-u", str(users), "-r", str(users), "-t", f"{run_time_s}s"]
    with prefix.with_suffix(".log").open("wb") as log:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    return LocustRun(process, prefix, run_time_s)


def connections(run: LocustRun, port: int) -> int:
    """Established TCP connections from the locust process to a server port (0 once it has exited)."""
    try:
        found = psutil.Process(run.process.pid).net_connections(kind="tcp")
    except psutil.Error:
        return 0
    return sum(1 for c in found if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def served(server: TritonServer, model: str = "original") -> int:
    """Successful inferences of a model, from Triton's statistics API."""
    url = f"http://{server.http_url}/v2/models/{model}/stats"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as response:
            return int(json.load(response)["model_stats"][0]["inference_stats"]["success"]["count"])
    except OSError:
        return 0


def scrape(port: int) -> Samples:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def client_successes(port: int) -> int:
    """Requests that succeeded as the locust client saw them (a server may finish a request the client gave up
    on), from the run's metrics endpoint; 0 while it is not up yet."""
    try:
        samples = scrape(port)
    except OSError:
        return 0
    requests = sum(v for _, v in samples.get("locust_requests_total", []))
    return int(requests - sum(v for _, v in samples.get("locust_failures_total", [])))


def client_failures(port: int) -> int:
    try:
        samples = scrape(port)
    except OSError:
        return 0
    return int(sum(v for _, v in samples.get("locust_failures_total", [])))


def locust_processes() -> list[int]:
    """Processes that carry this module's run mark in their environment."""
    processes = psutil.process_iter(["pid", "environ"])
    return [p.info["pid"] for p in processes if (p.info.get("environ") or {}).get(MARK_KEY) == MARK_VALUE]


def start_triton(model_repos: BuildResult) -> TritonServer:
    """A server with only `original` loaded: the other twins would only slow these 2 cores down."""
    server = TritonServer(
        model_repos.cpu_out,
        isolate_network=isolation_available(),
        flags={"model-control-mode": "explicit", "load-model": ["original"]},
        ready_timeout_s=240,
    )
    try:
        return server.start()
    except BaseException:
        server.close()
        raise


@pytest.fixture(scope="module")
def triton(model_repos: BuildResult) -> Iterator[TritonServer]:
    server = start_triton(model_repos)
    yield server
    server.close()


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind() -> Iterator[None]:
    yield
    left = locust_processes()
    for pid in left:  # only processes this module started (they carry its mark)
        psutil.Process(pid).kill()
    assert left == [], "locust processes left running"


@dataclass
class WatchedRun:
    run: LocustRun
    saw_requests: bool  # the metrics endpoint showed requests while locust ran
    metrics: Samples
    connections: int  # TCP connections to Triton while it ran


@pytest.fixture(scope="module")
def http_run(triton: TritonServer, tmp_path_factory: pytest.TempPathFactory) -> WatchedRun:
    """One 10 s HTTP run with 4 users, watched while it runs: metrics endpoint and connections."""
    port = free_port()
    settings = {"saddr": triton.http_url, "metrics_port": str(port), "metrics_addr": "127.0.0.1"}
    run = start_locust(tmp_path_factory.mktemp("http"), settings, users=4, run_time_s=10)
    watched = WatchedRun(run, False, {}, 0)

    def watch() -> bool:
        try:
            watched.metrics = scrape(port)
        except OSError:
            return False
        watched.connections = connections(run, triton.http_port)
        requests = sum(v for _, v in watched.metrics.get("locust_requests_total", []))
        watched.saw_requests |= requests >= 8 and "locust_response_time_p95_ms" in watched.metrics
        return watched.saw_requests and watched.connections == 4  # every user connected (spawned over ~1 s)

    run.wait_while_running(watch)
    run.finish()
    return watched


def test_http_run_reports_throughput_and_percentiles(http_run: WatchedRun) -> None:
    run = http_run.run
    assert run.code == 0, run.output
    total = run.aggregated()
    assert int(total["Request Count"]) > 0 and int(total["Failure Count"]) == 0, total
    assert float(total["Requests/s"]) > 0
    assert 0 < float(total["50%"]) <= float(total["95%"])
    assert [(r["Type"], r["Name"]) for r in run.rows("stats")] == [("infer-http", "original"), ("", "Aggregated")]


def test_each_user_holds_its_own_connection(http_run: WatchedRun) -> None:
    # One TCP connection per user is what lets a ClusterIP Service spread users over pods.
    assert http_run.connections == 4


def test_metrics_endpoint_serves_live_locust_stats(http_run: WatchedRun) -> None:
    assert http_run.saw_requests, f"metrics never showed requests: {http_run.metrics}"
    metrics = http_run.metrics
    assert set(METRICS) <= set(metrics), sorted(metrics)
    assert metrics["locust_users"] == [({}, 4.0)]
    for name in METRICS[1:]:
        assert [labels["name"] for labels, _ in metrics[name]] == ["original"], (name, metrics[name])
    assert metrics["locust_requests_total"][0][1] >= 8
    assert metrics["locust_failures_total"][0][1] == 0
    assert metrics["locust_response_time_p95_ms"][0][1] > 0


def test_master_with_workers_serves_metrics_of_all_workers(triton: TritonServer, tmp_path: Path) -> None:
    # As in the cluster: workers send the load, only the master serves metrics (workers get the same
    # metrics_port; had they tried to serve it too, all but one would log "cannot listen").
    port, bus = free_port(), free_port()
    settings = {"saddr": triton.http_url, "metrics_port": str(port), "metrics_addr": "127.0.0.1"}
    master_role = ["--master", "--master-bind-host=127.0.0.1", f"--master-bind-port={bus}", "--expect-workers=2"]
    master = start_locust(tmp_path, settings, users=4, run_time_s=6, role=master_role)
    worker_role = ["--worker", "--master-host=127.0.0.1", f"--master-port={bus}"]
    workers = [start_locust(tmp_path, settings, users=0, run_time_s=6, role=worker_role) for _ in range(2)]
    seen: Samples = {}

    def watch() -> bool:
        try:
            seen.update(scrape(port))
        except OSError:
            return False
        return sum(v for _, v in seen.get("locust_requests_total", [])) >= 4

    watched = master.wait_while_running(watch)
    master.finish()
    for worker in workers:
        worker.finish()  # workers quit when the master does
    assert master.code == 0 and all(w.code == 0 for w in workers), master.output
    assert watched, f"metrics never showed requests: {seen}"
    assert seen["locust_users"] == [({}, 4.0)]
    assert int(master.aggregated()["Request Count"]) > 0
    assert all("cannot listen" not in run.output for run in (master, *workers))


def test_grpc_run_paced_by_rps_per_user(triton: TritonServer, tmp_path: Path) -> None:
    # Constant arrivals: with the default Poisson ones the count is random (mean 9 here; a CI run saw 13).
    settings = {"protocol": "grpc", "saddr": triton.grpc_url, "rps": "0.5", "arrival": "constant"}
    run = start_locust(tmp_path, settings, users=3, run_time_s=6)
    seen = run.wait_while_running(lambda: connections(run, triton.grpc_port) == 3)
    run.finish()
    assert run.code == 0, run.output
    total = run.aggregated()
    assert int(total["Request Count"]) >= 3 and int(total["Failure Count"]) == 0, total
    # Paced: at most one arrival at start plus rps x run time per user (unthrottled: ~6/s here).
    assert int(total["Request Count"]) <= 3 * (1 + 0.5 * run.run_time_s)
    assert total["Type"] == "" and run.rows("stats")[0]["Type"] == "infer-grpc"
    assert seen, "gRPC users should not share one connection"


def test_uint8_payload_to_fp32_model_is_reported_as_failures(triton: TritonServer, tmp_path: Path) -> None:
    run = start_locust(tmp_path, {"saddr": triton.http_url, "payload": "uint8", "rps": "5"}, users=1, run_time_s=3)
    run.finish()
    assert run.code == 1, run.output  # Locust exits 1 when any request failed
    assert int(run.aggregated()["Failure Count"]) > 0
    [failure] = run.rows("failures")
    assert "data-type is 'UINT8', but model 'original' expects 'FP32'" in failure["Error"]
    assert "Traceback" not in run.output


# Locust's headless stop at its time limit logs this line (locust 2.47 main.py stop_and_optionally_quit: the default
# reason "--run-time limit reached", then "shutting down"): the run ended by its own limit, not by finish()'s kill.
RUN_TIME_REACHED = "--run-time limit reached, shutting down"


@pytest.fixture
def own_slow_triton(slow_repository: Path) -> Iterator[TritonServer]:
    """A slow twin's server of the test's own, to kill or suspend: the slow twin, not ResNet-50, because its answer
    (a 40 ms sleep) stays far inside the tests' timeout_s however busy the cores are; of its own, because requests
    held by a suspended server are answered after it resumes, into the next test's counts."""
    with TritonServer(slow_repository, ready_timeout_s=120) as server:
        yield server


def test_killed_server_counts_failures_and_run_ends_on_time(
    own_slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    name, _ = slow_model
    port = free_port()
    settings = {"saddr": own_slow_triton.http_url, "model": name, "timeout_s": "2", "metrics_port": str(port)}
    run = start_locust(tmp_path, settings | {"metrics_addr": "127.0.0.1"}, users=2, run_time_s=10)
    # A success as the client saw it (not only served: a client past its timeout fails a served request), so that
    # Request Count > Failure Count below holds.
    assert run.wait_while_running(lambda: client_successes(port) >= 1), f"no request succeeded:\n{run.log_text()}"
    own_slow_triton.kill()
    run.finish()
    assert run.code == 1, run.output  # failures, not a crash: Locust's exit code for failed requests
    assert RUN_TIME_REACHED in run.output, run.output
    total = run.aggregated()
    assert int(total["Failure Count"]) > 0 and int(total["Request Count"]) > int(total["Failure Count"])
    assert "Traceback" not in run.output


def test_hung_server_times_out_instead_of_hanging(
    own_slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """Suspended (ports open, nothing answers), the server fails requests by the client's timeout_s."""
    name, _ = slow_model
    port = free_port()
    settings = {"saddr": own_slow_triton.http_url, "model": name, "timeout_s": "3", "metrics_port": str(port)}
    run = start_locust(tmp_path, settings | {"metrics_addr": "127.0.0.1"}, users=2, run_time_s=15)
    try:
        # A success the client saw before the server stops answering: Request Count > Failure Count below.
        assert run.wait_while_running(lambda: client_successes(port) >= 1), f"no request succeeded:\n{run.log_text()}"
        own_slow_triton.suspend()
        # Until a request times out, or the run ends: one in flight at the end still times out and counts (the stop
        # waits timeout_s + 1 for it: the locustfile's on_init).
        run.wait_while_running(lambda: client_failures(port) >= 1)
        run.finish()
    finally:
        own_slow_triton.resume()
    assert run.code == 1, run.output
    assert RUN_TIME_REACHED in run.output, run.output
    total = run.aggregated()
    assert int(total["Failure Count"]) > 0 and int(total["Request Count"]) > int(total["Failure Count"])
    errors = [row["Error"] for row in run.rows("failures")]
    assert errors and all("timed out" in error.lower() for error in errors), errors


def test_rate_is_independent_of_the_user_count(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """Open loop: 2 users or 12, the same 10 requests/s reach a server that takes 40 ms each (users only
    bound the requests in flight). Paced per user (the old way), 12 users would have sent 6x as many."""
    name, _ = slow_model
    counts = {}
    for users in (2, 12):
        # Constant arrivals: a count with no chance in it (Poisson's sd ~11 made a 2.9-sigma check of the difference).
        settings = {"saddr": slow_triton.http_url, "model": name, "rate": "10", "output_name": "probabilities"}
        settings["arrival"] = "constant"
        run = start_locust(tmp_path, settings, users=users, run_time_s=12).finish()
        assert run.code == 0, run.output
        total = run.aggregated()
        assert int(total["Failure Count"]) == 0, total
        counts[users] = int(total["Request Count"])
    # One arrival every 0.1 s from the test's start to its 12 s limit: 120 (complete JSON counts). Below 100 needs
    # 2 s of arrivals still queued or in flight at the stop; above 130, the time limit firing 1 s late. Per-user
    # pacing makes the 12-user count 6x the 2-user one: both cannot be inside.
    for users, count in counts.items():
        assert 100 <= count <= 130, (users, counts)


def test_workers_share_the_rate_of_the_whole_test(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """As in the cluster: `rate` is the whole test's; the master gives each of 2 workers half of it."""
    name, _ = slow_model
    bus = free_port()
    settings = {"saddr": slow_triton.http_url, "model": name, "rate": "10", "output_name": "probabilities"}
    settings["arrival"] = "constant"  # no chance in the count (a Poisson count of ~120 has sd ~11)
    before = served(slow_triton, name)
    master_role = ["--master", "--master-bind-host=127.0.0.1", f"--master-bind-port={bus}", "--expect-workers=2"]
    master = start_locust(tmp_path, settings, users=6, run_time_s=12, role=master_role)
    worker_role = ["--worker", "--master-host=127.0.0.1", f"--master-port={bus}"]
    workers = [start_locust(tmp_path, settings, users=0, run_time_s=12, role=worker_role) for _ in range(2)]
    master.finish()
    for worker in workers:
        worker.finish()
    assert master.code == 0 and all(w.code == 0 for w in workers), master.output
    assert int(master.aggregated()["Request Count"]) > 0
    # Counted by the server, not the master: the master waits only 0.5 s for the workers' final reports
    # (locust 2.47 runners.py MasterRunner.quit: gevent.sleep(0.5)) and workers report every 3 s
    # (WORKER_REPORT_INTERVAL): its total can miss seconds of requests. The server counts every one sent.
    count = served(slow_triton, name) - before
    # 5/s per worker for ~12 s: <= ~122. Each share message (once a second) restarts a worker's constant gaps
    # (loadtest/locustfile.py Arrivals._run), so 4 or 5 per second: >= ~96, less a late start. Each worker at
    # the full rate would make ~190-240.
    assert 75 <= count <= 140, count


def test_trace_and_rate_steps_drive_the_load(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """A recorded trace replays at its own mean rate (here 10 requests/s: 50 ms and 150 ms gaps); a
    rate_steps shape runs its users for the shape's length, then stops the test by itself."""
    name, _ = slow_model
    trace = tmp_path / "trace.txt"
    # microseconds, as perf_analyzer's --request-intervals. 10/s, not 20/s: the one-instance 40 ms server at 40 %
    # busy, not 80 % (at 20/s a service time above ~72 ms on loaded cores capped the count under its bound of 110).
    trace.write_text("50000\n150000\n")
    base = {"saddr": slow_triton.http_url, "model": name, "output_name": "probabilities"}
    run = start_locust(tmp_path, {**base, "arrival": "trace", "trace": str(trace)}, users=4, run_time_s=8).finish()
    assert run.code == 0, run.output
    # 8 s at 10/s, deterministic gaps: 80. Below 60: 2 s of arrivals lost at the stop; above 100: the time limit
    # 2 s late. The trace ignored (closed loop, 4 users flat out) gives ~25/s: ~200; a wrong time unit ~0.
    assert 60 <= int(run.aggregated()["Request Count"]) <= 100
    # Constant arrivals: the count has no chance in it. The shape ticks once a second (locust runners.py
    # shape_worker) at rates 5, 5, 5, 5, 8.3, 11.7 (rate_at of t = 0..5), then None ends the test: ~40 in all
    # (a tick keeps the schedule's phase: arrivals.rescaled_due). 25 and 65 leave ticks 1.6 s apart or 10 arrivals
    # lost; rates per user (x3) would make ~120, users flat out ~150.
    shaped = {**base, "rate_steps": "5:3,5-15:3", "users": "3", "arrival": "constant"}
    run = start_locust(tmp_path, shaped, users=1, run_time_s=60).finish()
    assert run.code == 0, run.output
    # Ended by the shape's own None (locust 2.47 main.py: stop_and_optionally_quit(reason="Shape test completed")
    # logs "<reason>, shutting down"); a shape never ending would run until finish() kills it and fails.
    assert "Shape test completed, shutting down" in run.output, run.output
    assert 25 <= int(run.aggregated()["Request Count"]) <= 65


def test_a_shape_repeating_its_rate_keeps_constant_arrivals_on_schedule(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """The shape sets its rate again at every 1-s tick (locust runners.py shape_worker). 1.5 requests/s for 8 s
    is 12 requests at gaps of 0.67 s; restarting the gap at each tick sent one a second: 8."""
    name, _ = slow_model
    shaped = {"saddr": slow_triton.http_url, "model": name, "output_name": "probabilities"}
    shaped |= {"rate_steps": "1.5:8", "users": "2", "arrival": "constant"}
    run = start_locust(tmp_path, shaped, users=1, run_time_s=60).finish()
    assert run.code == 0, run.output
    requests, failures = run.counts()
    assert failures == 0 and 10 <= requests <= 13, requests  # 11 or 12: the 12th falls on the shape's end


# The `locust` command (locust.main:main, its console script) after its event loop's thread stalled STALL_S seconds
# without running the loop, as the imports of a start on busy cores do: gevent's cached loop time then lags the clock.
STALLED_START = """
import sys
import gevent, locust
from gevent import monkey
gevent.get_hub()
monkey.get_original("time", "sleep")(float(sys.argv.pop(1)))
from locust.main import main
sys.argv[0] = "locust"
sys.exit(main())
"""
STALL_S = 3


# In a process of its own: importing locust monkey-patches the importing process (gevent).
LOCUST_PERCENTILES = """
import collections, json, sys
from locust.stats import calculate_response_time_percentile
times, timed = collections.Counter(), 0
for entry in json.load(open(sys.argv[1])):
    times.update({int(ms): count for ms, count in entry["response_times"].items()})
    timed += entry["num_requests"] - entry.get("num_none_requests", 0)
print(json.dumps([calculate_response_time_percentile(times, timed, float(q)) for q in sys.argv[2:]]))
"""


def locusts_percentiles(json_file: Path, quantiles: Sequence[float]) -> tuple[float, ...]:
    command = [sys.executable, "-c", LOCUST_PERCENTILES, str(json_file), *map(str, quantiles)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return tuple(json.loads(done.stdout))


def test_sandbox_report_counts_every_request_the_server_answered(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """The sandbox report's Locust figures (sandbox/report.py, from --json-file) hold every request: as many as
    Triton's own statistics counted, where the _stats.csv misses the last second; its percentiles follow Locust's;
    its rate is over the whole run time even when Locust's start stalled its event loop (STALLED_START): the run
    then ended STALL_S early (-t 6s ran ~2.5 s; a busy machine's slow imports did the same) until the locustfile
    refreshed the loop's clock (refresh_loop_clock)."""
    name, _ = slow_model
    before = served(slow_triton, name)
    settings = {"saddr": slow_triton.http_url, "model": name, "output_name": "probabilities", "rate": "8"}
    # A request in flight at the end (a 40 ms service at 8/s: one stop in three) is counted by the server; Locust
    # killed it uncounted until the locustfile set a stop timeout (CI: 45 reported, 46 served).
    stalled = [sys.executable, "-c", STALLED_START, str(STALL_S)]
    run = start_locust(tmp_path, {**settings, "arrival": "constant"}, users=2, run_time_s=6, launcher=stalled).finish()
    assert run.code == 0, run.output
    report = locust_results(run.prefix, run.run_time_s)
    assert report["failures"] == 0 and report["requests"] == served(slow_triton, name) - before > 30, report
    row = next(row for row in run.rows("stats") if row["Name"] == "Aggregated")
    assert int(row["Request Count"]) <= report["requests"]  # the CSV's last write is up to 1 s old
    assert report["p50_ms"] <= report["p95_ms"] and report["p50_ms"] >= 40  # the twin sleeps 40 ms per request
    # Locust's own percentile function (stats.py), run on every timed request of its --json-file. Not the CSV's
    # percentiles: over ~45 requests, the one second it misses moved p95 from 160 to 99 ms on CI.
    assert (report["p50_ms"], report["p95_ms"]) == locusts_percentiles(Path(f"{run.prefix}.json"), (0.5, 0.95))
    assert report["rps"] == pytest.approx(8, rel=0.25)


def test_a_request_in_flight_at_the_end_is_finished_and_counted(
    slow_triton: TritonServer, slow_model: tuple[str, int], tmp_path: Path
) -> None:
    """Closed loop, one user: a request is in flight nearly all the time, so the end nearly always cuts one.
    Killed mid-request (Locust's default), the server answers a request the report never counts."""
    name, _ = slow_model
    for attempt in range(3):  # three ends: each cuts a request with the old stop, all three count it with the new
        before = served(slow_triton, name)
        settings = {"saddr": slow_triton.http_url, "model": name, "output_name": "probabilities"}
        run = start_locust(tmp_path, settings, users=1, run_time_s=3).finish()
        assert run.code == 0, run.output
        requests, failures = run.counts()
        assert failures == 0 and requests > 10, (requests, failures)
        assert requests == served(slow_triton, name) - before, (attempt, requests)


# Builds the locustfile's Locust environment in a fresh interpreter (importing Locust monkey-patches the process
# with gevent) with the runner of each role, fires Locust's init event as locust/main.py does, prints stop_timeout.
STOP_TIMEOUT_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import locust, locustfile
from locust.env import Environment
env = Environment(user_classes=[locustfile.TritonUser], events=locust.events)
role = sys.argv[2]
if role == "master":
    env.create_master_runner("127.0.0.1", int(sys.argv[3]))
elif role == "worker":
    env.create_worker_runner("127.0.0.1", int(sys.argv[3]))
else:
    env.create_local_runner()
env.events.init.fire(environment=env, runner=env.runner, web_ui=None)
print(env.stop_timeout)
env.runner.quit()
"""


def test_requests_in_flight_are_awaited_only_where_the_count_can_wait_for_them(tmp_path: Path) -> None:
    """Standalone, users finish the request in flight at the end (timeout_s + 1 s). In a distributed run they
    stop at once: a quitting master waits only 0.5 s for the workers' last stats (locust 2.47 runners.py
    MasterRunner.quit), and workers that waited for their requests lost up to 3 s of counts (red team: 407 of
    556 served). A worker takes the master's value (runners.py: job["stop_timeout"])."""
    env = {k: v for k, v in os.environ.items() if k not in CONFIG_KEYS} | {"timeout_s": "3", "metrics_port": "0"}

    def stop_timeout(*role: str) -> str:
        command = [sys.executable, "-c", STOP_TIMEOUT_PROBE, str(LOCUSTFILE.parent), *role]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return result.stdout.split()[-1]

    assert float(stop_timeout("local")) == 4.0
    assert float(stop_timeout("master", str(free_port()))) == 0.0


TRACE_1E30 = "trace_1e30.txt"  # written into the run's folder: a gap of 1e30 microseconds (the run would send nothing)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"arrival": "uniform"}, "locustfile: bad setting arrival='uniform': expected one of poisson, constant, trace"),
        ({"rate_steps": "10:0"}, "locustfile: bad setting rate_steps='10:0': '10:0': rates from 0 to"),
        ({"trace": "/nonexistent"}, "locustfile: bad setting trace='/nonexistent': only read with arrival=trace"),
        ({"rate": "-3"}, "locustfile: bad setting rate='-3': expected a number > 0"),
        ({"rate": "0"}, "locustfile: bad setting rate='0': expected a number > 0"),  # was: flat out, ~6,000/s
        ({"rate": "5", "rate_steps": "10:5"}, "locustfile: bad setting rate='5': set rate or rate_steps, not both"),
        ({"arrival": "trace", "trace": TRACE_1E30}, f"locustfile: bad setting trace='{TRACE_1E30}': {TRACE_1E30}:2:"),
        ({"protocol": "ftp"}, "locustfile: bad setting protocol='ftp': expected one of http, grpc"),
        ({"rps": "abc"}, "locustfile: bad setting rps='abc': expected a number >= 0"),
        ({"saddr": "http://triton:8000"}, "locustfile: bad setting saddr='http://triton:8000': expected host or"),
    ],
    ids=["arrival", "steps", "trace", "rate", "rate_zero", "rate_steps", "trace_gap", "protocol", "rps", "saddr"],
)
def test_bad_setting_fails_fast_in_one_line(settings: dict[str, str], message: str, tmp_path: Path) -> None:
    (tmp_path / TRACE_1E30).write_text("1000\n1e30\n")
    run = start_locust(tmp_path, settings, users=1, run_time_s=30).finish()
    assert run.code == 2
    # One line and nothing else: refused while Locust imported the locustfile, before its first own line ("Starting
    # Locust", logged after the import: locust 2.47 main.py main), so the 30 s run never began (however long the
    # import took on busy cores).
    [line] = run.output.strip().splitlines()
    assert line.startswith(message)
