"""settings.lifecycle: one contract for how a Triton pod leaves the load balancer (issue 23, item 1).

Coherent values pass; each kind of incoherence is refused in one line naming the stack key, before any resource is
declared (the settings layer runs before the program). The rules and their sources are in settings/lifecycle.py.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, stack_settings
from triton_gke.settings import ConfigError, load_stack_settings
from triton_gke.settings.lifecycle import (
    DEFAULTS,
    NEG_UNREADY_TIMEOUT_S,
    SPOT_NOTICE_S,
    STACK_KEYS,
    LifecycleSettings,
    disruption_problem,
    lifecycle_problem,
    longest_request_s,
)
from triton_gke.settings.schema import config_schema

MARGIN = DEFAULTS.shutdown_margin_s


@st.composite
def coherent(draw: st.DrawFn) -> tuple[LifecycleSettings, int]:
    """(values, sloLatencyMs) that satisfy every rule; on Spot all of it within the 15 s a pod gets."""
    spot = draw(st.booleans())
    # Above sloQueueTimeMs (50 in every stack): the SLO knobs must nest (settings/capacity.py).
    slo_ms = draw(st.integers(51, 1000 if spot else 60_000))
    longest = longest_request_s(slo_ms)
    budget = SPOT_NOTICE_S - MARGIN - longest if spot else 1600  # what preStop may take
    interval = draw(st.integers(1, min(budget - 1, 100)))  # at least 1 s left for lbProgrammingSeconds
    unhealthy = draw(st.integers(1, min((budget - 1) // interval, 10)))
    programming = draw(st.integers(1, min(budget - unhealthy * interval, 300)))
    removal = unhealthy * interval + programming
    pre_stop = draw(st.integers(removal, min(budget, removal + 300)))
    exit_timeout = draw(st.integers(longest, SPOT_NOTICE_S - MARGIN - pre_stop if spot else longest + 300))
    shutdown = pre_stop + exit_timeout + MARGIN
    grace = draw(st.integers(shutdown, SPOT_NOTICE_S if spot else shutdown + 300))
    values = LifecycleSettings(
        pre_stop_s=pre_stop,
        exit_timeout_s=exit_timeout,
        termination_grace_s=grace,
        drain_timeout_s=draw(st.integers(exit_timeout, 3600)),
        health_check_interval_s=interval,
        health_check_timeout_s=draw(st.integers(1, interval)),
        healthy_threshold=draw(st.integers(1, min(10, NEG_UNREADY_TIMEOUT_S // interval))),
        unhealthy_threshold=unhealthy,
        lb_programming_s=programming,
        pdb_max_unavailable=draw(st.integers(1, 1000)),
        spot=spot,
    )
    return values, slo_ms


def _stack_overrides(values: LifecycleSettings) -> dict[str, int]:
    return {key: getattr(values, name) for name, key in STACK_KEYS.items()}


def _refusal(stack: str, slo_ms: int, values: LifecycleSettings) -> str:
    config = stack_settings(stack, sloLatencyMs=slo_ms, **_stack_overrides(values))
    with pytest.raises(ConfigError) as refused:
        load_stack_settings(config, stack=stack)
    return str(refused.value)


@settings(max_examples=300, deadline=None)
@given(coherent())
def test_coherent_values_pass(case: tuple[LifecycleSettings, int]) -> None:
    values, slo_ms = case
    assert lifecycle_problem(values, slo_ms) is None


@settings(max_examples=25, deadline=None)
@given(coherent())
def test_coherent_values_reach_the_stack_settings_as_set(case: tuple[LifecycleSettings, int]) -> None:
    """Through the stack keys, on a Spot stack (dev) or a standard one (prod), the values arrive unchanged."""
    values, slo_ms = case
    stack = "dev" if values.spot else "prod"
    values = dataclasses.replace(values, pdb_max_unavailable=1)  # both keep a region's pods to 1 or 2: at most 1
    config = stack_settings(stack, sloLatencyMs=slo_ms, **_stack_overrides(values))
    assert load_stack_settings(config, stack=stack).lifecycle == values


# Each kind of incoherence: how to break coherent values, and the key the one-line refusal must name.
def _pre_stop_short(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, pre_stop_s=data.draw(st.integers(0, v.endpoint_removal_s - 1)))


def _exit_short(v: LifecycleSettings, data: st.DataObject, longest: int) -> LifecycleSettings:
    return dataclasses.replace(v, exit_timeout_s=data.draw(st.integers(0, longest - 1)))


def _grace_short(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, termination_grace_s=data.draw(st.integers(0, v.shutdown_s - 1)))


def _grace_past_spot_notice(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    grace = data.draw(st.integers(max(SPOT_NOTICE_S + 1, v.shutdown_s), 3600))
    return dataclasses.replace(v, spot=True, termination_grace_s=grace)


def _drain_short(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, drain_timeout_s=data.draw(st.integers(0, v.exit_timeout_s - 1)))


def _timeout_past_interval(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, health_check_timeout_s=data.draw(st.integers(v.health_check_interval_s + 1, 300)))


def _threshold_out_of_range(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, healthy_threshold=data.draw(st.integers(11, 10**6)))


def _no_disruption_allowed(v: LifecycleSettings, data: st.DataObject) -> LifecycleSettings:
    return dataclasses.replace(v, pdb_max_unavailable=0)


INCOHERENT = {
    "preStop shorter than the endpoint's removal": (_pre_stop_short, "tritonPreStopSeconds"),
    "grace shorter than preStop + exit timeout + margin": (_grace_short, "tritonTerminationGraceSeconds"),
    "grace longer than the Spot notice": (_grace_past_spot_notice, "tritonTerminationGraceSeconds"),
    "draining shorter than the exit timeout": (_drain_short, "lbDrainingTimeoutSeconds"),
    "health-check timeout past its interval": (_timeout_past_interval, "lbHealthCheckTimeoutSeconds"),
    "threshold out of range": (_threshold_out_of_range, "lbHealthyThreshold"),
    "a budget that allows no disruption": (_no_disruption_allowed, "tritonMaxUnavailable"),
}


@pytest.mark.parametrize("kind", list(INCOHERENT))
@settings(max_examples=60, deadline=None)
@given(case=coherent(), data=st.data())
def test_each_incoherence_is_refused_naming_its_key(
    kind: str, case: tuple[LifecycleSettings, int], data: st.DataObject
) -> None:
    values, slo_ms = case
    breaks, key = INCOHERENT[kind]
    broken = breaks(values, data)
    problem = lifecycle_problem(broken, slo_ms)
    assert problem is not None and problem[0] == key, (kind, broken, problem)
    assert "\n" not in problem[1]


@settings(max_examples=60, deadline=None)
@given(case=coherent(), data=st.data())
def test_an_exit_timeout_shorter_than_the_slo_allows_is_refused(
    case: tuple[LifecycleSettings, int], data: st.DataObject
) -> None:
    """Raising sloLatencyMs past the exit timeout: requests in flight at SIGTERM could outlive it."""
    values, _ = case
    slo_ms = data.draw(st.integers(values.exit_timeout_s * 1000 + 1, values.exit_timeout_s * 1000 + 100_000))
    problem = lifecycle_problem(values, slo_ms)
    assert problem is not None and problem[0] == "tritonExitTimeoutSeconds", (values, slo_ms, problem)


@pytest.mark.parametrize("kind", list(INCOHERENT))
@settings(max_examples=5, deadline=None)
@given(case=coherent(), data=st.data())
def test_the_stack_refuses_it_in_one_line_before_any_resource(
    kind: str, case: tuple[LifecycleSettings, int], data: st.DataObject
) -> None:
    """The same values as stack keys: ConfigError (the plan and `pulumi up` stop there, nothing declared), one line
    starting with the full key. The Spot rule needs a Spot stack: dev has gpuSpot true, prod false."""
    values, slo_ms = case
    breaks, key = INCOHERENT[kind]
    broken = breaks(values, data)
    message = _refusal("dev" if broken.spot else "prod", slo_ms, broken)
    assert message.startswith(f"{PROJECT}:{key}: ") and "\n" not in message, message


def test_a_spot_pool_refuses_a_grace_period_a_standard_pool_takes() -> None:
    """GKE gives a preempted Spot node's pods 15 s: 16 s is refused on dev (gpuSpot true), taken on prod."""
    message = _refusal("dev", 100, dataclasses.replace(DEFAULTS, termination_grace_s=16))
    assert message == (
        f"{PROJECT}:tritonTerminationGraceSeconds: 16 is not valid; longer than the 15 s a Spot preemption gives "
        "pods (gpuSpot: true); GKE ignores the rest (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms)"
    )
    taken = load_stack_settings(stack_settings("prod", tritonTerminationGraceSeconds=16), stack="prod")
    assert taken.lifecycle.termination_grace_s == 16


