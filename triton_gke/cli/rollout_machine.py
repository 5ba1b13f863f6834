"""The rollout's state machine: which step comes next, and what a step's outcome makes of the rollout. Pure: no
Pulumi, no clock, no network; cli/rollout.py runs the steps and stores the state after each (rollout_store.py).

A rollout changes some regionOverrides keys (settings/region_overrides.py) of every region, one wave of regions at
a time. The first wave is the canary, one region:

    drain  -> its backends' capacityScalerPercent down to the plan's canary share (the balancer sends the rest of
              its traffic to the other regions: https://cloud.google.com/load-balancing/docs/backend-service,
              "capacity scaler"), its pins unchanged
    change -> the new pins, still weighted down
    gate   -> the region's SLO over N windows
    ramp   -> capacity back to what it was
then each further wave: change -> gate. A gate's breach, a failed `up` or an operator's abort reverts the regions of
the wave in flight to their last good pins (the canary stays weighted down until its old pins are back: `revert`,
then `ramp`) and stops. Regions of earlier waves keep the change: their gates passed.

Pulumi has no rollback command; its documented answer is another `up` with the previous config (pulumi/pulumi#96,
pulumi/docs#16036; /work/shared/reference/operations-2026-12.md): `revert` is exactly that, per region.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from triton_gke.settings.region_overrides import SCALER

# The regionOverrides key the drain writes: settings/region_overrides.py's name, the one home.
SCALER_KEY = SCALER
FULL_CAPACITY = 100

# Steps, in the order a wave takes them; `revert` and the two ends only after a breach, failure or abort.
DRAIN, CHANGE, GATE, RAMP, REVERT, DONE, STOPPED = "drain", "change", "gate", "ramp", "revert", "done", "stopped"
STEPS = (DRAIN, CHANGE, GATE, RAMP, REVERT, DONE, STOPPED)
# Why a rollout stopped: all waves passed, a gate breached, an `up` failed, an operator aborted.
PASSED, BREACH, FAILED, ABORTED = "passed", "breach", "failed", "aborted"

Pins = Mapping[str, Any]  # one region's regionOverrides entry: key -> value (absent: the stack-wide setting)


class RolloutError(ValueError):
    """A plan or stored state the machine cannot run: one line naming what is wrong."""


@dataclass(frozen=True)
class RolloutPlan:
    change: Mapping[str, Any]  # regionOverrides keys -> the value every region takes
    waves: tuple[tuple[str, ...], ...]  # the canary's wave (one region) first
    canary_percent: int = 10  # capacityScalerPercent of the canary while it changes and is gated

    def __post_init__(self) -> None:
        problem = plan_problem(self)
        if problem:
            raise RolloutError(problem)

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(r for wave in self.waves for r in wave)


def plan_problem(plan: RolloutPlan) -> str:
    if not plan.change:
        return "the change is empty: name at least one regionOverrides key to change"
    if SCALER_KEY in plan.change:
        return f"{SCALER_KEY} is the rollout's own drain knob, not a change it rolls out"
    if not plan.waves or any(not wave for wave in plan.waves):
        return "every wave needs at least one region"
    if len(plan.waves[0]) != 1:
        return f"the first wave is the canary: one region, not {len(plan.waves[0])}"
    regions = plan.regions
    if len(set(regions)) != len(regions):
        return "a region is in more than one wave"
    if not 1 <= plan.canary_percent < FULL_CAPACITY:
        # 0 would drain it: its gate would read no request of its own; 100 would not weigh it down.
        return f"canary percent {plan.canary_percent}: expected 1 to 99"
    return ""


@dataclass(frozen=True)
class GateFigures:
    """One region's gate: each window's p95 (ms) and error ratio, and the thresholds they were judged by."""

    region: str
    p95_ms: tuple[float | None, ...]  # None: no request in that window
    error_ratio: tuple[float | None, ...]
    latency_ms: float
    max_error_ratio: float
    passed: bool

    def line(self) -> str:
        def shown(values: Sequence[float | None], digits: int) -> str:
            return ", ".join("no requests" if v is None else f"{v:.{digits}f}" for v in values)

        verdict = "passed" if self.passed else "BREACH"
        return (
            f"{self.region}: {verdict}: p95 ms [{shown(self.p95_ms, 1)}] (SLO {self.latency_ms:g}), "
            f"error ratio [{shown(self.error_ratio, 4)}] (max {self.max_error_ratio:g}) over "
            f"{len(self.p95_ms)} window(s)"
        )


@dataclass(frozen=True)
class RolloutState:
    plan: RolloutPlan
    last_good: Mapping[str, Pins]  # region -> its pins before the rollout reached it
    current: Mapping[str, Pins]  # region -> the pins the stack config holds now
    wave: int = 0
    step: str = DRAIN
    outcome: str = ""  # set once the rollout stops (DONE or STOPPED)
    gates: tuple[GateFigures, ...] = ()
    abort_requested: bool = False
    # One line per step taken, for the report and for another operator who resumes.
    log: tuple[str, ...] = field(default_factory=tuple)

    @property
    def finished(self) -> bool:
        return self.step in (DONE, STOPPED)

    @property
    def wave_regions(self) -> tuple[str, ...]:
        return self.plan.waves[self.wave] if self.wave < len(self.plan.waves) else ()

    @property
    def is_canary_wave(self) -> bool:
        return self.wave == 0


@dataclass(frozen=True)
class Apply:
    """Set these regions' pins (one `up`); the preview may change nothing outside `regions`, and the backend services
    only when `scaler` (the step moves a capacity scaler)."""

    step: str
    pins: Mapping[str, Pins]  # every region's pins after the step: the whole regionOverrides value
    regions: tuple[str, ...]
    scaler: bool


@dataclass(frozen=True)
class Gate:
    step: str
    regions: tuple[str, ...]


def start(plan: RolloutPlan, pins: Mapping[str, Pins]) -> RolloutState:
    """A new rollout from the stack's current regionOverrides (`pins`; a region without an entry has none)."""
    unknown = sorted(set(pins) - set(plan.regions))
    if unknown:
        raise RolloutError(f"regionOverrides names {unknown[0]!r}, which no wave of the rollout names")
    current = {r: dict(pins.get(r, {})) for r in plan.regions}
    return RolloutState(plan=plan, last_good=current, current=current)


