"""Locust load test for Triton Inference Server: simulated users send images to one model.

Load is offered as a RATE of independent arrivals (open loop), not as users that each wait for
their own answer: one arrival process per Locust process hands each arrival to a free user, and
the user measures the response time from the ARRIVAL (time spent waiting for a free user counts:
a real client would have waited too). Users only bound how many requests are in flight at once.
Arrivals that find every user busy wait up to `timeout_s`, then count as failures. With no rate
(rate unset and rps=0) users run closed loop: each sends its next request when the last one returns.
When the test stops, no new request starts and those in flight finish (within timeout_s) and are counted;
in a distributed run (master and workers) they are stopped at once, as Locust does by default.

Settings are environment variables named like the keys of the Kubernetes ConfigMap
`locust-config` (mounted with envFrom); an empty value counts as unset:

    model        model name                                    original
    saddr        Triton address, host[:port]                   127.0.0.1, port 8000 (http) / 8001 (grpc)
    rate         requests/s of the whole test (all users and   unset (use rps)
                 workers together), > 0; not with rate_steps
    rps          requests/s PER USER (the reference's key):    0
                 the rate is rps x running users, still as
                 independent arrivals; 0 with rate unset = closed loop
    arrival      poisson | constant | trace                    poisson
    trace        arrival=trace: file of inter-arrival times in microseconds, one per line (the format of
                 perf_analyzer's --request-intervals); replayed in a loop, scaled to `rate` when it is set
    rate_steps   a load shape: comma-separated RATE:SECONDS (hold) and FROM-TO:SECONDS (linear ramp)
                 items, e.g. 10:60,10-40:120,40:60; the test ends after the last one. Needs `users`.
    users        concurrency bound of the rate_steps shape     100
    protocol     http | grpc                                   http
    payload      fp32 | uint8: the tensor type sent            fp32 (a 224x224x3 image)
    input_name   model input                                   input
    output_name  model output                                  probabilities
    batch        images per request                            1
    timeout_s    network timeout per request, seconds          10
    metrics_port Prometheus metrics of the master, 0 = off     9646
    metrics_addr address the metrics server binds              0.0.0.0
    inference_headers  NAME=KEY[,NAME=KEY]: headers sent with  none
                 every inference (Triton's inference key; in the cluster from a Secret, both slots' keys)

A bad value stops Locust at start with one line naming the key (exit code 2).
Needs locust, tritonclient[http,grpc] (numpy comes with it); prometheus-client is optional.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import random
import re
import sys
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import arrivals  # beside this file: Locust puts this folder on sys.path while importing it
import gevent
import numpy as np
from gevent.event import Event
from gevent.queue import Empty, Queue
from locust import LoadTestShape, User, constant, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

IMAGE_SHAPE = (224, 224, 3)  # NHWC, like the reference ResNet-50
DEFAULT_PORTS = {"http": 8000, "grpc": 8001}
PAYLOAD_TYPES = {"fp32": "FP32", "uint8": "UINT8"}
GRPC_MAX_MESSAGE = 2**31 - 1

log = logging.getLogger("locustfile")


class SettingError(ValueError):
    """A bad value in the environment; the message names the key."""


class InferFailure(Exception):
    """A failed request, with a message meant for Locust's failure table."""


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    model: str
    url: str  # host:port, as both tritonclient modules take it
    rps: float  # per user; the rate is rps x running users (when rate is 0)
    protocol: str
    payload: str
    input_name: str
    output_name: str
    batch: int
    timeout_s: float
    metrics_port: int
    metrics_addr: str
    rate: float = 0.0  # requests/s of the whole test; 0: rps per user, or closed loop
    arrival: str = "poisson"
    trace: tuple[float, ...] = ()  # arrival=trace: gaps in seconds
    rate_steps: tuple[arrivals.Segment, ...] = ()  # a load shape; empty: users and rate as started
    users: int = 100  # the shape's concurrency bound
    headers: tuple[tuple[str, str], ...] = ()  # sent with every inference (inference_headers)

    @property
    def open_loop(self) -> bool:
        """Arrivals at a rate (independent of responses) rather than users flat out."""
        return bool(self.rate or self.rps or self.rate_steps or self.trace)

    @property
    def total_rate(self) -> float | None:
        """The whole test's rate as configured: rate, else a trace's own mean rate (replayed as recorded)."""
        if self.rate:
            return self.rate
        if self.trace and not self.rps:
            return len(self.trace) / sum(self.trace)
        return None


