"""The rollout's state machine (triton_gke/cli/rollout_machine.py), offline: waves, gates, rollback, interruption and
resume, abort, over generated plans and outcomes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.cli.rollout_machine import (
    ABORTED,
    BREACH,
    CHANGE,
    DRAIN,
    FAILED,
    GATE,
    PASSED,
    RAMP,
    REVERT,
    SCALER_KEY,
    Apply,
    Gate,
    GateFigures,
    RolloutError,
    RolloutPlan,
    RolloutState,
    abort,
    applied,
    failed,
    from_json,
    gated,
    next_action,
    start,
    to_json,
)

REGIONS = ("us-central1", "europe-west4", "asia-east1", "us-east4", "europe-west1")


@st.composite
def plans(draw: st.DrawFn) -> RolloutPlan:
    regions = draw(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=5, unique=True))
    rest = regions[1:]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(rest) - 1)), max_size=3))) if len(rest) > 1 else []
    bounds = [0, *cuts, len(rest)]
    waves = [(regions[0],)] + [tuple(rest[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if rest[a:b]]
    change = draw(
        st.dictionaries(
            st.sampled_from(("tritonImageTag", "autoscaleQueueTimeMs")),
            st.one_of(st.sampled_from(("25.01-py3", "25.02-py3")), st.integers(1, 500)),
            min_size=1,
        )
    )
    return RolloutPlan(change=change, waves=tuple(waves), canary_percent=draw(st.integers(1, 99)))


def start_pins(draw: st.DrawFn, plan: RolloutPlan) -> dict[str, dict[str, Any]]:
    pins: dict[str, dict[str, Any]] = {}
    for region in plan.regions:
        entry = draw(st.dictionaries(st.just("tritonImageTag"), st.just("24.12-py3"), max_size=1))
        if draw(st.booleans()):
            entry[SCALER_KEY] = draw(st.integers(0, 100))
        if entry:
            pins[region] = entry
    return pins


def figures(region: str, passed: bool) -> GateFigures:
    return GateFigures(region, (80.0, 90.0), (0.0, 0.001), 100, 0.01, passed)


@dataclasses.dataclass
class Script:
    """What the world answers: a gate verdict per region, ups that fail, an abort after some step, interruptions."""

    gate: dict[str, bool]
    failing_ups: set[int]
    abort_after: int | None
    interrupt_at: set[int]


def drive(state: RolloutState, script: Script) -> tuple[RolloutState, list[Apply | Gate]]:
    """Run the machine to its end as cli/rollout.py does, storing (to_json) and resuming (from_json) where told."""
    actions: list[Apply | Gate] = []
    for count in range(200):
        if script.abort_after is not None and count == script.abort_after:
            state = abort(state)
        if count in script.interrupt_at:  # another operator resumes from the stored state
            state = from_json(to_json(state))
        action = next_action(state)
        if action is None:
            return state, actions
        actions.append(action)
        if isinstance(action, Gate):
            state = gated(state, [figures(r, script.gate[r]) for r in action.regions])
        elif count in script.failing_ups:
            state = failed(state, action.step, "up failed")
        else:
            state = applied(state, action)
    raise AssertionError("the rollout did not end within 200 steps")


@st.composite
def runs(draw: st.DrawFn) -> tuple[RolloutState, Script]:
    plan = draw(plans())
    state = start(plan, start_pins(draw, plan))
    script = Script(
        gate={r: draw(st.booleans()) for r in plan.regions},
        failing_ups=draw(st.sets(st.integers(0, 20), max_size=2)),
        abort_after=draw(st.one_of(st.none(), st.integers(0, 20))),
        interrupt_at=draw(st.sets(st.integers(0, 20), max_size=5)),
    )
    return state, script


@given(runs())
def test_a_rollout_ends_with_passed_regions_changed_and_every_other_region_as_it_was(run: Any) -> None:
    state, script = run
    end, _ = drive(state, script)
    plan = state.plan
    assert end.finished and end.outcome in (PASSED, BREACH, FAILED, ABORTED)
    passed_waves = plan.waves[: end.wave] if end.outcome != PASSED else plan.waves
    changed = {r for wave in passed_waves for r in wave}
    for region in plan.regions:
        before = state.last_good[region]
        if region in changed:
            assert end.current[region] == {**before, **plan.change}, region
        else:
            assert end.current[region] == before, region  # never reached, or reverted with its scaler
    if end.outcome == PASSED:
        assert {g.region for g in end.gates if g.passed} == set(plan.regions)


@given(runs())
def test_each_step_changes_only_the_regions_of_its_wave_and_the_canary_is_weighted_down_first(run: Any) -> None:
    state, script = run
    _, actions = drive(state, script)
    current = dict(state.current)
    canary = state.plan.waves[0][0]
    seen: list[str] = []
    for action in actions:
        if isinstance(action, Apply):
            moved = {r for r in current if current[r] != action.pins[r]}
            assert moved <= set(action.regions), (action.step, moved)
            scaler_moved = any(current[r].get(SCALER_KEY) != action.pins[r].get(SCALER_KEY) for r in current)
            assert not scaler_moved or action.scaler
            current = dict(action.pins)
        seen.append(action.step)
        if action.step == CHANGE and canary in action.regions:
            assert action.pins[canary][SCALER_KEY] == state.plan.canary_percent
    if CHANGE in seen:
        assert seen[0] == DRAIN  # the canary is weighted down before anything changes


@given(runs(), st.integers(0, 30))
def test_an_interrupted_up_is_rerun_from_the_stored_state_to_the_same_end(run: Any, cut: int) -> None:
    """The process dies after an `up` but before the state was stored: the stored state asks for the same step
    again, with the same pins (an `up` of the same config changes nothing the second time), and the rollout ends as
    it would have."""
    state, script = run
    end, actions = drive(state, script)
    replay = state
    for count, action in enumerate(actions):
        # Replaying the same answers reaches the same state.
        if script.abort_after is not None and count == script.abort_after:
            replay = abort(replay)
        assert next_action(replay) == action
        if count == cut:
            assert next_action(from_json(to_json(replay))) == action
        if isinstance(action, Gate):
            replay = gated(replay, [figures(r, script.gate[r]) for r in action.regions])
        elif count in script.failing_ups:
            replay = failed(replay, action.step, "up failed")
        else:
            replay = applied(replay, action)
    if script.abort_after is not None and script.abort_after == len(actions):
        replay = abort(replay)
    assert replay.current == end.current and replay.outcome == end.outcome


def three_regions() -> RolloutState:
    plan = RolloutPlan(change={"tritonImageTag": "25.02-py3"}, waves=(("a1",), ("b1", "c1")), canary_percent=10)
    return start(plan, {"b1": {"tritonImageTag": "25.01-py3"}})


def test_a_canary_breach_reverts_it_weighted_down_then_ramps_and_stops_with_the_figures() -> None:
    state = three_regions()
    steps = []
    while (action := next_action(state)) is not None:
        steps.append(action.step)
        state = (
            gated(state, [figures(r, False) for r in action.regions])
            if isinstance(action, Gate)
            else applied(state, action)
        )
        if action.step == REVERT:
            assert isinstance(action, Apply) and action.pins["a1"] == {SCALER_KEY: 10}
    assert steps == [DRAIN, CHANGE, GATE, REVERT, RAMP]
    assert state.outcome == BREACH and state.current == state.last_good
    assert any("a1: BREACH: p95 ms [80.0, 90.0] (SLO 100)" in line for line in state.log)


def test_all_gates_passing_changes_every_region() -> None:
    state = three_regions()
    steps = []
    while (action := next_action(state)) is not None:
        steps.append(action.step)
        state = (
            gated(state, [figures(r, True) for r in action.regions])
            if isinstance(action, Gate)
            else applied(state, action)
        )
    assert steps == [DRAIN, CHANGE, GATE, RAMP, CHANGE, GATE]
    assert state.outcome == PASSED
    assert all(pins == {"tritonImageTag": "25.02-py3"} for pins in state.current.values())


def test_abort_before_anything_changed_stops_without_an_up() -> None:
    state = abort(three_regions())
    assert next_action(state) is None and state.outcome == ABORTED


def test_a_step_reported_by_a_stale_operator_is_refused() -> None:
    state = three_regions()
    drain = next_action(state)
    assert isinstance(drain, Apply)
    moved = applied(state, drain)
    with pytest.raises(RolloutError, match="at step 'change', not 'drain'"):
        applied(moved, drain)


@pytest.mark.parametrize(
    ("change", "waves", "percent", "problem"),
    [
        ({}, (("a",),), 10, "the change is empty"),
        ({SCALER_KEY: 0}, (("a",),), 10, "drain knob"),
        ({"tritonImageTag": "x"}, (("a", "b"),), 10, "the canary: one region"),
        ({"tritonImageTag": "x"}, (("a",), ("a",)), 10, "more than one wave"),
        ({"tritonImageTag": "x"}, (("a",),), 0, "expected 1 to 99"),
        ({"tritonImageTag": "x"}, (("a",),), 100, "expected 1 to 99"),
    ],
)
def test_a_plan_the_machine_cannot_run_is_refused_in_one_line(
    change: dict[str, Any], waves: tuple[tuple[str, ...], ...], percent: int, problem: str
) -> None:
    with pytest.raises(RolloutError, match=problem):
        RolloutPlan(change=change, waves=waves, canary_percent=percent)


def test_a_damaged_stored_state_is_one_line() -> None:
    with pytest.raises(RolloutError, match="unreadable"):
        from_json('{"plan": {}}')