def test_the_schema_defaults_are_the_contract_defaults() -> None:
    """Pulumi.yaml declares each key's default; the dataclass' defaults must be the same values."""
    _, keys = config_schema()
    assert {key: keys[key].default for key in STACK_KEYS.values()} == _stack_overrides(DEFAULTS)
    assert lifecycle_problem(DEFAULTS, 100) is None
    assert lifecycle_problem(dataclasses.replace(DEFAULTS, spot=True), 100) is None


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_shipped_stack_reads_a_coherent_contract(stack: str) -> None:
    settings_ = load_stack_settings(stack_settings(stack), stack=stack)
    assert settings_.lifecycle.spot == settings_.gpu_pool.spot
    assert lifecycle_problem(settings_.lifecycle, settings_.monitoring.slo.latency_ms) is None


@settings(max_examples=60, deadline=None)
@given(interval=st.integers(61, 300), data=st.data())
def test_a_health_check_slower_than_the_readiness_gates_timeout_is_refused(interval: int, data: st.DataObject) -> None:
    """ingress-gce opens the NEG readiness gate 10 minutes after a pod's creation whatever its health (reflector.go
    unreadyTimeout): healthy threshold x interval past that, and the rollout no longer waits for the load balancer."""
    healthy = data.draw(st.integers(NEG_UNREADY_TIMEOUT_S // interval + 1, 10))
    pre_stop = interval + DEFAULTS.lb_programming_s  # one failed check + programming: the endpoint's removal
    values = dataclasses.replace(
        DEFAULTS,
        spot=False,
        health_check_interval_s=interval,
        health_check_timeout_s=interval,
        healthy_threshold=healthy,
        unhealthy_threshold=1,
        pre_stop_s=pre_stop,
        termination_grace_s=pre_stop + DEFAULTS.exit_timeout_s + MARGIN,
    )
    assert (
        lifecycle_problem(dataclasses.replace(values, healthy_threshold=NEG_UNREADY_TIMEOUT_S // interval), 100) is None
    )
    problem = lifecycle_problem(values, 100)
    assert problem is not None and problem[0] == "lbHealthyThreshold" and "unreadyTimeout" in problem[1], problem


@given(min_pods=st.integers(1, 50), budget=st.integers(1, 100))
def test_a_budget_that_could_evict_every_pod_of_a_regions_minimum_is_refused(min_pods: int, budget: int) -> None:
    """maxUnavailable counts the pods evictions may take down at once: it must leave one of the region's minimum
    serving (one pod: the budget 1 lets a drain proceed at all)."""
    problem = disruption_problem(dataclasses.replace(DEFAULTS, pdb_max_unavailable=budget), min_pods)
    assert (problem is None) == (budget <= max(1, min_pods - 1))
    if problem:
        assert problem[0] == "tritonMaxUnavailable" and f"all {min_pods} Triton pod(s)" in problem[1]


def test_the_stack_checks_the_budget_against_the_sized_minimum() -> None:
    """prod keeps 2 GPU nodes a region (2 Triton pods): 2 is refused; with gpuMinNodes 3 it is taken."""
    message = _refusal("prod", 100, dataclasses.replace(DEFAULTS, pdb_max_unavailable=2))
    assert message == (
        f"{PROJECT}:tritonMaxUnavailable: 2 is not valid; more than 1: a node drain or upgrade could evict all 2 "
        "Triton pod(s) a region keeps at its minimum (gpuMinNodes, or what targetRps sizes) at once"
    )
    three = stack_settings("prod", tritonMaxUnavailable=2, gpuMinNodes=3, gpuMaxNodes=4)
    assert load_stack_settings(three, stack="prod").lifecycle.pdb_max_unavailable == 2
