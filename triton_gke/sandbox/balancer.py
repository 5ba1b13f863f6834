"""A real L7 load balancer (haproxy 2.6, Debian's package) standing in for the NEGs and the global load balancer.

    with LocalBalancer(BalancerSettings.of(lifecycle), workdir, [Slot("pod0", "NETNS", 8000)]) as balancer:
        balancer.attach("pod0")             # a NEG endpoint attached: unhealthy until `rise` checks pass
        balancer.wait_healthy("pod0", 30)   # the readiness gate cloud.google.com/load-balancer-neg-ready
        balancer.drain("pod0")              # the endpoint detached: no new requests, in-flight ones finish
        balancer.cut("pod0")                # connection draining timed out: what is left is closed
        balancer.detach("pod0")

The configuration comes from the stack's lifecycle contract (BalancerSettings.of): the HTTP health check on
Triton's readiness path with its interval, timeout and thresholds, the backend timeout, and connection draining,
which haproxy has no timer for: the caller drains, waits the draining timeout, then cuts. Each setting cites the
haproxy 2.6 manuals, https://docs.haproxy.org/2.6/configuration.html (CONF) and
https://docs.haproxy.org/2.6/management.html (MGMT); the Debian package ships the same text in
/usr/share/doc/haproxy/. Every request is logged as one line (log_lines) and the runtime API gives the counters
(stats): the balancer's own count of what it answered and failed.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from triton_gke.sandbox.components import ComponentError
from triton_gke.sandbox.processes import LOOPBACK, free_port, interrupts_held, stop_process, wait_for
from triton_gke.settings.lifecycle import LifecycleSettings

BACKEND = "triton"
FRONTEND = "inference"
STOP_GRACE_S = 5.0
START_TIMEOUT_S = 15.0
# One line per request: accept time (unix s.ms), idle time before the request (ms), method, path, status, total
# active time (ms), server, termination state (CONF 8.2.4 "Custom log format": %Ts timestamp, %ms accept date
# milliseconds, %Ti idle time before the HTTP request, %HM method, %HP path, %ST status code, %Ta active time of the
# request, %s server name, %tsc termination state). On a kept-alive connection the accept date is the end of the
# previous request (CONF 8.4 "Timing events": Ti is the wait for the next one), so a request starts at accept + Ti.
LOG_FORMAT = "%Ts.%ms %Ti %HM %HP %ST %Ta %s %tsc"


class BalancerError(ComponentError):
    """haproxy did not start, or its runtime API refused a command; the message is one line."""


@dataclass(frozen=True)
class BalancerSettings:
    """What the global load balancer's health check and backend service say, in haproxy's terms."""

    health_path: str
    interval_s: int
    timeout_s: int
    healthy_threshold: int
    unhealthy_threshold: int
    drain_timeout_s: float
    backend_timeout_s: int = 60  # the backend services' timeoutSec (infra/global_lb.py)

    @classmethod
    def of(cls, lifecycle: LifecycleSettings) -> BalancerSettings:
        """From the stack's LifecycleSettings (settings/lifecycle.py)."""
        return cls(
            health_path=lifecycle.health_check_path,
            interval_s=lifecycle.health_check_interval_s,
            timeout_s=lifecycle.health_check_timeout_s,
            healthy_threshold=lifecycle.healthy_threshold,
            unhealthy_threshold=lifecycle.unhealthy_threshold,
            drain_timeout_s=lifecycle.drain_timeout_s,
        )

    def server_options(self) -> str:
        """The health-check options of every server.

        check: health checks on (CONF 5.2 "check"); inter: the interval (GCP checkIntervalSec); rise/fall:
        consecutive successes/failures to turn healthy/unhealthy (CONF 5.2 "rise", "fall"; GCP healthyThreshold,
        unhealthyThreshold). A NEG endpoint starts unhealthy; attach() sets that (haproxy starts servers up).
        """
        return f"check inter {self.interval_s}s rise {self.healthy_threshold} fall {self.unhealthy_threshold}"


@dataclass(frozen=True)
class Slot:
    """A server line: Triton's HTTP port inside a named network namespace (/var/run/netns/<namespace>).

    haproxy opens its connections and health checks to the server inside that namespace (CONF 5.2 "namespace";
    /usr/share/doc/haproxy/network-namespaces.txt), as the load balancer reaches a pod's IP directly: no relay
    that would accept a connection the replica itself would refuse."""

    name: str
    namespace: str
    port: int


