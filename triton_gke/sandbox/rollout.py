"""Rollouts, scale-in, Spot preemption, model updates and a crash, under load, with real software: `make sandbox
ARGS='--scenario rollout'`.

Two tritonserver replicas, each in its own loopback-only network namespace (a pod), read gs://BUCKET/PREFIX from
the GCS emulator with the GKE command line, behind haproxy (sandbox/balancer.py: the NEGs and the global load
balancer) configured from the stack's lifecycle contract (settings/lifecycle.py). Locust sends open-loop load
through haproxy while each scenario acts in the order Kubernetes and the NEG controller do, with the stack's values:

  rolling       every replica replaced as the Deployment's strategy says (contracts/triton.py ROLLING_MAX_*):
                a new replica joins the balancer when its health check passes `healthy_threshold` times (the
                readiness gate); an old one is deleted: its endpoint leaves the balancer `endpoint_removal_s` after
                the deletion and its requests get `drain_timeout_s` (connection draining), preStop waits
                `pre_stop_s`, then SIGTERM, Triton's --exit-timeout-secs, SIGKILL at `termination_grace_s`
  scale-in      one replica deleted the same way, none started
  spot          a preemption: the same deletion with SIGKILL at the Spot notice (`spot_notice_s`), then a
                replacement
  model-update  a new model version synced into the bucket with model_repo.sync, reaching every replica through a
                rolling replacement
  kill          kill -9 of a replica (the kubelet restarts it): only the requests in flight on it may fail
  key-change    the inference key changed (docs/security.md): the same rolling replacement, whose new replicas check
                the other slot's key, while Locust sends both slots' keys as the cluster's does

Every replica checks the inference key as on GKE with inferenceAuth (Triton's restricted inference group, in the
stack's inferenceKeySlot), and Locust sends both slots' keys; haproxy's health check reads the health group, which
needs no key (contracts/triton.py).

Then the same runs with one lifecycle setting removed, which must fail requests: rolling without the preStop
wait, scale-in without connection draining, and a Spot preemption whose grace period does not fit the notice; and
the key change with clients that send only the old slot's key, which the new replicas refuse (so the key change's 0
is not vacuous).

Each scenario's requests are counted three times, and the counts must agree (agree()): by Locust (its
--json-file); by haproxy (its runtime API's frontend counters, less Locust's liveness checks at its start, which its
request log lists); by every Triton replica that served (nv_inference_request_success/failure on its metrics port,
read until it leaves). Locust's requests, answers and failures equal haproxy's; Triton's successes equal the answers,
plus any request it answered after the balancer cut the client's connection, less any answer a replica gave after
its last reading before it was killed or exited (counted from haproxy's log). The table goes to OUT/rollout.md, every
count to OUT/rollout.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_gke.contracts.naming import model_bucket_name
from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS, PORTS, ROLLING_MAX_SURGE, inference_key_header, other_slot
from triton_gke.model_repo.sync import SyncError, sync_repository
from triton_gke.sandbox import components as parts
from triton_gke.sandbox import leftovers, rollout_model
from triton_gke.sandbox.balancer import BalancerSettings, Counters, LocalBalancer, LoggedRequest, Slot, percentile
from triton_gke.sandbox.components import ComponentError, LoadSettings, LocustLoad
from triton_gke.sandbox.gcs_emulator import GcsEmulator
from triton_gke.sandbox.inference_key import both_keys, new_key
from triton_gke.sandbox.netns import NamedNamespace, isolation_available
from triton_gke.sandbox.report import locust_results
from triton_gke.sandbox.triton import TritonServer
from triton_gke.settings import StackSettings
from triton_gke.settings.lifecycle import STACK_KEYS, LifecycleSettings, lifecycle_problem

SCENARIOS = ("rolling", "scale-in", "spot", "model-update", "kill", "key-change")
REPLICAS = 2
SLOTS = REPLICAS + 2  # a pod's namespace is reused once its replica is gone: never more than 3 at a time
RATE = 40  # requests/s: a few hundred per scenario
USERS = 32  # the most requests Locust keeps in flight
STEADY_S = 2.0  # load before the event: the "steady" p95
TAIL_S = 0.5
LOCUST_LIMIT_S = 600  # Locust's own -t; each scenario stops it itself with SIGTERM
POLL_S = 0.2
READY_TIMEOUT_S = 120.0
INFER_PATH = f"/v2/models/{rollout_model.MODEL}/infer"
# The key change's negative control (the `setting` of its row): clients that never got the new key.
OLD_KEY_ONLY = "clients send only the old key"


@dataclass(frozen=True)
class Removed:
    """A lifecycle setting taken out, and the scenario that must then fail requests."""

    scenario: str
    what: str
    change: Callable[[LifecycleSettings], LifecycleSettings]
    field: str  # the LifecycleSettings field the label shows

    def label(self, stack: LifecycleSettings) -> str:
        changed = self.change(stack)
        shown = f"{STACK_KEYS[self.field]} {getattr(changed, self.field)}"
        return (
            f"{self.what} ({shown} > {changed.spot_notice_s})" if self.scenario == "spot" else f"{self.what} ({shown})"
        )


def _without_pre_stop(v: LifecycleSettings) -> LifecycleSettings:
    return dataclasses.replace(v, pre_stop_s=0, termination_grace_s=v.exit_timeout_s + v.shutdown_margin_s)


def _without_drain(v: LifecycleSettings) -> LifecycleSettings:
    return dataclasses.replace(v, drain_timeout_s=0)


def _not_fitting_spot(v: LifecycleSettings) -> LifecycleSettings:
    """A load balancer that takes longer to stop sending than the notice lasts, with the preStop and grace period
    a standard pool needs for it: coherent with gpuSpot false, refused with gpuSpot true (grace > notice)."""
    checks_s = v.unhealthy_threshold * v.health_check_interval_s
    slow = dataclasses.replace(v, lb_programming_s=max(v.lb_programming_s, v.spot_notice_s + 1 - checks_s))
    pre_stop = slow.endpoint_removal_s  # a second past the notice
    return dataclasses.replace(
        slow, pre_stop_s=pre_stop, termination_grace_s=pre_stop + v.exit_timeout_s + v.shutdown_margin_s, spot=False
    )


REMOVED = (
    Removed("rolling", "no preStop wait", _without_pre_stop, "pre_stop_s"),
    Removed("scale-in", "no connection draining", _without_drain, "drain_timeout_s"),
    Removed("spot", "grace period longer than the Spot notice", _not_fitting_spot, "termination_grace_s"),
)


# ---------------------------------------------------------------- the inference key


def client_headers(keys: Mapping[str, str], only: str | None = None) -> dict[str, str]:
    """What Locust sends with every inference: every slot's key, each in its slot's header, as the cluster's Locust
    does (k8s/loadtest.py: a key change fails none of its requests); with `only`, that slot's key alone (a client
    not yet given the next key). {} without inferenceAuth (no keys)."""
    return both_keys(keys) if only is None else {inference_key_header(only): keys[only]}


def old_key_only_label(old_slot: str) -> str:
    """The negative control's `setting`: which key its clients keep sending."""
    return f"{OLD_KEY_ONLY} ({inference_key_header(old_slot)})"