def _get(env: Mapping[str, str], key: str, default: str) -> str:
    return env.get(key, "").strip() or default


def _number(env: Mapping[str, str], key: str, default: str, minimum: float, *, above: bool = False) -> float:
    raw = _get(env, key, default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < minimum or (above and value == minimum):
        bound = f"> {minimum:g}" if above else f">= {minimum:g}"
        raise SettingError(f"{key}={raw!r}: expected a number {bound}")
    return value


def _integer(env: Mapping[str, str], key: str, default: str, low: int, high: int) -> int:
    raw = _get(env, key, default)
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise SettingError(f"{key}={raw!r}: expected a whole number from {low} to {high}")
    return int(raw)


def _choice(env: Mapping[str, str], key: str, default: str, choices: tuple[str, ...]) -> str:
    raw = _get(env, key, default)
    if raw.lower() not in choices:
        raise SettingError(f"{key}={raw!r}: expected one of {', '.join(choices)}")
    return raw.lower()


def _name(env: Mapping[str, str], key: str, default: str) -> str:
    raw = _get(env, key, default)
    if any(c.isspace() for c in raw):
        raise SettingError(f"{key}={raw!r}: names contain no spaces")
    return raw


def _server_url(env: Mapping[str, str], protocol: str) -> str:
    raw = _get(env, "saddr", "127.0.0.1")
    try:
        parts = urlsplit(f"//{raw}")
        port = parts.port or DEFAULT_PORTS[protocol]
    except ValueError:
        parts, port = None, 0
    if parts is None or "://" in raw or not parts.hostname or parts.path or parts.query or parts.username:
        raise SettingError(f"saddr={raw!r}: expected host or host:port (no scheme), e.g. triton:8000")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"


# A header name is a token (RFC 9110 section 5.6.2), sent lowercase (gRPC metadata keys are); the key keeps to the
# characters tritonserver's restricted-API flag can carry (k8s/on_cluster_args.py ADMIN_KEY, a copy: this file ships
# alone).
_HEADER_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_HEADER_KEY = re.compile(r"[A-Za-z0-9._~+/-]+")


def _headers(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    raw = env.get("inference_headers", "").strip()
    if not raw:
        return ()
    pairs = []
    for item in raw.split(","):
        name, equals, key = item.partition("=")
        if not (equals and _HEADER_NAME.fullmatch(name) and _HEADER_KEY.fullmatch(key)):
            # Never the value: it holds the keys.
            raise SettingError(f"inference_headers: expected NAME=KEY[,NAME=KEY] (item {len(pairs) + 1} is not)")
        pairs.append((name, key))
    return tuple(pairs)


def _arrival(env: Mapping[str, str]) -> tuple[str, tuple[float, ...]]:
    kind = _choice(env, "arrival", "poisson", arrivals.KINDS)
    path = _get(env, "trace", "")
    if kind != "trace":
        if path:
            raise SettingError(f"trace={path!r}: only read with arrival=trace (arrival={kind!r})")
        return kind, ()
    if not path:
        raise SettingError("trace='': arrival=trace needs a trace file (microseconds between requests, one per line)")
    try:
        return kind, arrivals.read_trace(Path(path))
    except arrivals.ArrivalError as err:
        raise SettingError(f"trace={path!r}: {err}") from None


def _steps(env: Mapping[str, str]) -> tuple[arrivals.Segment, ...]:
    raw = _get(env, "rate_steps", "")
    try:
        return arrivals.parse_steps(raw) if raw else ()
    except arrivals.ArrivalError as err:
        raise SettingError(f"rate_steps={raw!r}: {err}") from None


def _rate(env: Mapping[str, str]) -> float:
    """rate: unset (empty) or a rate above 0; an explicit 0 would silently mean rps, or closed loop flat out."""
    if not _get(env, "rate", ""):
        return 0.0
    rate = _number(env, "rate", "", 0, above=True)
    if rate > arrivals.MAX_RATE:
        raise SettingError(f"rate={rate:g}: at most {arrivals.MAX_RATE:g} requests/s")
    return rate


def load_settings(env: Mapping[str, str]) -> Settings:
    """Read and check every setting; raise SettingError naming the first bad key."""
    protocol = _choice(env, "protocol", "http", tuple(DEFAULT_PORTS))
    kind, trace = _arrival(env)
    rate = _rate(env)
    steps = _steps(env)
    if rate and steps:  # the shape sets the rate itself and would silently override `rate` (as locustRate)
        raise SettingError(f"rate={_get(env, 'rate', '')!r}: set rate or rate_steps, not both")
    return Settings(
        model=_name(env, "model", "original"),
        url=_server_url(env, protocol),
        rps=_number(env, "rps", "0", 0),
        protocol=protocol,
        payload=_choice(env, "payload", "fp32", tuple(PAYLOAD_TYPES)),
        input_name=_name(env, "input_name", "input"),
        output_name=_name(env, "output_name", "probabilities"),
        batch=_integer(env, "batch", "1", 1, 4096),
        timeout_s=_number(env, "timeout_s", "10", 0, above=True),
        metrics_port=_integer(env, "metrics_port", "9646", 0, 65535),
        metrics_addr=_name(env, "metrics_addr", "0.0.0.0"),
        rate=rate,
        arrival=kind,
        trace=trace,
        rate_steps=steps,
        users=_integer(env, "users", "100", 1, 1_000_000),
        headers=_headers(env),
    )


def _settings_or_exit() -> Settings:
    """Locust imports this file before anything runs: a bad ConfigMap stops it here, in one line."""
    try:
        return load_settings(os.environ)
    except SettingError as err:
        print(f"locustfile: bad setting {err}", file=sys.stderr)
        raise SystemExit(2) from None  # SystemExit passes through Locust's import: no traceback


def _triton_module(protocol: str) -> ModuleType:
    if protocol == "grpc":
        # gRPC's own threads would block gevent: without this, every user waits for the others
        # and the load silently runs one request at a time. Must precede any channel.
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
    return importlib.import_module(f"tritonclient.{protocol}")


SETTINGS = _settings_or_exit()
triton = _triton_module(SETTINGS.protocol)


# ---------------------------------------------------------------- requests


@cache
def request_tensors() -> tuple[list[Any], list[Any]]:
    """Inputs and requested outputs, built once per process and shared by all users (read-only)."""
    rng = np.random.default_rng(0)
    shape = (SETTINGS.batch, *IMAGE_SHAPE)
    if SETTINGS.payload == "uint8":
        images = rng.integers(0, 256, size=shape, dtype=np.uint8)
    else:
        images = rng.random(shape, dtype=np.float32)
    tensor = triton.InferInput(SETTINGS.input_name, list(shape), PAYLOAD_TYPES[SETTINGS.payload])
    tensor.set_data_from_numpy(images)
    # Name the output: tritonclient 2.73 cannot reshape a 2.51 server's reply without it.
    return [tensor], [triton.InferRequestedOutput(SETTINGS.output_name)]


def check_output(array: np.ndarray | None) -> int:
    """Size in bytes of a plausible output; InferFailure for a missing, mis-shaped or non-finite one."""
    name = SETTINGS.output_name
    if array is None:
        raise InferFailure(f"bad response: no output {name!r}")
    if array.ndim < 2 or array.shape[0] != SETTINGS.batch or array.size == 0:
        raise InferFailure(
            f"bad response: output {name!r} has shape {list(array.shape)}, expected [{SETTINGS.batch}, N]"
        )
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise InferFailure(f"bad response: output {name!r} has NaN or infinite values")
    return int(array.nbytes)


class Client(triton.InferenceServerClient):
    """tritonclient's client, closed at most once, and surely before the interpreter exits.

    tritonclient closes again in __del__; with gRPC under gevent, closing a channel twice, or
    during interpreter shutdown, can deadlock, and Locust then never exits.
    """

    _closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            super().close()


OPEN_CLIENTS: weakref.WeakSet[Client] = weakref.WeakSet()


def open_client() -> Client:
    """A client with its own connection: each user holds one TCP connection, so a ClusterIP Service
    (which balances connections, not requests) spreads users over all Triton pods."""
    if SETTINGS.protocol == "grpc":
        # gRPC shares one connection between channels to the same target unless told otherwise.
        args = [
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.max_send_message_length", GRPC_MAX_MESSAGE),
            ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE),
        ]
        client = Client(SETTINGS.url, channel_args=args)
    else:
        timeout = SETTINGS.timeout_s
        client = Client(SETTINGS.url, concurrency=1, connection_timeout=timeout, network_timeout=timeout)
    OPEN_CLIENTS.add(client)
    # Connect now, not at the first request: open-loop arrivals reach users in turn, and each user's
    # connection should exist (and be spread over the pods) from the start. A failure here is not a
    # result: the user's first request reports it.
    with contextlib.suppress(Exception):
        client.is_server_live()
    return client


@events.quit.add_listener
def close_clients(**_kwargs: Any) -> None:
    # Users killed before on_stop keep their clients; close those while gevent still runs.
    for client in list(OPEN_CLIENTS):
        client.close()


def infer_once(client: Client) -> int:
    """One inference; returns the output's size in bytes, raises on any failure."""
    inputs, outputs = request_tensors()
    options = {"client_timeout": SETTINGS.timeout_s} if SETTINGS.protocol == "grpc" else {}
    headers = dict(SETTINGS.headers) or None
    result = client.infer(SETTINGS.model, inputs, outputs=outputs, headers=headers, **options)
    return check_output(result.as_numpy(SETTINGS.output_name))


def describe(err: Exception) -> InferFailure:
    """One readable line per kind of failure (Locust groups failures by this text)."""
    if isinstance(err, InferFailure):
        return err
    if isinstance(err, triton.InferenceServerException):
        return InferFailure(f"triton: {err}")
    return InferFailure(f"{type(err).__name__}: {err}")


# ---------------------------------------------------------------- open-loop arrivals


class Arrivals:
    """This process's arrival stream: a greenlet draws arrival instants at the current rate and
    queues them; free users take them. The rate of the process is
    - rate (or a shape's current rate), standalone;
    - the master's rate divided among the workers, on a worker (the master sends each worker its
      share every second: a Poisson stream split among k workers is k Poisson streams of rate/k);
    - rps x this process's running users, when only rps is set.
    """

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.closed_loop = not SETTINGS.open_loop  # users flat out, no arrivals
        self.total: float | None = SETTINGS.total_rate  # the whole test's rate; None: rps per user
        self.share: float | None = None  # on a worker: its part of `total`, from the master
        self.queue: Queue[float] = Queue()
        self.changed = Event()
        self.process = arrivals.ArrivalProcess(SETTINGS.arrival, random.Random(), SETTINGS.trace)
        self._greenlet: gevent.Greenlet | None = None

    def set_total(self, rate: float | None) -> None:
        """A shape's rate for the whole test, from now (arrivals.rescaled_due: the same rate changes nothing)."""
        self.total, self.closed_loop = rate, False
        self.changed.set()

    def set_closed_loop(self) -> None:
        self.closed_loop = True
        self.changed.set()

    def process_rate(self) -> float:
        runner = self.environment.runner
        if self.closed_loop or runner is None:
            return 0.0
        worker = isinstance(runner, WorkerRunner)
        if worker and self.share is not None:
            return self.share  # the master sets the whole test's rate (rate, or its rate_steps shape)
        if self.total is None and not (worker and SETTINGS.rate_steps):
            return SETTINGS.rps * runner.user_count
        return 0.0 if worker or self.total is None else self.total  # a worker waits for its share

    def start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        while not self.queue.empty():
            self.queue.get_nowait()

    def _run(self) -> None:
        rate, due = 0.0, time.monotonic()
        while True:
            if rate <= 0:
                rate = self.process_rate()
                if rate <= 0:
                    self.changed.wait(timeout=0.5)  # wait for users, a rate or the master's share
                    self.changed.clear()
                    continue
                due = time.monotonic() + self.process.gap(rate)
            if self.changed.wait(timeout=max(0.0, due - time.monotonic())):
                self.changed.clear()  # a rate was set (often the same one again): keep the schedule's phase
                new_rate = self.process_rate()
                due = arrivals.rescaled_due(due, time.monotonic(), rate, new_rate) if new_rate > 0 else due
                rate = new_rate
                continue
            self.queue.put(due)
            rate = self.process_rate()  # rps per user follows the running users
            if rate > 0:
                due += self.process.gap(rate)

    def broadcast(self) -> None:
        """Master: send each worker its share of the rate, every second, as long as the test runs."""
        runner = self.environment.runner
        while isinstance(runner, MasterRunner):
            if self.total is not None and not self.closed_loop:
                runner.send_message("arrival_rate", self.total / max(1, runner.worker_count))
            gevent.sleep(1.0)

    def on_share(self, msg: Any, **_kwargs: Any) -> None:  # Locust passes the message as `msg`
        self.share = float(msg.data)
        self.changed.set()


def arrivals_of(environment: Environment) -> Arrivals:
    found = getattr(environment, "arrivals", None)
    if found is None:
        found = environment.arrivals = Arrivals(environment)  # type: ignore[attr-defined]
    return found


@events.init.add_listener
def setup_arrivals(environment: Environment, **_kwargs: Any) -> None:
    stream = arrivals_of(environment)
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message("arrival_rate", stream.on_share)


@events.test_start.add_listener
def start_arrivals(environment: Environment, **_kwargs: Any) -> None:
    stream = arrivals_of(environment)
    if isinstance(environment.runner, MasterRunner):
        gevent.spawn(stream.broadcast)
    else:
        stream.start()


@events.test_stopping.add_listener
def stop_arrivals(environment: Environment, **_kwargs: Any) -> None:
    # test_stopping fires before the users are stopped (locust runners.py Runner.stop): no request starts
    # after the end, and those in flight finish (on_init's stop_timeout) and are counted.
    arrivals_of(environment).stop()


class TritonUser(User):
    """Takes the next arrival and sends it (open loop), or sends back to back (closed loop)."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.connection = open_client()
        self.arrivals = arrivals_of(self.environment)

    def on_stop(self) -> None:
        self.connection.close()

    @task
    def infer(self) -> None:
        if self.arrivals.closed_loop:
            self.send(time.perf_counter(), time.monotonic())
            return
        try:
            due = self.arrivals.queue.get(timeout=0.5)
        except Empty:
            return  # no arrival yet: look again (the rate may have changed to closed loop)
        waited = time.monotonic() - due
        started = time.perf_counter() - waited  # the response time counts from the arrival
        if waited > SETTINGS.timeout_s:
            failure = InferFailure(f"not sent: every user was busy for over {SETTINGS.timeout_s:g} s (add users)")
            self.report(started, 0, failure, waited)
            return
        self.send(started, due)

    def send(self, started: float, due: float) -> None:
        length, failure = 0, None
        lag_s = max(0.0, time.monotonic() - due)
        try:
            length = infer_once(self.connection)
        except Exception as err:  # a failed request is a result to report, never a crashed user
            failure = describe(err)
        self.report(started, length, failure, lag_s)

    def report(self, started: float, length: int, failure: Exception | None, lag_s: float) -> None:
        self.environment.events.request.fire(
            request_type=f"infer-{SETTINGS.protocol}",
            name=SETTINGS.model,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=length,
            exception=failure,
            context={"lag_ms": lag_s * 1000},  # arrival to send: waiting for a free user
        )


if SETTINGS.rate_steps:  # a module-level shape class is picked up by Locust: only when asked for

    class RateSteps(LoadTestShape):
        """The `rate_steps` shape: holds and ramps of the whole test's rate, `users` users throughout."""

        def tick(self) -> tuple[int, float] | None:
            rate = arrivals.rate_at(SETTINGS.rate_steps, self.get_run_time())
            if rate is None or self.runner is None:
                return None
            arrivals_of(self.runner.environment).set_total(rate)
            return SETTINGS.users, float(SETTINGS.users)


# ---------------------------------------------------------------- Prometheus metrics


class LocustCollector:
    """Reads the runner's stats at scrape time; on the master they aggregate all workers."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        runner = self.environment.runner
        yield GaugeMetricFamily("locust_users", "Simulated users running", value=runner.user_count if runner else 0)
        labels = ["name", "method"]
        families = {
            "rps": GaugeMetricFamily("locust_requests_per_second", "Requests per second, recent", labels=labels),
            "fps": GaugeMetricFamily("locust_failures_per_second", "Failed requests per second, recent", labels=labels),
            "p50": GaugeMetricFamily("locust_response_time_p50_ms", "Median response time, last ~10 s", labels=labels),
            "p95": GaugeMetricFamily("locust_response_time_p95_ms", "95th percentile, last ~10 s", labels=labels),
            "req": CounterMetricFamily("locust_requests", "Requests sent, failed ones included", labels=labels),
            "fail": CounterMetricFamily("locust_failures", "Failed requests", labels=labels),
        }
        for entry in list(runner.stats.entries.values()) if runner else []:
            values = [entry.name, entry.method]
            families["rps"].add_metric(values, entry.current_rps)
            families["fps"].add_metric(values, entry.current_fail_per_sec)
            families["req"].add_metric(values, entry.num_requests)
            families["fail"].add_metric(values, entry.num_failures)
            for key, percent in (("p50", 0.5), ("p95", 0.95)):
                value = entry.get_current_response_time_percentile(percent)
                if value is not None:  # None until the window has data
                    families[key].add_metric(values, value)
        yield from families.values()


def serve_metrics(environment: Environment) -> None:
    try:
        from gevent.pywsgi import WSGIServer
        from prometheus_client import CollectorRegistry, make_wsgi_app
    except ImportError:
        log.info("prometheus_client is not installed: no metrics endpoint")
        return
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LocustCollector(environment))
    server = WSGIServer((SETTINGS.metrics_addr, SETTINGS.metrics_port), make_wsgi_app(registry), log=None)
    try:
        server.start()  # a greenlet in Locust's own event loop
    except OSError as err:  # the load test is still worth running without its dashboard
        log.error("metrics: cannot listen on %s:%s (%s)", SETTINGS.metrics_addr, SETTINGS.metrics_port, err)
        return
    log.info("metrics on http://%s:%s/metrics", SETTINGS.metrics_addr, SETTINGS.metrics_port)


@events.init.add_listener
def on_init(environment: Environment, **_kwargs: Any) -> None:
    # Locust kills users mid-request at the end unless --stop-timeout is set ("Default is to terminate
    # immediately": locust --help, argument_parser.py): the server then answered requests no report counts.
    # Wait for the one in flight, which ends by timeout_s; a non-zero --stop-timeout wins. Not in a distributed
    # run: a quitting master waits only 0.5 s for the workers' last stats (runners.py MasterRunner.quit), so
    # workers that wait for their requests miss it and up to 3 s of requests (WORKER_REPORT_INTERVAL) go
    # uncounted (seen: 407 of 556 served); stopped at once they lose only the requests in flight.
    distributed = isinstance(environment.runner, (MasterRunner, WorkerRunner))
    if not environment.stop_timeout and not distributed:
        environment.stop_timeout = SETTINGS.timeout_s + 1
    # Workers only forward their stats; the master (or a standalone run) holds the totals.
    if SETTINGS.metrics_port and not isinstance(environment.runner, WorkerRunner):
        serve_metrics(environment)
    refresh_loop_clock()


def refresh_loop_clock() -> None:
    """Bring the event loop's clock to now, right before Locust arms its --run-time timer.

    Locust arms it with gevent.spawn_later(run_time) from its main greenlet just after the init event (locust 2.47
    main.py: events.init.fire, then start_automatic_run, spawn_run_time_quit_greenlet). A timer started outside the
    loop's callbacks counts from the loop's cached time and does not refresh it (gevent 26.9 _ffi/watcher.py
    TimerMixin.start: "1.3 changed the default for this to False *unless* the loop is running a callback"; the
    cached-time problem: https://github.com/gevent/gevent/issues/97), and that time dates from before the imports
    and this file's set-up. On a busy machine those took seconds, and `-t 3s` ran 0.3 s, `-t 12s` 9.4 s (seen under
    a CPU hog: 5 requests instead of ~50, 94 instead of 120, and the sandbox report's rate a quarter low)."""
    gevent.get_hub().loop.update_now()
