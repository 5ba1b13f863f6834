"""Deploy invariants of the lifecycle contract (issue 23): every Triton Deployment and every backend service of the
plan carries values under which a pod leaves the load balancer without failing a request.

Each rule reads the plan itself (the pod spec, the health check the backend services use, the GPU node pool), so
it holds whatever the settings layer let through; its source is in its docstring. The `revert` tests at the end
take each setting back out (the code that applies it, or the settings check, switched off) and show that the rule
then fails. The contract and its defaults: settings/lifecycle.py; the page: docs/lifecycle.md.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.stacks import evaluate, stack_settings
from tests.unit.infra.test_deploy_invariants import TRITON_SERVING, of_kind, triton_deployments
from triton_gke.contracts.triton import READY_PATH
from triton_gke.k8s import on_cluster as on_cluster_module
from triton_gke.k8s import triton as triton_module
from triton_gke.k8s.triton import NEG_READINESS_GATE
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.settings import lifecycle as lifecycle_module
from triton_gke.settings import load_stack_settings
from triton_gke.settings.lifecycle import SPOT_NOTICE_S, LifecycleSettings, longest_request_s

STACKS = ("dev", "staging", "prod")
BACKEND = "gcp:compute/backendService:BackendService"
HEALTH_CHECK = "gcp:compute/healthCheck:HealthCheck"
NODE_POOL = "gcp:container/nodePool:NodePool"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SERVICE = "kubernetes:core/v1:Service"
EXIT_TIMEOUT = re.compile(r"--exit-timeout-secs=(\d+)")


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def plan(stack: str) -> Plan:
    return evaluate(stack)


def contract(stack: str) -> tuple[LifecycleSettings, int]:
    """The stack's lifecycle values and sloLatencyMs, as the settings layer reads them."""
    settings = load_stack_settings(stack_settings(stack), stack=stack)
    return settings.lifecycle, settings.monitoring.slo.latency_ms


# ---- what the plan says ----------------------------------------------------------------------------------------


def _pod(deployment: PlannedResource) -> dict[str, Any]:
    return deployment.inputs["spec"]["template"]["spec"]


def _container(deployment: PlannedResource) -> dict[str, Any]:
    (container,) = _pod(deployment)["containers"]
    return container


def pre_stop_s(deployment: PlannedResource) -> int:
    """The preStop wait: the `sleep` action's seconds, or `sleep N` run in the container; 0 without a hook."""
    hook = _container(deployment).get("lifecycle", {}).get("preStop", {})
    if "sleep" in hook:
        return int(hook["sleep"]["seconds"])
    command = hook.get("exec", {}).get("command", [])
    return int(command[1]) if command[:1] == ["sleep"] else 0


def exit_timeout_s(deployment: PlannedResource) -> int:
    (value,) = [int(m.group(1)) for arg in _container(deployment)["args"] if (m := EXIT_TIMEOUT.fullmatch(arg))]
    return value


def grace_s(deployment: PlannedResource) -> int:
    # Kubernetes' default when unset is 30 s (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/).
    return int(_pod(deployment).get("terminationGracePeriodSeconds", 30))


def health_checks_of(plan: Plan, backend: PlannedResource) -> list[PlannedResource]:
    return [hc for hc in plan.of_type(HEALTH_CHECK) if hc.urn in backend.dependencies]


def endpoint_removal_s(plan: Plan, life: LifecycleSettings) -> int:
    """Worst case until the load balancer sends a removed pod nothing new: the slowest health check of the plan's
    backend services (unhealthyThreshold probes, one per checkIntervalSec) plus the programming allowance; without
    a load balancer, the contract's own figure."""
    checks = [hc.inputs for b in plan.of_type(BACKEND) for hc in health_checks_of(plan, b)]
    if not checks:
        return life.endpoint_removal_s
    slowest = max(int(hc["unhealthyThreshold"]) * int(hc["checkIntervalSec"]) for hc in checks)
    return slowest + life.lb_programming_s


# ---- the rules, as problem lists (empty: the rule holds) ------------------------------------------------------


def pre_stop_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """Google's advice for NEG backends: "Use a pre-stop hook ... A simple sleep that takes about the same amount of
    time for the endpoint to be removed from the NEG will delay the SIGTERM", and health-check removal "leaves room
    for 10s of 5XXs" at 5 s x 2 (https://cloud.google.com/knowledge/kb/502-503-errors-on-external-http-s-load-balancer-000006416).
    Triton refuses new connections at SIGTERM (triton-inference-server/server#6230), so a shorter wait fails requests.
    """
    removal = endpoint_removal_s(plan, life)
    return [
        f"{d.name}: preStop {pre_stop_s(d)} s < endpoint removal {removal} s"
        for d in triton_deployments(plan)
        if pre_stop_s(d) < removal
    ]


