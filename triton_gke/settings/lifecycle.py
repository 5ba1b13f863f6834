"""The lifecycle contract: how a Triton pod leaves the global load balancer without failing a request.

One set of values drives the Triton Deployment (preStop wait, --exit-timeout-secs, terminationGracePeriodSeconds,
the NEG readiness gate, the PodDisruptionBudget; k8s/triton.py), the load balancer's health check and connection
draining (infra/global_lb.py) and the local proof's haproxy (sandbox/). The order a pod leaves in, for a rollout,
a scale-in or a node drain:

1. The pod is deleted; the NEG controller detaches its endpoint and the load balancer's change is programmed.
   Until then new requests still arrive, so the preStop hook waits at least that long (`endpoint_removal_s`):
   Google's advice for NEG backends is "a simple sleep that takes about the same amount of time for the endpoint to
   be removed from the NEG", and a pod that fails the health check is taken out after unhealthy_threshold probes,
   one per interval ("once every 5 secs with a threshold of 2 failed HC ... leaves room for 10s of 5XXs"),
   https://cloud.google.com/knowledge/kb/502-503-errors-on-external-http-s-load-balancer-000006416. Google
   documents no bound on programming a NEG change, so lbProgrammingSeconds is this contract's allowance for it.
2. After preStop, the kubelet sends SIGTERM: Triton refuses new connections at once
   (triton-inference-server/server#6230, #6286) and lets requests in flight finish for --exit-timeout-secs
   (server PRs #6986 HTTP, #7969 gRPC).
3. terminationGracePeriodSeconds counts from the deletion and covers the preStop hook too
   (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination): past it, SIGKILL.
4. Requests the load balancer had sent before the endpoint's removal get the backend service's connection
   draining timeout to finish (https://cloud.google.com/load-balancing/docs/enabling-connection-draining).

On Spot nodes a preemption notice gives pods 30 s by default, the first 15 s for non-system pods and the rest for
system-critical ones (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
shutdown of Spot VMs"; extending it to 120 s needs a node system configuration on GKE 1.35.0-gke.1171000 or later,
which this stack does not set), and a terminationGracePeriodSeconds above 15 s has no effect there
(https://cloud.google.com/kubernetes-engine/docs/how-to/preemptible-vms): a longer grace period is a promise the
node cannot keep.

`lifecycle_problem` is pure: the settings layer (`lifecycle`) reads the stack keys and raises its answer as one
ConfigError line naming the key; the local proof checks the values it runs with through the same function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from triton_gke.contracts.triton import DEFAULT_EXIT_TIMEOUT_S, READY_PATH
from triton_gke.settings.reader import Reader

# Compute Engine health checks: "It is invalid for timeoutSec to have greater value than checkIntervalSec" (the
# HealthCheck schema, hashicorp/terraform-provider-google-beta google-beta/services/compute/
# resource_compute_health_check.go, which pulumi-gcp bridges). The upper bounds are this contract's: past them a
# gone pod would get requests for minutes.
HEALTH_CHECK_SOURCE = "https://cloud.google.com/load-balancing/docs/health-check-concepts"
MAX_CHECK_INTERVAL_S = 300
MAX_THRESHOLD = 10
# Connection draining timeout: 0 to 3600 s (https://cloud.google.com/load-balancing/docs/enabling-connection-draining).
MAX_DRAIN_TIMEOUT_S = 3600
# GKE Spot VMs: non-system pods get up to 15 s of the 30 s preemption notice (module docstring).
SPOT_NOTICE_S = 15
# Longest wait accepted for preStop, exit timeout and grace period: one hour, far above any real drain.
MAX_WAIT_S = 3600
# GKE's NEG controller marks the readiness gate true for a pod still failing the load balancer's health check 10
# minutes after it was created (kubernetes/ingress-gce pkg/neg/readiness/reflector.go unreadyTimeout): a health check
# that needs longer to call a new pod healthy would no longer hold the rollout.
NEG_UNREADY_TIMEOUT_S = 600

# Stack key (Pulumi.yaml) of each settable field; the others derive from the stack (spot, slo) or are fixed.
STACK_KEYS: dict[str, str] = {
    "pre_stop_s": "tritonPreStopSeconds",
    "exit_timeout_s": "tritonExitTimeoutSeconds",
    "termination_grace_s": "tritonTerminationGraceSeconds",
    "drain_timeout_s": "lbDrainingTimeoutSeconds",
    "health_check_interval_s": "lbHealthCheckIntervalSeconds",
    "health_check_timeout_s": "lbHealthCheckTimeoutSeconds",
    "healthy_threshold": "lbHealthyThreshold",
    "unhealthy_threshold": "lbUnhealthyThreshold",
    "lb_programming_s": "lbProgrammingSeconds",
    "pdb_max_unavailable": "tritonMaxUnavailable",
}


@dataclass(frozen=True)
class LifecycleSettings:
    """The lifecycle values of one stack (defaults: the reference values, coherent on Spot and standard pools)."""

    # preStop hook: how long a deleted pod keeps serving before SIGTERM, while the load balancer stops sending.
    pre_stop_s: int = 10
    # tritonserver --exit-timeout-secs: how long requests in flight may finish after SIGTERM.
    exit_timeout_s: int = DEFAULT_EXIT_TIMEOUT_S
    # terminationGracePeriodSeconds: from deletion to SIGKILL, preStop included.
    termination_grace_s: int = 15
    # Backend service connectionDraining.drainingTimeoutSec: how long requests to a removed endpoint may finish.
    drain_timeout_s: int = 10
    # The load balancer's health check (Triton's strict readiness, so a pod is healthy once every model loaded).
    health_check_interval_s: int = 2
    health_check_timeout_s: int = 2
    healthy_threshold: int = 2
    unhealthy_threshold: int = 2
    health_check_path: str = READY_PATH
    # How long a change to a NEG takes to reach the load balancer's front ends once made.
    lb_programming_s: int = 5
    # PodDisruptionBudget maxUnavailable: Triton pods a node drain may take down at a time.
    pdb_max_unavailable: int = 1
    # The GPU pool runs on Spot VMs (gpuSpot): the grace period must fit the preemption notice.
    spot: bool = False
    spot_notice_s: int = SPOT_NOTICE_S
    # Time left between the end of --exit-timeout-secs and SIGKILL, for Triton to unload models and exit.
    shutdown_margin_s: int = 2
    # Declare the pod readiness gate cloud.google.com/load-balancer-neg-ready on Triton's pods (k8s/triton.py).
    neg_readiness_gate: bool = True

    @property
    def endpoint_removal_s(self) -> int:
        """Worst case from a pod's deletion until the load balancer sends it nothing new: the health check marking
        it unhealthy (unhealthy_threshold consecutive failed probes, one per interval) plus programming."""
        return self.unhealthy_threshold * self.health_check_interval_s + self.lb_programming_s

    @property
    def shutdown_s(self) -> int:
        """What terminationGracePeriodSeconds must cover: preStop + exit timeout + margin."""
        return self.pre_stop_s + self.exit_timeout_s + self.shutdown_margin_s


DEFAULTS = LifecycleSettings()


def longest_request_s(slo_latency_ms: int) -> int:
    """The longest request at the SLO (sloLatencyMs), in whole seconds (Triton's exit timeout is whole seconds)."""
    return max(1, math.ceil(slo_latency_ms / 1000))


def lifecycle_problem(values: LifecycleSettings, slo_latency_ms: int) -> tuple[str, str] | None:
    """The first incoherence in `values` as (stack key, reason), or None. The settings layer makes it one line."""
    return _range_problem(values) or _order_problem(values, slo_latency_ms)


def _range_problem(v: LifecycleSettings) -> tuple[str, str] | None:
    for name, low, high, source in (
        ("health_check_interval_s", 1, MAX_CHECK_INTERVAL_S, "seconds between health checks"),
        ("health_check_timeout_s", 1, MAX_CHECK_INTERVAL_S, "seconds"),
        ("healthy_threshold", 1, MAX_THRESHOLD, "consecutive health checks"),
        ("unhealthy_threshold", 1, MAX_THRESHOLD, "consecutive health checks"),
        ("drain_timeout_s", 0, MAX_DRAIN_TIMEOUT_S, "the backend service's connection draining timeout"),
        ("pre_stop_s", 0, MAX_WAIT_S, "at most an hour"),
        ("exit_timeout_s", 0, MAX_WAIT_S, "at most an hour"),
        ("termination_grace_s", 0, MAX_WAIT_S, "at most an hour"),
        ("lb_programming_s", 1, MAX_WAIT_S, "a NEG change is never programmed at once; at most an hour"),
        ("pdb_max_unavailable", 1, 2**31 - 1, "at least 1, or no node drain can proceed"),
    ):
        value = getattr(v, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return STACK_KEYS[name], f"expected a whole number from {low} to {high:,} ({source})"
    if v.health_check_timeout_s > v.health_check_interval_s:
        return STACK_KEYS["health_check_timeout_s"], (
            f"must not exceed lbHealthCheckIntervalSeconds ({v.health_check_interval_s}): Compute Engine refuses a "
            "health check whose timeout exceeds its interval"
        )
    return None


def _order_problem(v: LifecycleSettings, slo_latency_ms: int) -> tuple[str, str] | None:
    if v.pre_stop_s < v.endpoint_removal_s:
        return STACK_KEYS["pre_stop_s"], (
            f"shorter than the endpoint's removal from the load balancer ({v.endpoint_removal_s} s = "
            f"lbUnhealthyThreshold {v.unhealthy_threshold} x lbHealthCheckIntervalSeconds "
            f"{v.health_check_interval_s} + lbProgrammingSeconds {v.lb_programming_s}): it would still get requests "
            "after SIGTERM"
        )
    longest = longest_request_s(slo_latency_ms)
    if v.exit_timeout_s < longest:
        return STACK_KEYS["exit_timeout_s"], (
            f"shorter than the longest request at the SLO ({longest} s for sloLatencyMs {slo_latency_ms}): requests "
            "in flight at SIGTERM would be cut"
        )
    if v.termination_grace_s < v.shutdown_s:
        return STACK_KEYS["termination_grace_s"], (
            f"shorter than preStop + exit timeout + margin ({v.pre_stop_s} + {v.exit_timeout_s} + "
            f"{v.shutdown_margin_s} = {v.shutdown_s} s): Triton would be killed with requests in flight"
        )
    if v.spot and v.termination_grace_s > v.spot_notice_s:
        return STACK_KEYS["termination_grace_s"], (
            f"longer than the {v.spot_notice_s} s a Spot preemption gives pods (gpuSpot: true); GKE ignores the rest "
            "(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms)"
        )
    if v.healthy_threshold * v.health_check_interval_s > NEG_UNREADY_TIMEOUT_S:
        return STACK_KEYS["healthy_threshold"], (
            f"a new pod needs {v.healthy_threshold} x {v.health_check_interval_s} s of passing health checks, longer "
            f"than the {NEG_UNREADY_TIMEOUT_S} s after which GKE opens the NEG readiness gate anyway "
            "(kubernetes/ingress-gce reflector.go unreadyTimeout): rollouts would stop waiting for the load balancer"
        )
    if v.drain_timeout_s < v.exit_timeout_s:
        return STACK_KEYS["drain_timeout_s"], (
            f"shorter than tritonExitTimeoutSeconds ({v.exit_timeout_s}): the load balancer would cut requests "
            "Triton is still finishing"
        )
    return None


def disruption_problem(values: LifecycleSettings, min_pods: int) -> tuple[str, str] | None:
    """A PodDisruptionBudget letting a node drain or upgrade evict every Triton pod a region keeps at its minimum:
    maxUnavailable counts pods evictions may leave unavailable at once
    (https://kubernetes.io/docs/tasks/run-application/configure-pdb/), so it must leave one serving."""
    allowed = max(1, min_pods - 1)
    if values.pdb_max_unavailable <= allowed:
        return None
    return STACK_KEYS["pdb_max_unavailable"], (
        f"more than {allowed}: a node drain or upgrade could evict all {min_pods} Triton pod(s) a region keeps at "
        "its minimum (gpuMinNodes, or what targetRps sizes) at once"
    )


def check_disruption_budget(reader: Reader, values: LifecycleSettings, min_pods: int) -> None:
    """After the pool is sized: disruption_problem as one ConfigError line naming tritonMaxUnavailable."""
    problem = disruption_problem(values, min_pods)
    if problem:
        key, reason = problem
        raise reader.fail(key, values.pdb_max_unavailable, reason)


def lifecycle(reader: Reader, spot: bool, slo_latency_ms: int) -> LifecycleSettings:
    """The stack's lifecycle values, refused in one line naming the key when incoherent."""
    values = LifecycleSettings(
        **{name: reader.integer(key) for name, key in STACK_KEYS.items()},
        spot=spot,
    )
    problem = lifecycle_problem(values, slo_latency_ms)
    if problem:
        key, reason = problem
        name = next(n for n, k in STACK_KEYS.items() if k == key)
        raise reader.fail(key, getattr(values, name), reason)
    return values


__all__ = [
    "DEFAULTS",
    "STACK_KEYS",
    "SPOT_NOTICE_S",
    "LifecycleSettings",
    "check_disruption_budget",
    "disruption_problem",
    "lifecycle",
    "lifecycle_problem",
    "longest_request_s",
]
