"""Roll a change out region by region: the canary first, weighted down, then the other regions in waves; each step
previewed, applied and gated on the region's own SLO; a breach puts the region back on its last good pins and stops.

    triton-gke rollout --stack prod --change tritonImageTag=25.05-py3
    triton-gke rollout --stack prod --change autoscaleQueueTimeMs=40 --canary asia-east1 --wave us-central1,europe-west4
    triton-gke rollout --stack prod --resume     # after an interruption, by any operator of the stack
    triton-gke rollout --stack prod --abort      # the wave in flight back to its last good pins, then stop
    triton-gke rollout --stack prod --status     # the stored state, changing nothing

What changes: regionOverrides (settings/region_overrides.py), one region's item at a time, written with the Automation
API (pulumi.automation LocalWorkspace and Stack.select: `pulumi config set`, then `pulumi preview` and `pulumi up` on
the stack; https://www.pulumi.com/docs/iac/automation-api/). It runs the `pulumi` executable: from PATH, or
DIR/bin/pulumi with --pulumi-root DIR (PulumiCommand(root=DIR), pulumi/automation/_cmd.py). No Pulumi CLI: refused in
one line.

Before each `up` its preview must change nothing outside the step's regions and replace nothing that takes a region
down (cli/rollout_guard.py, the replacement rule of `triton-gke plan --against`). After each change the region's SLO
is read from its own Prometheus over N windows (cli/rollout_gate.py): through `kubectl port-forward svc/prometheus`
with the region's kubeconfig (the stack output `kubeconfigs`), or at --prometheus REGION=URL.

The state lives in the stack's config, key triton-gke-rollout:state, written after every step (`pulumi config set`):
Pulumi keeps a stack's config in Pulumi.<stack>.yaml beside the project, on every backend, so it travels with the
regionOverrides it describes. Stack tags were not used: only the Pulumi Cloud backend persists them (pulumi/docs#890,
#900; the DIY backend's support is an open PR, pulumi/pulumi#19882).

Exit status: 0 every region changed and passed its gate (or --status); 1 stopped: a breach, a refused preview, a
failed `up`, an abort (the report says which, with the gates' figures); 2 bad input, nothing changed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from triton_gke.cli.rollout_gate import PrometheusReader, WindowReader, run_gate
from triton_gke.cli.rollout_guard import problems, steps_of
from triton_gke.cli.rollout_machine import (
    PASSED,
    RAMP,
    REVERT,
    Apply,
    Gate,
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
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import project_dir
from triton_gke.contracts.workloads import MONITORING_NAMESPACE, PROMETHEUS_PORT, PROMETHEUS_SERVICE
from triton_gke.one_line import OneLineParser, invoked_as
from triton_gke.settings import ConfigError, StackSettings, load_stack_settings, stack_config
from triton_gke.settings.region_overrides import FIELDS, KEY, SCALER, as_items, as_pins
from triton_gke.settings.schema import config_schema

STATE_KEY = "triton-gke-rollout:state"  # another namespace: the settings layer leaves it alone (settings/keys.py)
EXIT_STOPPED = 1


class Refusal(Exception):
    """Bad input: one line, exit 2, nothing changed."""


class StackOps(Protocol):
    """What the rollout asks of the stack (AutomationStack; the tests' fake pulumi answers the same calls)."""

    def config(self) -> dict[str, str]: ...
    def set_config(self, key: str, value: str) -> None: ...
    def preview(self) -> list[Any]: ...
    def up(self) -> None: ...
    def outputs(self) -> dict[str, Any]: ...


class AutomationStack:
    """The stack through Pulumi's Automation API."""

    def __init__(self, stack: str, root: Path | None, work_dir: Path) -> None:
        from pulumi import automation as auto  # noqa: PLC0415 (only a rollout that runs needs the SDK)

        self._auto = auto
        # PulumiCommand runs `pulumi version` once and checks it against the SDK's minimum (_cmd.py).
        command = auto.PulumiCommand(root=str(root) if root else None)
        workspace = auto.LocalWorkspace(work_dir=str(work_dir), pulumi_command=command)
        self._stack = auto.Stack.select(stack, workspace)

    def config(self) -> dict[str, str]:
        return {key: value.value for key, value in self._stack.get_all_config().items()}

    def set_config(self, key: str, value: str) -> None:
        self._stack.set_config(key, self._auto.ConfigValue(value=value))

    def preview(self) -> list[Any]:
        events: list[Any] = []
        self._stack.preview(on_event=events.append)  # the engine's steps, as events (rollout_guard.steps_of)
        return events

    def up(self) -> None:
        self._stack.up(on_output=lambda line: print(line, file=sys.stderr, flush=True))

    def outputs(self) -> dict[str, Any]:
        return {key: value.value for key, value in self._stack.outputs().items()}

    @property
    def command_error(self) -> type[Exception]:
        return self._auto.errors.CommandError


@dataclass(frozen=True)
class Run:
    """What a rollout needs besides its state: the stack, its settings and how to read a gate."""

    ops: StackOps
    settings: StackSettings
    project: str
    gate_reader: Callable[[str], Any]  # region -> a context manager yielding a WindowReader
    windows: int
    window_s: float
    command_error: type[Exception] = Exception


def drive(run: Run, state: RolloutState) -> RolloutState:
    """Take steps until the rollout ends, or until its way back (a revert, the ramp after one) fails: then the state
    stays at that step for --resume. The state is stored after each step."""
    while (action := next_action(state)) is not None:
        way_back = action.step == REVERT or (action.step == RAMP and bool(state.outcome))
        if isinstance(action, Gate):
            state, ok = _gate(run, state, action), True
        else:
            state, ok = _apply(run, state, action)
        _save(run, state)
        if way_back and not ok:
            print(f"rollout: {action.step} failed; fix the cause, then --resume", file=sys.stderr)
            break
    return state


def _apply(run: Run, state: RolloutState, action: Apply) -> tuple[RolloutState, bool]:
    overrides = f"{run.project}:{KEY}"
    run.ops.set_config(overrides, json.dumps(as_items(action.pins)))
    print(f"rollout: {action.step} {', '.join(action.regions)}: preview", file=sys.stderr, flush=True)
    refused = problems(steps_of(run.ops.preview()), action.regions, _regions(run), action.scaler)
    if refused:
        run.ops.set_config(overrides, json.dumps(as_items(state.current)))  # the config as the stack runs
        more = f" (+{len(refused) - 3} more)" if len(refused) > 3 else ""
        return failed(state, action.step, "preview refused: " + "; ".join(refused[:3]) + more), False
    print(f"rollout: {action.step} {', '.join(action.regions)}: up", file=sys.stderr, flush=True)
    try:
        run.ops.up()
    except run.command_error as err:
        return failed(state, action.step, f"pulumi up failed: {' '.join(str(err).split())[:300]}"), False
    return applied(state, action), True


def _gate(run: Run, state: RolloutState, action: Gate) -> RolloutState:
    slo = run.settings.monitoring.slo
    results = []
    for region in action.regions:
        print(f"rollout: gate {region}: {run.windows} window(s) of {run.window_s:g} s", file=sys.stderr, flush=True)
        with run.gate_reader(region) as reader:
            results.append(run_gate(region, reader, slo, run.windows, lambda: time.sleep(run.window_s)))
    return gated(state, results)


def _save(run: Run, state: RolloutState) -> None:
    run.ops.set_config(STATE_KEY, to_json(state))


def _regions(run: Run) -> tuple[str, ...]:
    return tuple(r.name for r in run.settings.regions)


def stored_state(ops: StackOps) -> RolloutState | None:
    text = ops.config().get(STATE_KEY)
    return from_json(text) if text else None


def new_plan(settings: StackSettings, args: argparse.Namespace) -> RolloutPlan:
    regions = [r.name for r in settings.regions]
    canary = args.canary or regions[0]
    waves = [tuple(w.split(",")) for w in args.wave] or [(r,) for r in regions if r != canary]
    named = {canary, *(r for w in waves for r in w)}
    if named != set(regions) or any(r not in regions for r in named):
        raise Refusal(f"--canary and --wave must name every region of the stack once ({', '.join(regions)})")
    return RolloutPlan(change=_change(args.change), waves=((canary,), *waves), canary_percent=args.canary_percent)


def _change(pairs: list[str]) -> dict[str, Any]:
    change: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in FIELDS or key == SCALER:
            keys = ", ".join(k for k in FIELDS if k != SCALER)
            raise Refusal(f"--change {pair!r}: expected KEY=VALUE with KEY one of {keys}")
        change[key] = int(value) if value.isdigit() else value
    return change


def check_target(config: Mapping[str, str], stack: str, state: RolloutState, project: str) -> None:
    """The stack's settings with every region changed: the change must pass the settings layer before any step."""
    target = {r: {**state.current[r], **state.plan.change} for r in state.plan.regions}
    load_stack_settings({**config, f"{project}:{KEY}": json.dumps(as_items(target))}, stack=stack)


def find_pulumi(root: Path | None) -> Path | None:
    """The root to hand PulumiCommand (None: `pulumi` from PATH); Refusal when there is no Pulumi CLI."""
    if root is not None:
        if not (root / "bin" / "pulumi").is_file():
            raise Refusal(f"--pulumi-root {root}: no bin/pulumi there (PulumiCommand runs ROOT/bin/pulumi)")
        return root
    if shutil.which("pulumi") is None:
        raise Refusal(
            "no Pulumi CLI on PATH: the Automation API runs the `pulumi` executable "
            "(https://www.pulumi.com/docs/iac/download-install/; or --pulumi-root DIR for DIR/bin/pulumi)"
        )
    return None


def gate_route(args: argparse.Namespace, ops: StackOps) -> Callable[[str], Any]:
    """region -> a context manager yielding that region's WindowReader: --prometheus URL, else a port-forward."""
    urls = dict(pair.partition("=")[::2] for pair in args.prometheus)

    @contextmanager
    def reader(region: str) -> Iterator[WindowReader]:
        if region in urls:
            yield PrometheusReader(lambda _: urls[region], args.slo)
            return
        from triton_gke.cli.e2e import forward  # noqa: PLC0415 (starts kubectl)

        kubeconfigs = ops.outputs().get("kubeconfigs") or {}
        if region not in kubeconfigs:
            raise RolloutError(f"the stack output kubeconfigs has no {region}: no route to its Prometheus")
        with forward(
            args.kubectl, str(kubeconfigs[region]), MONITORING_NAMESPACE, PROMETHEUS_SERVICE, PROMETHEUS_PORT
        ) as port:
            yield PrometheusReader(lambda _: f"http://127.0.0.1:{port}", args.slo)

    return reader


def report(state: RolloutState) -> str:
    lines = [f"rollout {state.outcome or 'in progress'}: change {json.dumps(dict(state.plan.change))}"]
    lines += [f"  {line}" for line in state.log]
    if state.outcome == PASSED:
        lines.append(
            "  every region runs the change through regionOverrides: set it stack-wide and empty regionOverrides "
            "(an `up` that changes nothing)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    prog = invoked_as("rollout", "rollout")["prog"]
    try:
        return _main(args)
    except (Refusal, ConfigError, RolloutError, FileNotFoundError) as err:
        print(f"error: {prog}: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _main(args: argparse.Namespace) -> int:
    project, _ = config_schema()
    config = stack_config(args.stack)
    settings = load_stack_settings(config, stack=args.stack)
    args.slo = settings.monitoring.slo
    root = find_pulumi(args.pulumi_root)
    if not args.status and shutil.which(args.kubectl) is None:
        missing = [r.name for r in settings.regions if not any(p.startswith(f"{r.name}=") for p in args.prometheus)]
        if missing:
            raise Refusal(
                f"no {args.kubectl} on PATH for the port-forward to {missing[0]}'s Prometheus (or --prometheus)"
            )
    fresh = None
    if not (args.status or args.resume or args.abort):  # judged before the stack is touched: nothing written
        fresh = start(new_plan(settings, args), as_pins(settings.region_overrides))
        check_target(config, args.stack, fresh, project)
    stack = AutomationStack(args.stack, root, project_dir())
    stored = stored_state(stack)
    if args.status:
        print(report(stored) if stored else "no rollout stored in the stack")
        return 0
    if fresh is None:
        if stored is None or stored.finished:
            raise Refusal("no rollout in progress in the stack to resume or abort")
        state = abort(stored) if args.abort else stored
    elif stored is not None and not stored.finished:
        raise Refusal(f"a rollout is in progress (step {stored.step}): --resume or --abort it")
    else:
        state = fresh
    run = Run(stack, settings, project, gate_route(args, stack), args.windows, args.window_seconds, stack.command_error)
    _save(run, state)
    end = drive(run, state)
    print(report(end))
    return 0 if end.outcome == PASSED else EXIT_STOPPED


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, **invoked_as("rollout", "rollout")
    )
    parser.add_argument("--stack", default="dev", help="the stack (default dev)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="go on with the rollout stored in the stack")
    mode.add_argument("--abort", action="store_true", help="revert the wave in flight, then stop")
    mode.add_argument("--status", action="store_true", help="print the stored rollout; change nothing")
    parser.add_argument(
        "--change",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what every region takes: tritonImageTag or autoscaleQueueTimeMs (repeatable)",
    )
    parser.add_argument("--canary", metavar="REGION", help="the first region, weighted down (default the first)")
    parser.add_argument(
        "--wave",
        action="append",
        default=[],
        metavar="R1,R2",
        help="a later wave, in order (repeatable; default one region per wave)",
    )
    parser.add_argument(
        "--canary-percent", type=int, default=10, metavar="PERCENT", help="capacityScalerPercent of the canary (10)"
    )
    parser.add_argument(
        "--windows", type=int, default=3, metavar="N", help="N: consecutive windows a gate needs (default 3)"
    )
    parser.add_argument(
        "--window-seconds", type=float, default=60.0, metavar="SECONDS", help="one window's length (default 60)"
    )
    parser.add_argument(
        "--prometheus",
        action="append",
        default=[],
        metavar="REGION=URL",
        help="read REGION's gate from the Prometheus at URL instead of a port-forward (repeatable)",
    )
    parser.add_argument(
        "--kubectl", default="kubectl", metavar="PATH", help="the kubectl for the port-forward (default from PATH)"
    )
    parser.add_argument("--pulumi-root", type=Path, metavar="DIR", help="run DIR/bin/pulumi (default from PATH)")
    args = parser.parse_args(argv)
    if not (args.resume or args.abort or args.status) and not args.change:
        parser.error("name the change (--change KEY=VALUE), or --resume, --abort or --status")
    if (args.resume or args.abort or args.status) and (args.change or args.canary or args.wave):
        parser.error("--change, --canary and --wave start a new rollout; leave them out with --resume/--abort/--status")
    if args.windows < 1 or args.window_seconds < 0:
        parser.error("--windows must be >= 1 and --window-seconds >= 0")
    return args


if __name__ == "__main__":
    sys.exit(main())