def exit_timeout_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """--exit-timeout-secs is how long Triton lets requests in flight finish after SIGTERM (server PRs #6986 HTTP,
    #7969 gRPC, https://github.com/triton-inference-server/server/pull/6986): shorter than the longest request at
    the SLO cuts requests in flight."""
    longest = longest_request_s(slo_ms)
    return [
        f"{d.name}: exit timeout {exit_timeout_s(d)} s < longest request {longest} s"
        for d in triton_deployments(plan)
        if exit_timeout_s(d) < longest
    ]


def grace_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """The grace period counts from deletion, preStop included; past it the kubelet sends SIGKILL
    (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination): it must cover preStop +
    exit timeout + the margin for Triton to exit."""
    return [
        f"{d.name}: grace {grace_s(d)} s < preStop {pre_stop_s(d)} + exit {exit_timeout_s(d)} + margin"
        for d in triton_deployments(plan)
        if grace_s(d) < pre_stop_s(d) + exit_timeout_s(d) + life.shutdown_margin_s
    ]


def spot_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """A preempted Spot node gives non-system pods 15 s; a longer grace period has no effect
    (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms,
    https://cloud.google.com/kubernetes-engine/docs/how-to/preemptible-vms)."""
    spot = any(pool.inputs.get("nodeConfig", {}).get("spot") for pool in plan.of_type(NODE_POOL))
    if not spot:
        return []
    return [
        f"{d.name}: grace {grace_s(d)} s on a Spot pool > {SPOT_NOTICE_S} s"
        for d in triton_deployments(plan)
        if grace_s(d) > SPOT_NOTICE_S
    ]


def readiness_gate_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """GKE adds the NEG readiness gate by itself only for NEGs made through Ingress
    (https://cloud.google.com/kubernetes-engine/docs/concepts/container-native-load-balancing, "Pod readiness");
    ingress-gce reflects it for standalone NEGs only on pods that list it (pkg/neg/readiness/utils.go needToProcess).
    So every Triton pod behind a NEG Service must list it, or a rollout removes old pods before new ones pass the
    load balancer's health check."""
    services = defaultdict(list)
    for owner, service in of_kind(plan, TRITON_SERVING, SERVICE):
        services[owner.urn].append(service)
    problems = []
    for owner, deployment in of_kind(plan, TRITON_SERVING, triton_deployments(plan)[0].type):
        negs = [s for s in services[owner.urn] if "cloud.google.com/neg" in s.inputs["metadata"].get("annotations", {})]
        gates = [g["conditionType"] for g in _pod(deployment).get("readinessGates", [])]
        if negs and NEG_READINESS_GATE not in gates:
            problems.append(f"{deployment.name}: behind NEGs without the {NEG_READINESS_GATE} gate")
    return problems


def disruption_budget_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """Each Triton Deployment has a PodDisruptionBudget selecting its pods with maxUnavailable of at least 1, the
    contract's: 0 blocks every node drain and upgrade, none lets a drain take every pod at once
    (https://kubernetes.io/docs/tasks/run-application/configure-pdb/)."""
    budgets = defaultdict(list)
    for owner, budget in of_kind(plan, TRITON_SERVING, PDB):
        budgets[owner.urn].append(budget)
    problems = []
    for owner, deployment in of_kind(plan, TRITON_SERVING, triton_deployments(plan)[0].type):
        labels = deployment.inputs["spec"]["template"]["metadata"]["labels"]
        specs = [b.inputs["spec"] for b in budgets[owner.urn]]
        selects = [spec for spec in specs if spec["selector"]["matchLabels"].items() <= labels.items()]
        unavailable = [int(spec.get("maxUnavailable", 0)) for spec in selects]
        if unavailable != [life.pdb_max_unavailable] or life.pdb_max_unavailable < 1:
            problems.append(f"{deployment.name}: disruption budgets' maxUnavailable {unavailable}")
    return problems


def draining_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """Connection draining gives requests a removed endpoint had "time to complete" and sends it no new ones
    (https://cloud.google.com/load-balancing/docs/enabling-connection-draining); shorter than Triton's exit timeout,
    the load balancer cuts requests Triton is still finishing."""
    longest_exit = max(exit_timeout_s(d) for d in triton_deployments(plan))
    return [
        f"{b.name}: draining {b.inputs.get('connectionDrainingTimeoutSec')} s < exit timeout {longest_exit} s"
        for b in plan.of_type(BACKEND)
        if int(b.inputs.get("connectionDrainingTimeoutSec", 0)) < longest_exit
    ]