def _with(pins: Pins, **values: Any) -> dict[str, Any]:
    """pins with these keys set (None: removed, so the stack-wide setting applies again)."""
    merged = {**pins, **values}
    return {k: v for k, v in merged.items() if v is not None}


def next_action(state: RolloutState) -> Apply | Gate | None:
    """What to do next; None once the rollout stopped or is done."""
    if state.finished:
        return None
    regions = state.wave_regions
    step = state.step
    if step == GATE:
        return Gate(GATE, regions)
    current = dict(state.current)
    if step == DRAIN:
        current[regions[0]] = _with(current[regions[0]], **{SCALER_KEY: state.plan.canary_percent})
    elif step == CHANGE:
        for region in regions:
            current[region] = _with(current[region], **state.plan.change)
    elif step == RAMP:
        current[regions[0]] = _with(current[regions[0]], **{SCALER_KEY: state.last_good[regions[0]].get(SCALER_KEY)})
    elif step == REVERT:
        for region in regions:
            # The old pins, but the canary stays weighted down until they are back (ramp comes next).
            kept = current if state.is_canary_wave else state.last_good
            scaler = kept[region].get(SCALER_KEY)
            current[region] = _with(state.last_good[region], **{SCALER_KEY: scaler})
    return Apply(step, current, regions, scaler=step in (DRAIN, RAMP) or (step == REVERT and state.is_canary_wave))


def _logged(state: RolloutState, line: str, **changes: Any) -> RolloutState:
    return dataclasses.replace(state, log=(*state.log, line), **changes)


def applied(state: RolloutState, action: Apply) -> RolloutState:
    """The `up` of `action` succeeded: its pins are the stack's now."""
    _expect(state, action.step)
    done = _logged(state, f"{action.step} {', '.join(action.regions)}: applied", current=action.pins)
    if action.step == DRAIN:
        return dataclasses.replace(done, step=CHANGE)
    if action.step == CHANGE:
        return dataclasses.replace(done, step=GATE)
    if action.step == REVERT:
        if state.is_canary_wave and done.current[state.wave_regions[0]].get(SCALER_KEY) != state.last_good[
            state.wave_regions[0]
        ].get(SCALER_KEY):
            return dataclasses.replace(done, step=RAMP)
        return dataclasses.replace(done, step=STOPPED)
    # RAMP: after a passed canary gate the rollout goes on; after a revert it stops.
    if state.outcome:
        return dataclasses.replace(done, step=STOPPED)
    return _next_wave(done)