def haproxy_config(settings: BalancerSettings, port: int, api_socket: Path, slots: Sequence[Slot]) -> str:
    """haproxy.cfg: one frontend on 127.0.0.1:port, one backend with a server per slot, all in maintenance
    (CONF 5.2 "disabled") until attach(). Static lines: `add server` has no `namespace` keyword (MGMT 9.3)."""
    servers = "".join(
        f"    server {s.name} {LOOPBACK}:{s.port} namespace {s.namespace} {settings.server_options()} disabled\n"
        for s in slots
    )
    return f"""\
global
    # The runtime API (MGMT 9.3) at admin level: set server state and health, show stat (CONF 3.1 "stats socket").
    stats socket {api_socket} mode 600 level admin
    # Every request to stdout, which the caller keeps (CONF 3.1 "log": "log stdout format raw"), written by one thread
    # (CONF 3.1 "nbthread"): with two, one run here logged a request fewer than Locust and Triton counted.
    log stdout format raw local0
    nbthread 1

defaults
    mode http
    log global
    log-format "{LOG_FORMAT}"
    timeout connect 5s
    timeout client {settings.backend_timeout_s}s
    # The backend service's timeoutSec: how long a request may take (CONF 4.2 "timeout server").
    timeout server {settings.backend_timeout_s}s
    # The health check's timeoutSec (CONF 4.2 "timeout check").
    timeout check {settings.timeout_s}s
    # A request that could not be SENT (connection refused: a replica that died) is sent once to another server;
    # nothing is retried once sent (CONF 4.2 "retries", "retry-on conn-failure": "the request could not be sent",
    # the default; "option redispatch 1": the retry may pick another server). GCP: a URL map retryPolicy with
    # retryConditions connect-failure, numRetries 1 (https://cloud.google.com/compute/docs/reference/rest/v1/urlMaps).
    retries 1
    retry-on conn-failure
    option redispatch 1

frontend {FRONTEND}
    bind {LOOPBACK}:{port}
    default_backend {BACKEND}

backend {BACKEND}
    # Each request goes to the server with the fewest active ones (CONF 4.2 "balance leastconn"), like the backend
    # service's localityLbPolicy LEAST_REQUEST; in HTTP mode every request is balanced on its own unless
    # "option prefer-last-server" is set (CONF 4.2 "option prefer-last-server"), so a kept-alive client
    # connection moves off a drained server at its next request.
    balance leastconn
    # The health check: GET on Triton's readiness path, healthy on 200 (CONF 4.2 "option httpchk", "http-check
    # expect status"), as the backend service's HTTP health check on the same path.
    option httpchk GET {settings.health_path}
    http-check expect status 200
{servers}"""


@dataclass(frozen=True)
class Counters:
    """What haproxy's frontend answered (all requests, health checks excluded) and the backend's retries."""

    requests: int
    ok: int  # 2xx
    failed: int  # every other request: other statuses, the balancer's own 5xx, and those closed with no answer
    retries: int
    redispatches: int

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(getattr(self, f) - getattr(other, f) for f in Counters.__dataclass_fields__))


@dataclass(frozen=True)
class LoggedRequest:
    accepted: float  # unix time (s) the request began: its stream's accept date plus the idle time before it
    method: str
    path: str
    status: int
    active_ms: int  # -1: the request never completed
    server: str
    termination: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def finished(self) -> float:
        return self.accepted + max(self.active_ms, 0) / 1000


def parse_log_line(line: str) -> LoggedRequest | None:
    """One line of LOG_FORMAT; None for anything else (haproxy's own notices)."""
    fields = line.split()
    if len(fields) != 8:
        return None
    try:
        began = float(fields[0]) + max(int(fields[1]), 0) / 1000
        return LoggedRequest(began, fields[2], fields[3], int(fields[4]), int(fields[5]), *fields[6:])
    except ValueError:
        return None