def health_check_problems(plan: Plan, life: LifecycleSettings, slo_ms: int) -> list[str]:
    """Every backend service checks Triton's strict readiness path with the contract's interval, timeout and
    thresholds (https://cloud.google.com/load-balancing/docs/health-check-concepts); a timeout above the interval is
    invalid (the HealthCheck schema, terraform-provider-google-beta resource_compute_health_check.go)."""
    want = {
        "checkIntervalSec": life.health_check_interval_s,
        "timeoutSec": life.health_check_timeout_s,
        "healthyThreshold": life.healthy_threshold,
        "unhealthyThreshold": life.unhealthy_threshold,
    }
    problems = []
    for backend in plan.of_type(BACKEND):
        checks = health_checks_of(plan, backend)
        if len(checks) != 1:
            problems.append(f"{backend.name}: {len(checks)} health checks")
        for hc in checks:
            got = {key: int(hc.inputs[key]) for key in want}
            if got != want or hc.inputs["httpHealthCheck"]["requestPath"] != READY_PATH:
                problems.append(f"{backend.name}: health check {got} {hc.inputs['httpHealthCheck']}, want {want}")
            if got["timeoutSec"] > got["checkIntervalSec"]:
                problems.append(f"{backend.name}: timeout above interval")
    return problems


RULES: dict[str, Callable[[Plan, LifecycleSettings, int], list[str]]] = {
    "preStop covers the endpoint's removal": pre_stop_problems,
    "exit timeout covers the longest request": exit_timeout_problems,
    "grace covers preStop + exit timeout": grace_problems,
    "grace fits the Spot notice": spot_problems,
    "NEG readiness gate": readiness_gate_problems,
    "disruption budget": disruption_budget_problems,
    "connection draining covers the exit timeout": draining_problems,
    "health check as the contract": health_check_problems,
}


@pytest.mark.parametrize("rule", list(RULES))
def test_every_triton_deployment_and_backend_service_keeps_the_rule(plan: Plan, stack: str, rule: str) -> None:
    life, slo_ms = contract(stack)
    assert not RULES[rule](plan, life, slo_ms)


def test_the_plan_carries_the_stack_values(plan: Plan, stack: str) -> None:
    """Not only coherent: the values are the stack's (a pod spec the settings never reach would pass the rules)."""
    life, _ = contract(stack)
    for deployment in triton_deployments(plan):
        got = (pre_stop_s(deployment), exit_timeout_s(deployment), grace_s(deployment))
        assert got == (life.pre_stop_s, life.exit_timeout_s, life.termination_grace_s), deployment.name
    for backend in plan.of_type(BACKEND):
        assert int(backend.inputs["connectionDrainingTimeoutSec"]) == life.drain_timeout_s, backend.name


# ---- reverting each setting makes its rule fail ---------------------------------------------------------------


def _unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings layer's check off, and TritonOnCluster's call of the same rules, so incoherent stack values reach
    the plan (as if the rule were absent)."""
    monkeypatch.setattr(lifecycle_module, "lifecycle_problem", lambda values, slo_ms: None)
    monkeypatch.setattr(on_cluster_module, "check_lifecycle", lambda name, lifecycle, min_replicas: None)


def _failing(rule: str, stack: str, **overrides: Any) -> list[str]:
    life, slo_ms = contract(stack)
    return RULES[rule](evaluate(stack, **overrides), life, slo_ms)


def test_revert_no_pre_stop_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod spec without its preStop hook (the code before this contract): SIGTERM at once."""
    monkeypatch.setattr(triton_module, "pre_stop_handler", lambda seconds, minor: None)
    assert _failing("preStop covers the endpoint's removal", "dev")


def test_revert_the_old_health_check_outlasts_the_pre_stop_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The health check before this contract (5 s x 3) takes 20 s with the allowance: longer than a 10 s wait."""
    _unchecked(monkeypatch)
    failing = _failing(
        "preStop covers the endpoint's removal",
        "staging",
        lbHealthCheckIntervalSeconds=5,
        lbHealthCheckTimeoutSeconds=3,
        lbUnhealthyThreshold=3,
    )
    assert failing and all("endpoint removal 20 s" in problem for problem in failing)


def test_revert_no_exit_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    _unchecked(monkeypatch)
    assert _failing("exit timeout covers the longest request", "staging", tritonExitTimeoutSeconds=0)


def test_revert_a_grace_period_shorter_than_the_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    _unchecked(monkeypatch)
    assert _failing("grace covers preStop + exit timeout", "staging", tritonTerminationGraceSeconds=5)


def test_revert_the_old_grace_period_on_a_spot_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 30 s hard-coded before this contract, on dev's Spot GPU pool."""
    _unchecked(monkeypatch)
    assert _failing("grace fits the Spot notice", "dev", tritonTerminationGraceSeconds=30)


def test_revert_no_readiness_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton_module.TritonServing, "_readiness_gates", property(lambda self: None))
    assert _failing("NEG readiness gate", "dev")


def test_revert_a_budget_that_blocks_every_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    _unchecked(monkeypatch)
    assert _failing("disruption budget", "dev", tritonMaxUnavailable=0)


def test_revert_no_connection_draining(monkeypatch: pytest.MonkeyPatch) -> None:
    _unchecked(monkeypatch)
    assert _failing("connection draining covers the exit timeout", "staging", lbDrainingTimeoutSeconds=0)


def test_revert_a_health_check_timeout_above_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    _unchecked(monkeypatch)
    assert _failing("health check as the contract", "staging", lbHealthCheckTimeoutSeconds=3)