def failed(state: RolloutState, step: str, reason: str) -> RolloutState:
    """A preview refused the step or its `up` failed: revert the wave in flight (when anything of it changed), stop."""
    _expect(state, step)
    logged = _logged(state, f"{step} {', '.join(state.wave_regions)}: failed: {reason}", outcome=FAILED)
    return _revert_or_stop(logged)


def gated(state: RolloutState, figures: Sequence[GateFigures]) -> RolloutState:
    """The wave's gates were read: on to the next step, or revert on a breach."""
    _expect(state, GATE)
    if sorted(f.region for f in figures) != sorted(state.wave_regions):
        raise RolloutError(f"gate figures for {[f.region for f in figures]}, the wave is {list(state.wave_regions)}")
    lines = tuple(f.line() for f in figures)
    done = dataclasses.replace(state, gates=(*state.gates, *figures), log=(*state.log, *lines))
    if not all(f.passed for f in figures):
        return _revert_or_stop(dataclasses.replace(done, outcome=BREACH))
    if state.is_canary_wave:
        return dataclasses.replace(done, step=RAMP)
    return _next_wave(done)


def abort(state: RolloutState) -> RolloutState:
    """An operator stops the rollout: the wave in flight goes back to its last good pins, then it stops."""
    if state.finished:
        return state
    logged = _logged(state, f"abort requested at {state.step} of wave {state.wave + 1}", abort_requested=True)
    return _revert_or_stop(dataclasses.replace(logged, outcome=ABORTED))


def _revert_or_stop(state: RolloutState) -> RolloutState:
    """REVERT where a wave region's pins changed; RAMP where only the canary's scaler moved (a revert would be an `up`
    that changes nothing); else STOPPED."""

    def pins(region: str, of: Mapping[str, Pins]) -> dict[str, Any]:
        return {k: v for k, v in of[region].items() if k != SCALER_KEY}

    regions = state.wave_regions
    if any(pins(r, state.current) != pins(r, state.last_good) for r in regions):
        return dataclasses.replace(state, step=REVERT)
    if any(state.current[r] != state.last_good[r] for r in regions):
        return dataclasses.replace(state, step=RAMP)
    return dataclasses.replace(state, step=STOPPED)


def _next_wave(state: RolloutState) -> RolloutState:
    wave = state.wave + 1
    if wave >= len(state.plan.waves):
        return dataclasses.replace(state, wave=wave, step=DONE, outcome=PASSED)
    return dataclasses.replace(state, wave=wave, step=CHANGE)


def _expect(state: RolloutState, step: str) -> None:
    if state.step != step:
        raise RolloutError(f"the rollout is at step {state.step!r}, not {step!r} (another operator moved it?)")


# The stored form (rollout_store.py keeps it in the stack): JSON, read back into the same state.
def to_json(state: RolloutState) -> str:
    return json.dumps(dataclasses.asdict(state), sort_keys=True, separators=(",", ":"))


def from_json(text: str) -> RolloutState:
    try:
        data = json.loads(text)
        stored = data["plan"]
        plan = RolloutPlan(
            change=stored["change"],
            waves=tuple(tuple(w) for w in stored["waves"]),
            canary_percent=stored["canary_percent"],
        )
        return RolloutState(
            plan=plan,
            # In the plan's region order (the JSON's keys are sorted): the regionOverrides items keep their order.
            last_good={r: data["last_good"][r] for r in plan.regions},
            current={r: data["current"][r] for r in plan.regions},
            wave=data["wave"],
            step=_known_step(data["step"]),
            outcome=data["outcome"],
            gates=tuple(
                GateFigures(**{**g, "p95_ms": tuple(g["p95_ms"]), "error_ratio": tuple(g["error_ratio"])})
                for g in data["gates"]
            ),
            abort_requested=data["abort_requested"],
            log=tuple(data["log"]),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise RolloutError(f"the stored rollout state is unreadable ({type(err).__name__}: {err})") from None


def _known_step(step: Any) -> str:
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}")
    return str(step)