class LocalBalancer:
    """haproxy as a child process, configured by haproxy_config, driven through its runtime API socket."""

    def __init__(self, settings: BalancerSettings, workdir: Path, slots: Sequence[Slot]) -> None:
        self.settings = settings
        self.slots = tuple(slots)
        self.workdir = Path(workdir)
        self.port = free_port()
        self.api_socket = self.workdir / "haproxy.sock"
        self.config_path = self.workdir / "haproxy.cfg"
        self.log_path = self.workdir / "haproxy.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> Self:
        binary = shutil.which("haproxy")
        if binary is None:
            raise BalancerError("haproxy is not installed (Debian: apt-get install --no-install-recommends haproxy)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            haproxy_config(self.settings, self.port, self.api_socket, self.slots), encoding="utf-8"
        )
        check = subprocess.run([binary, "-c", "-q", "-f", str(self.config_path)], capture_output=True, text=True)
        if check.returncode != 0:
            raise BalancerError(f"haproxy refused {self.config_path}: {' '.join(check.stderr.split())[:300]}")
        # O_APPEND: each line lands whole at the end; a signal during the start is raised once _process is set.
        with self.log_path.open("ab") as log, interrupts_held():
            # -db: foreground, no daemon (MGMT 3 "-db"), so it is our child and stops with us.
            self._process = subprocess.Popen(
                [binary, "-db", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if not wait_for(self._answers, START_TIMEOUT_S, 0.05):
            self.stop()
            raise BalancerError(f"haproxy did not start within {START_TIMEOUT_S:.0f} s: {self._log_tail()}")
        return self

    def _answers(self) -> bool:
        if self._process is None or self._process.poll() is not None:
            return True  # exited: stop waiting, the caller sees it below
        with contextlib.suppress(OSError):
            return "Name" in self.command("show info")
        return False

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, STOP_GRACE_S, group=True)
            self._process = None

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ runtime API (MGMT 9.3)

    def command(self, line: str) -> str:
        """One runtime API command; its answer (the socket closes after it: non-interactive mode, MGMT 9.2)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as api:
            api.settimeout(5)
            api.connect(str(self.api_socket))
            api.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := api.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def _checked(self, line: str) -> None:
        answer = self.command(line).strip()
        if answer:
            raise BalancerError(f"haproxy refused {line!r}: {' '.join(answer.split())}")

    def attach(self, name: str) -> None:
        """A new endpoint in slot `name`, unhealthy until `rise` checks in a row pass (a NEG endpoint starts
        unhealthy; GKE's readiness gate waits for it to pass). Leaving maintenance marks a server up, leaving drain
        keeps its health (MGMT 9.3 "set server ... state", "set server ... health"): so drain (no traffic), health
        down, ready, and only then are its checks on (MGMT 9.3 "enable health")."""
        server = f"{BACKEND}/{name}"
        for step in ("state drain", "health down", "state ready"):
            self._checked(f"set server {server} {step}")
        self._checked(f"enable health {server}")

    def drain(self, name: str) -> None:
        """Out of load balancing, in-flight requests go on (MGMT 9.3 "set server ... state drain")."""
        self._checked(f"set server {BACKEND}/{name} state drain")

    def cut(self, name: str) -> None:
        """Close what is still open to it: the draining timeout ran out (MGMT 9.3 "shutdown sessions server")."""
        self._checked(f"shutdown sessions server {BACKEND}/{name}")

    def detach(self, name: str) -> None:
        """Out of the backend: maintenance, no traffic and no checks (MGMT 9.3 "set server ... state maint")."""
        self._checked(f"set server {BACKEND}/{name} state maint")

    def servers(self) -> dict[str, dict[str, str]]:
        """`show stat` rows of the backend's servers, by name (MGMT 9.3 "show stat", 9.1 CSV format)."""
        rows = self._stat_rows()
        return {r["svname"]: r for r in rows if r["pxname"] == BACKEND and r["svname"] not in ("BACKEND", "FRONTEND")}

    def status(self, name: str) -> str:
        return self.servers().get(name, {}).get("status", "")

    def wait_healthy(self, name: str, timeout_s: float) -> bool:
        return wait_for(lambda: self.status(name) == "UP", timeout_s, 0.1)

    def sessions(self, name: str) -> tuple[int, int]:
        """(scur, stot) of that server: the sessions open now and all it was ever given (MGMT 9.1)."""
        row = self.servers().get(name, {})
        return int(row.get("scur") or 0), int(row.get("stot") or 0)

    def counters(self) -> Counters:
        rows = {(r["pxname"], r["svname"]): r for r in self._stat_rows()}
        front, back = rows[(FRONTEND, "FRONTEND")], rows[(BACKEND, "BACKEND")]

        def n(row: dict[str, str], key: str) -> int:
            return int(row.get(key) or 0)

        answered = sum(n(front, f"hrsp_{k}") for k in ("1xx", "2xx", "3xx", "4xx", "5xx", "other"))
        return Counters(
            requests=n(front, "req_tot"),
            ok=n(front, "hrsp_2xx"),
            failed=answered - n(front, "hrsp_2xx") + max(0, n(front, "req_tot") - answered),
            retries=n(back, "wretr"),
            redispatches=n(back, "wredis"),
        )

    def _stat_rows(self) -> list[dict[str, str]]:
        text = self.command("show stat").lstrip("# ")
        return list(csv.DictReader(io.StringIO(text)))

    # ------------------------------------------------------------ the request log

    def log_lines(self) -> Iterator[LoggedRequest]:
        with contextlib.suppress(OSError), self.log_path.open(encoding="utf-8", errors="replace") as log:
            for line in log:
                if (entry := parse_log_line(line)) is not None:
                    yield entry

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
            return " ".join(" ".join(lines[-3:]).split()) or "(no output)"
        return "(no output)"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def wait_until(deadline: float) -> None:
    """Sleep until time.monotonic() reaches deadline (no-op when past)."""
    time.sleep(max(0.0, deadline - time.monotonic()))