# ---------------------------------------------------------------- replicas (pods)

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, never a proxy
_COUNTERS = {"nv_inference_request_success": 0, "nv_inference_request_failure": 1}


@dataclass(eq=False)
class Replica:
    """One pod: a tritonserver in a slot's namespace, and Triton's own count of what it answered."""

    slot: Slot
    server: TritonServer
    versions: tuple[str, ...] = ()
    key_slot: str | None = None  # the inference key slot its Triton checks; None: inference takes no key
    counts: tuple[int, int] = (0, 0)  # successes, failures: the last reading of this process
    read_at: float = 0.0  # when (unix time): an answer given after it and before the process ended is not counted
    carried: tuple[int, int] = (0, 0)  # of its processes before a crash (the kubelet restarted the container)

    @property
    def name(self) -> str:
        return self.slot.name

    def read_counts(self) -> None:
        """nv_inference_request_success/failure of the model, all versions (Triton's metrics port)."""
        from prometheus_client.parser import text_string_to_metric_families  # the 'local' extra

        started = time.time()
        try:
            with _DIRECT.open(self.server.metrics_url, timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return  # gone: the last reading stands
        counts = [0, 0]
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                kind = _COUNTERS.get(sample.name.removesuffix("_total"))
                if kind is not None and sample.labels.get("model") == rollout_model.MODEL:
                    counts[kind] += int(sample.value)
        self.counts, self.read_at = (counts[0], counts[1]), started

    def totals(self) -> tuple[int, int]:
        return self.counts[0] + self.carried[0], self.counts[1] + self.carried[1]


class _Closing(Exception):
    """The run is stopping: a deletion in progress ends where it is (close() stops every process)."""


class Fleet:
    """The Deployment's pods: replicas in slots (named namespaces haproxy connects into), started and deleted in
    the order Kubernetes and the NEG controller act, with the lifecycle values given."""

    def __init__(
        self,
        balancer: LocalBalancer,
        gcs: GcsEmulator,
        namespaces: dict[str, NamedNamespace],
        repository: str,
        inference_keys: Mapping[str, str],
        key_slot: str,
    ) -> None:
        self.balancer, self.gcs, self.namespaces, self.repository = balancer, gcs, namespaces, repository
        self.key = parts.admin_key()
        # Slot -> inference key, both generated as the stack does ({}: inferenceAuth false); a replica started now
        # checks key_slot's (the Deployment's pod template: a key change moves it, key_change()).
        self.inference_keys, self.key_slot = dict(inference_keys), key_slot
        self.free = list(balancer.slots)
        self.live: list[Replica] = []
        self.every: list[Replica] = []  # every replica ever started: each one's counts add up per scenario
        self._lock = threading.Lock()
        self.closing = False
        # (slot, last reading, end) of every Triton process that ended with answers possibly unread
        self.ends: list[tuple[str, float, float]] = []

    def start(self, exit_timeout_s: int) -> Replica:
        """A new pod: its endpoint is attached at once, unhealthy; returns once the balancer's health check passed
        `healthy_threshold` times, which is what the NEG readiness gate waits for before the rollout goes on."""
        with self._lock:
            slot = self.free.pop(0)
        key_slot = self.key_slot if self.inference_keys else None
        server = self.prepare(slot, exit_timeout_s)
        replica = Replica(slot, server, key_slot=key_slot)
        with self._lock:
            self.live.append(replica)
            self.every.append(replica)
        self.balancer.attach(slot.name)
        parts.launch_triton(server)
        replica.versions = _ready_versions(server)
        if not self.balancer.wait_healthy(slot.name, READY_TIMEOUT_S):
            raise ComponentError(f"haproxy never saw replica {slot.name} healthy: {self.balancer.status(slot.name)}")
        return replica

    def prepare(self, slot: Slot, exit_timeout_s: int) -> TritonServer:
        """A pod's tritonserver, not started: the GKE command line with the pod template's key slot and this
        scenario's --exit-timeout-secs."""
        key = self.inference_keys.get(self.key_slot)
        netns = self.namespaces[slot.namespace]
        return parts.prepare_triton(self.repository, self.gcs, netns, self.key, key, self.key_slot, exit_timeout_s)

    def delete(self, replica: Replica, lifecycle: LifecycleSettings, kill_after_s: float) -> threading.Thread:
        """Delete the pod; the kubelet and the NEG controller then act on their own (a thread)."""
        with self._lock:
            self.live.remove(replica)
        thread = threading.Thread(target=self._delete_pod, args=(replica, lifecycle, kill_after_s), daemon=True)
        thread.start()
        return thread

    def _delete_pod(self, replica: Replica, v: LifecycleSettings, kill_after_s: float) -> None:
        """From the deletion at t0, in time order: the endpoint leaves the balancer (drain) at endpoint_removal_s,
        connection draining ends (cut) drain_timeout_s later, SIGTERM once preStop is over, SIGKILL at kill_after_s
        (the grace period, or the Spot notice) if Triton is still running."""
        with contextlib.suppress(_Closing):
            self._steps(replica, v, kill_after_s)
            self.ends.append((replica.name, replica.read_at, time.time()))
            self.balancer.detach(replica.name)
            replica.server.close()
            with self._lock:
                self.free.append(replica.slot)

    def _steps(self, replica: Replica, v: LifecycleSettings, kill_after_s: float) -> None:
        t0, server, name = time.monotonic(), replica.server, replica.name
        removal = v.endpoint_removal_s
        steps = [(removal, "drain"), (removal + v.drain_timeout_s, "cut"), (v.pre_stop_s, "sigterm")]
        for at, step in sorted([*steps, (kill_after_s, "sigkill")]):
            due = t0 + at
            if step in ("cut", "sigkill"):  # both only matter while Triton runs: no wait once it has exited
                self._poll(replica, lambda due=due: time.monotonic() >= due or not server.is_running())
            else:
                self._poll(replica, lambda due=due: time.monotonic() >= due)
            if step == "drain":
                self.balancer.drain(name)
            elif not server.is_running() or server.pid is None:
                continue
            elif step == "cut":
                self.balancer.cut(name)
            elif step == "sigterm":
                os.kill(server.pid, signal.SIGTERM)  # the container's main process only, as the kubelet sends it
            else:
                server.kill()

    def _poll(self, replica: Replica, done: Callable[[], bool]) -> None:
        """Wait, reading Triton's counters meanwhile: a process that exits takes its counters with it."""
        while not done():
            if self.closing:
                raise _Closing
            if replica.server.is_running():
                replica.read_counts()
            time.sleep(POLL_S)

    def crash(self, replica: Replica) -> int:
        """kill -9 of Triton and its stubs, as an OOM kill of the container; the requests in flight on it then."""
        replica.read_counts()
        open_before, given_before = self.balancer.sessions(replica.name)
        replica.server.kill()
        # The requests open on it just before, and any haproxy gave it between that reading and the kill (a few ms:
        # missed, one red-team run counted 6 in flight where 7 failed).
        given_after = self.balancer.sessions(replica.name)[1]
        self.ends.append((replica.name, replica.read_at, time.time()))
        return open_before + given_after - given_before

    def restart(self, replica: Replica) -> None:
        """The kubelet starts the container again in the same pod (same namespace, same endpoint)."""
        replica.server.stop(0)  # reaps it and removes its shared memory
        replica.carried, replica.counts = replica.totals(), (0, 0)
        parts.launch_triton(replica.server)
        if not self.balancer.wait_healthy(replica.name, READY_TIMEOUT_S):
            raise ComponentError(f"haproxy never saw the restarted replica {replica.name} healthy")

    def close(self) -> None:
        self.closing = True  # deletions in progress stop where they are
        for replica in self.every:
            with contextlib.suppress(Exception):
                replica.server.close()


def _ready_versions(server: TritonServer) -> tuple[str, ...]:
    """The model's versions a replica serves (GET /v2/models/<model>: KServe v2 model metadata)."""
    with _DIRECT.open(f"http://{server.http_url}/v2/models/{rollout_model.MODEL}", timeout=5) as response:
        return tuple(json.load(response).get("versions", ()))


# ---------------------------------------------------------------- one scenario under load


@dataclass(frozen=True)
class Address:
    """What LocustLoad reads of a server: here the balancer's address."""

    http_url: str
    grpc_url: str


@dataclass
class Window:
    """One scenario's times (unix seconds) and what it observed."""

    scenario: str
    setting: str  # "stack", or the lifecycle setting removed
    load_from: float = 0.0
    steady_from: float = 0.0
    event: float = 0.0
    event_end: float = 0.0
    load_to: float = 0.0
    in_flight_at_kill: int | None = None
    versions: dict[str, list[str]] = field(default_factory=dict)
    key_slots: dict[str, list[str]] = field(default_factory=dict)  # the key change: slots checked before and after
    ends: list[tuple[str, float, float]] = field(default_factory=list)  # Fleet.ends during the scenario


def tally(
    window: Window, locust: dict[str, Any], logged: list[LoggedRequest], triton: tuple[int, int], counters: Counters
) -> dict[str, Any]:
    """One row of the table: the three counts of the scenario's requests, and the p95 at the balancer.

    haproxy's counts are its runtime API's frontend counters over the scenario less Locust's liveness GETs at its
    start (those are in the request log). Not the log alone: a request that fails on a kept-alive server connection
    gets its client connection closed with no response and no log line (seen here), yet counts in req_tot. The log
    gives the response times of the answered ones."""
    during_run = [r for r in logged if window.load_from <= r.accepted <= window.load_to]
    gets = [r for r in during_run if r.method != "POST"]
    infer = [r for r in during_run if r.method == "POST" and r.path == INFER_PATH and r.ok]
    steady = [r.active_ms for r in infer if window.steady_from <= r.accepted < window.event]
    during = [r.active_ms for r in infer if window.event <= r.accepted <= window.event_end]
    gets_ok = sum(r.ok for r in gets)
    refused = [r for r in during_run if r.method == "POST" and r.path == INFER_PATH and not r.ok]
    return {
        "scenario": window.scenario,
        "setting": window.setting,
        "sent": int(locust["requests"]),
        "answered": int(locust["requests"] - locust["failures"]),
        "failed": int(locust["failures"]),
        "p95_steady_ms": percentile(steady, 0.95),
        "p95_during_ms": percentile(during, 0.95),
        "event_s": round(window.event_end - window.event, 1),
        "haproxy": {
            "requests": counters.requests - len(gets),
            "ok": counters.ok - gets_ok,
            "failed": counters.failed - (len(gets) - gets_ok),
            # requests a replica refused a connection for, sent to another (retry-on conn-failure; never once sent)
            "resent": counters.redispatches,
        },
        # answers a replica gave between its last reading and its end (a kill, or its exit): its counters died with it
        "triton": {
            "ok": triton[0],
            "failed": triton[1],
            "unread": sum(
                read <= r.finished and r.accepted <= end
                for name, read, end in window.ends
                for r in infer
                if r.server == name
            ),
        },
        "in_flight_at_kill": window.in_flight_at_kill,
        # HTTP status -> failed inferences haproxy logged with it (403: Triton refused the key); one closed with no
        # answer may have no log line (above), so these can add up to fewer than `failed`
        "failed_statuses": {str(s): sum(r.status == s for r in refused) for s in sorted({r.status for r in refused})},
        "versions": window.versions,
        "key_slots": window.key_slots,
    }


def agree(row: dict[str, Any]) -> bool:
    """Locust and haproxy count the same requests, answers and failures; Triton answered every request Locust got an
    answer to, and at most the failed ones besides (a request Triton answered after the balancer cut it). A killed
    replica's counters die with it: what it answered after its last reading ("unread", from haproxy's log) is
    missing from Triton's count."""
    haproxy, triton = row["haproxy"], row["triton"]
    same = (row["sent"], row["answered"], row["failed"]) == (haproxy["requests"], haproxy["ok"], haproxy["failed"])
    lowest = row["answered"] - triton["unread"]
    return same and lowest <= triton["ok"] <= row["answered"] + row["failed"] and triton["failed"] == 0


# ---------------------------------------------------------------- the proof


class Proof:
    """The namespaces, the bucket, haproxy and the fleet, shared by every scenario; run() adds one row per run."""

    def __init__(self, settings: StackSettings, out: Path, progress: Callable[[str], None]) -> None:
        self.settings, self.lifecycle, self.out, self.progress = settings, settings.lifecycle, out, progress
        self.rows: list[dict[str, Any]] = []
        self.version = 0

    # ------------------------------------------------------------ set-up

    def open(self, cleanup: contextlib.ExitStack, state: leftovers.RunState | None = None) -> Proof:
        problem = lifecycle_problem(self.lifecycle, self.settings.monitoring.slo.latency_ms)
        if problem:  # the settings layer refuses this already; the proof runs only with coherent values
            raise ComponentError(f"lifecycle: {problem[0]}: {problem[1]}")
        if not isolation_available():
            raise ComponentError("the rollout proof needs network namespaces: run as root (or with CAP_SYS_ADMIN)")
        stale = NamedNamespace.delete_stale()
        if stale:
            self.progress(f"deleted the network namespaces of a killed run: {', '.join(stale)}")
        namespaces = {}
        for index in range(SLOTS):
            namespace = NamedNamespace(f"pod{index}")
            try:
                namespace.open()
            except RuntimeError as err:
                raise ComponentError(f"network namespace could not be created: {parts.one_line(err)}") from None
            cleanup.callback(namespace.close)
            namespaces[namespace.name] = namespace
        self.gcs = parts.start_emulator(None)
        cleanup.callback(self.gcs.stop)
        if state is not None and self.gcs.workdir:
            state.add_folder(self.gcs.workdir)
        for namespace in namespaces.values():  # the bucket, and nothing else, is reachable from the pods
            namespace.reach(int(self.gcs.endpoint.rsplit(":", 1)[1]))
        self.bucket = model_bucket_name(self.settings.project, self.settings.stack)
        self.gcs.client().create_bucket(self.bucket)
        repository = f"gs://{self.bucket}/{self.settings.model_store.prefix}"
        self.update_model()
        slots = [Slot(f"pod{i}", name, PORTS["http"]) for i, name in enumerate(namespaces)]
        self.balancer = LocalBalancer(BalancerSettings.of(self.lifecycle), self.out / "haproxy", slots).start()
        cleanup.callback(self.balancer.stop)
        serving = self.settings.serving
        self.keys = {s: new_key() for s in INFERENCE_KEY_SLOTS} if serving.inference_auth else {}
        self.fleet = Fleet(self.balancer, self.gcs, namespaces, repository, self.keys, serving.inference_key_slot)
        cleanup.callback(self.fleet.close)
        self.scale_to(REPLICAS)
        self.progress(
            f"{_describe(self.lifecycle)}; {_describe_key(self.keys, serving.inference_key_slot)}; "
            f"haproxy on {self.balancer.address}, model in {repository}"
        )
        return self

    def update_model(self) -> None:
        """Build the model's next version and sync it into the bucket with the code `pulumi up` runs."""
        self.version += 1
        local = rollout_model.build(self.out / "model", self.version)
        try:
            sync_repository(local, self.bucket, self.settings.model_store.prefix, self.gcs.client())
        except SyncError as err:
            raise ComponentError(f"model sync failed: {parts.one_line(err)}") from None

    def scale_to(self, replicas: int) -> None:
        while len(self.fleet.live) < replicas:
            self.fleet.start(self.lifecycle.exit_timeout_s)

    # ------------------------------------------------------------ a scenario under load

    @contextlib.contextmanager
    def loaded(self, scenario: str, setting: str = "stack", headers: dict[str, str] | None = None) -> Iterator[Window]:
        """Locust through haproxy, sending `headers` with every inference (default: both slots' keys), two replicas
        (Locust's start overlaps a scale-out's), STEADY_S of load, the event (the with-block), TAIL_S; one row."""
        for replica in self.fleet.live:
            replica.read_counts()
        baseline = {id(r): r.totals() for r in self.fleet.every}
        folder = self.out / (scenario if setting == "stack" else f"{scenario}-without")
        folder.mkdir(parents=True, exist_ok=True)
        load = LoadSettings(
            rollout_model.MODEL, "http", "uint8", 0, USERS, LOCUST_LIMIT_S, RATE, self.settings.load_test.arrival
        )
        headers = client_headers(self.keys) if headers is None else headers
        address = Address(self.balancer.address, self.balancer.address)
        locust = LocustLoad(load, address, folder, headers)  # type: ignore[arg-type]
        window, ends_before = Window(scenario, setting, load_from=time.time()), len(self.fleet.ends)
        before = self.balancer.counters()
        locust.start()
        try:
            self.scale_to(REPLICAS)
            self._wait_for_requests(locust)
            window.steady_from = time.time()
            time.sleep(STEADY_S)
            window.event = time.time()
            yield window
            window.event_end = time.time()
            time.sleep(TAIL_S)
        finally:
            locust.stop()
        time.sleep(POLL_S)  # haproxy logs a request when it ends: the last ones are written by now
        window.load_to = time.time()
        window.ends = self.fleet.ends[ends_before:]
        for replica in self.fleet.live:
            replica.read_counts()
        triton = [0, 0]
        for replica in self.fleet.every:
            now, then = replica.totals(), baseline.get(id(replica), (0, 0))
            triton = [triton[0] + now[0] - then[0], triton[1] + now[1] - then[1]]
        counted = locust_results(locust.csv_prefix, LOCUST_LIMIT_S)
        row = tally(
            window, counted, list(self.balancer.log_lines()), (triton[0], triton[1]), self.balancer.counters() - before
        )
        self.rows.append(row)
        self.progress(line(row))

    def _wait_for_requests(self, locust: LocustLoad) -> None:
        """Until Locust's users are sending (its start takes seconds on busy cores)."""
        first, deadline = self.balancer.counters().requests, time.monotonic() + 60
        while self.balancer.counters().requests < first + USERS + 10:
            if time.monotonic() > deadline:
                raise ComponentError(f"Locust sent nothing through haproxy in 60 s: {locust.last_log_line()}")
            time.sleep(0.1)

    # ------------------------------------------------------------ the scenarios

    def rolling(self, v: LifecycleSettings) -> None:
        """Every replica replaced as the Deployment's strategy says (contracts/triton.py ROLLING_MAX_*): with
        maxSurge 0 an old pod is deleted and its replacement created together, and the next old one only once the
        new one is ready (maxUnavailable 1); with a surge the new pod comes first. The rollout ends when the last
        old pod is gone."""
        surge = ROLLING_MAX_SURGE
        deletions = []
        for old in list(self.fleet.live):
            if surge:
                self.fleet.start(v.exit_timeout_s)
                deletions.append(self.fleet.delete(old, v, v.termination_grace_s))
            else:
                deletions.append(self.fleet.delete(old, v, v.termination_grace_s))
                self.fleet.start(v.exit_timeout_s)
        for thread in deletions:
            thread.join()

    def scale_in(self, v: LifecycleSettings) -> None:
        self.fleet.delete(self.fleet.live[0], v, v.termination_grace_s).join()

    def spot(self, v: LifecycleSettings) -> None:
        """A preemption: the kubelet's graceful node shutdown deletes the pod with its grace period cut to the
        notice; the Deployment's replacement starts on another node once the pod is gone."""
        self.fleet.delete(self.fleet.live[0], v, min(v.termination_grace_s, v.spot_notice_s)).join()
        self.fleet.start(v.exit_timeout_s)

    def model_update(self, v: LifecycleSettings, window: Window) -> None:
        window.versions["before"] = sorted({x for r in self.fleet.live for x in r.versions})
        self.update_model()
        self.rolling(v)
        window.versions["after"] = sorted({x for r in self.fleet.live for x in r.versions})

    def kill(self, window: Window) -> None:
        victim = self.fleet.live[0]
        window.in_flight_at_kill = self.fleet.crash(victim)
        self.fleet.restart(victim)

    def key_change(self, v: LifecycleSettings, window: Window) -> None:
        """The inference key changed (docs/security.md, step 2): inferenceKeySlot moved to the other slot changes
        Triton's pod template (the slot's header in its args, the slot's key in its env: k8s/triton.py), and "A
        Deployment's rollout is triggered if and only if the Deployment's Pod template (that is, .spec.template) is
        changed" (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#updating-a-deployment): the
        rolling replacement, whose new replicas check the other slot's key."""
        window.key_slots["before"] = self._key_slots()
        self.fleet.key_slot = other_slot(self.fleet.key_slot)
        self.rolling(v)
        window.key_slots["after"] = self._key_slots()

    def _key_slots(self) -> list[str]:
        return sorted({r.key_slot for r in self.fleet.live if r.key_slot})

    def run(
        self, scenarios: tuple[str, ...] = SCENARIOS, removed: tuple[Removed, ...] = REMOVED, old_key_only: bool = True
    ) -> None:
        """The scenarios, the removed settings, then (old_key_only) the key change's negative control: the same
        change, from the slot the fleet checks now to the other, with Locust sending only the old slot's key."""
        v = self.lifecycle
        for scenario in scenarios:
            if scenario == "key-change" and not self.keys:
                self.progress("  key-change: not run (inferenceAuth is false: no key to change)")
                continue
            with self.loaded(scenario) as window:
                if scenario in ("model-update", "key-change"):
                    getattr(self, scenario.replace("-", "_"))(v, window)
                elif scenario == "kill":
                    self.kill(window)
                else:
                    getattr(self, scenario.replace("-", "_"))(v)
        for removal in removed:
            with self.loaded(removal.scenario, removal.label(v)):
                getattr(self, removal.scenario.replace("-", "_"))(removal.change(v))
        if old_key_only and self.keys:
            old = self.fleet.key_slot
            with self.loaded("key-change", old_key_only_label(old), client_headers(self.keys, old)) as window:
                self.key_change(v, window)


def _describe_key(keys: Mapping[str, str], slot: str) -> str:
    if not keys:
        return "inference takes no key (inferenceAuth false)"
    return f"inference key checked in {inference_key_header(slot)}, Locust sends both slots' keys"


def _describe(v: LifecycleSettings) -> str:
    return (
        f"lifecycle: endpoint removal {v.endpoint_removal_s} s, preStop {v.pre_stop_s} s, exit timeout "
        f"{v.exit_timeout_s} s, grace {v.termination_grace_s} s, draining {v.drain_timeout_s} s, health check every "
        f"{v.health_check_interval_s} s (healthy after {v.healthy_threshold}, unhealthy after "
        f"{v.unhealthy_threshold}), Spot notice {v.spot_notice_s} s"
    )


# ---------------------------------------------------------------- the table


COLUMNS = (
    "scenario",
    "lifecycle",
    "sent",
    "answered",
    "failed",
    "p95 steady (ms)",
    "p95 during (ms)",
    "haproxy 2xx / failed (re-sent)",
    "Triton ok / failed",
    "counts agree",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"  # None: no request in that window


def table(rows: list[dict[str, Any]]) -> str:
    """The scenario table (Markdown)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        failed = str(row["failed"])
        if row["in_flight_at_kill"] is not None:
            failed += f" ({row['in_flight_at_kill']} in flight at the kill)"
        cells = [
            row["scenario"],
            row["setting"],
            str(row["sent"]),
            str(row["answered"]),
            failed,
            _ms(row["p95_steady_ms"]),
            _ms(row["p95_during_ms"]),
            f"{row['haproxy']['ok']} / {row['haproxy']['failed']} ({row['haproxy']['resent']})",
            f"{row['triton']['ok']} / {row['triton']['failed']}",
            "yes" if agree(row) else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def line(row: dict[str, Any]) -> str:
    return (
        f"  {row['scenario']} ({row['setting']}): {row['sent']} sent, {row['answered']} answered, {row['failed']} "
        f"failed; p95 {_ms(row['p95_steady_ms'])} ms steady, {_ms(row['p95_during_ms'])} ms during "
        f"({row['event_s']} s); haproxy {row['haproxy']['ok']}/{row['haproxy']['failed']}, Triton "
        f"{row['triton']['ok']}/{row['triton']['failed']}{'' if agree(row) else ' (counts differ)'}"
    )


def write(rows: list[dict[str, Any]], out: Path, settings: StackSettings) -> None:
    """OUT/rollout.json (every count, and what the run was) and OUT/rollout.md (the table)."""
    run = {
        "stack": settings.stack,
        "lifecycle": dataclasses.asdict(settings.lifecycle),
        "load": {"rate_per_s": RATE, "users": USERS, "arrival": settings.load_test.arrival, "protocol": "http"},
        "model": {"name": rollout_model.MODEL, "service_ms": rollout_model.SERVICE_MS, "replicas": REPLICAS},
        # The slot the replicas checked at the start (None: inferenceAuth false); Locust sent both slots' keys.
        "inference_key_slot": settings.serving.inference_key_slot if settings.serving.inference_auth else None,
        "rows": rows,
    }
    (out / "rollout.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    (out / "rollout.md").write_text(table(rows), encoding="utf-8")


def run(
    settings: StackSettings,
    out: Path,
    progress: Callable[[str], None],
    cleanup: contextlib.ExitStack,
    state: leftovers.RunState | None = None,
) -> int:
    """The whole proof (`make sandbox ARGS='--scenario rollout'`): every scenario, then the removed settings."""
    proof = Proof(settings, out, progress).open(cleanup, state)
    proof.run()
    write(proof.rows, out, settings)
    print(table(proof.rows), flush=True)
    progress(f"table in {out / 'rollout.md'}, every count in {out / 'rollout.json'}")
    return 0
