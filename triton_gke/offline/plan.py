"""The offline plan: what `pulumi up` would create for a stack, without the CLI or a cloud account.

    triton-gke plan --stack dev            # resource tree, key properties, count per type
    triton-gke plan --stack prod --json    # JSON: type, name, parent, dependsOn, customTimeouts, inputs...
    triton-gke plan --stack dev --out DIR  # also every Kubernetes object as YAML

Invalid stack config or option: one line on stderr, exit code 2; an invalid generated Kubernetes manifest: exit 3;
--against, a change that takes a region down and --allow-disruption does not name: exit 4.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import one_line
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_BAD_MANIFEST, EXIT_DISRUPTIVE
from triton_gke.k8s.common import ArgsError
from triton_gke.offline.lifecycle import applied_state, compare, refused, stack_of, summary, unknown_names
from triton_gke.offline.make_args import settings_words, with_model_repo_args
from triton_gke.offline.plan_diff import PlanFileError, index_records, load_plan
from triton_gke.offline.plan_out import check_out_dir, default_out_dir, write_kubernetes_objects
from triton_gke.offline.plan_view import capacity_table, invalid_kubernetes_objects, plan_records, render_text
from triton_gke.offline.runtime import Plan, close_event_loop, run_program
from triton_gke.one_line import OneLineParser, file_path, invoked_as
from triton_gke.settings import ConfigError, from_stack_file, stack_config
from triton_gke.settings.schema import config_schema, overrides_from


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:
        close_event_loop()


def _main(argv: list[str] | None) -> int:
    args = _parse_args(argv)
    # Folder refusals name the option the folder came from: --out DIR, or --stack S for build/plan/S.
    option = "--out" if args.out else f"--stack {args.stack}"
    try:
        applied = load_plan(args.against) if args.against else None  # a bad file is refused before any work
        out_dir = args.out or default_out_dir(args.stack)  # the stack name is checked before it becomes a path
        check_out_dir(out_dir, option)  # before anything is evaluated or written
        plan = evaluate(args.stack, overrides_from(args.set), args.config_file)
        # The settings the program read (evaluate has checked them): the capacity table's input.
        stack_settings = from_stack_file(args.stack, overrides_from(args.set), args.config_file)
        k8s_files = write_kubernetes_objects(plan, out_dir, option)  # refuses links and strangers before writing
    except PlanFileError as err:
        print(f"error: --against {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ConfigError, FileNotFoundError, ArgsError) as err:
        # One line always: a value quoted in a message may hold a line break. ArgsError: a component refused what
        # the settings layer let through (it should not; pulumi up prints it as one line too, a RunError).
        message = with_model_repo_args(str(err), args.stack, settings_words(args.set, args.config_file))
        message = " ".join(message.split("\n"))
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    problems = invalid_kubernetes_objects(plan, stack_settings.cluster.kubernetes_version)
    if problems:
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return EXIT_BAD_MANIFEST
    if applied is not None:
        words = settings_words(args.set, args.config_file)
        return report_lifecycle(plan, applied, args.against, args.allow_disruption, args.stack, words)
    if args.json:
        json.dump(plan_records(plan), sys.stdout, indent=2)
        print()
    else:
        print(render_text(plan, k8s_files))
        print(capacity_table(stack_settings))
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, **invoked_as("plan", "plan")
    )
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument("--json", action="store_true", help="print only a JSON array of resources on stdout")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a stack setting (JSON for lists)"
    )
    parser.add_argument("--out", type=Path, help="folder for the Kubernetes YAML (default build/plan/<stack>)")
    parser.add_argument(
        "--config-file",
        type=file_path,
        metavar="FILE",
        help="read the stack settings from FILE instead of Pulumi.<stack>.yaml (as `pulumi up --config-file`)",
    )
    parser.add_argument(
        "--against",
        type=file_path,
        metavar="FILE",
        help="the plan JSON last deployed (make plan ARGS=--json): list what the next `pulumi up` creates, updates, "
        "replaces and deletes, and refuse changes that take a region down",
    )
    parser.add_argument(
        "--allow-disruption",
        action="append",
        default=[],
        metavar="NAME",
        help="with --against: let this resource (its name, or 'all') be replaced or deleted (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.allow_disruption and not args.against:
        parser.error("--allow-disruption needs --against FILE")
    if args.against and args.json:
        parser.error("--against prints the lifecycle as text; leave out --json")
    return args


def report_lifecycle(
    plan: Plan, applied: dict[str, dict[str, Any]], path: Path, allowed: list[str], stack: str, words: list[str]
) -> int:
    """Print what the next `up` does to the stack deployed from the plan `applied` (read from `path`);
    EXIT_DISRUPTIVE when it replaces or deletes something disruptive that `allowed` does not name."""
    after = index_records(plan_records(plan), "this plan")
    deployed, ours = stack_of(applied), stack_of(after)
    if deployed and deployed != ours:  # Pulumi never diffs one stack's state against another's program
        theirs = ", ".join(f"stack {s} of project {p}" for s, p in sorted(deployed))
        mine = ", ".join(f"stack {s} of project {p}" for s, p in sorted(ours))
        print(f"error: --against {path}: a plan of {theirs}, not {mine}", file=sys.stderr)
        return EXIT_BAD_INPUT
    typos = unknown_names(allowed, applied, after)
    if typos:
        print(f"error: --allow-disruption {typos[0]!r}: no resource of that name in either plan", file=sys.stderr)
        return EXIT_BAD_INPUT
    before = applied_state(applied)
    changes = compare(before, after)
    for change in changes:
        if change.action != "unchanged":
            # Names and paths come from the applied plan, a file: control characters shown as escapes, one line each.
            print(one_line(change.line()))
    print(f"against {one_line(path)}: {summary(changes)}")
    blocked = refused(changes, allowed)
    protected = [c.key for c in blocked if c.protected]
    if protected:
        print(
            f"error: {len(protected)} protected resource(s) would be replaced or deleted ({', '.join(protected)}): "
            "`pulumi up` refuses that whatever is allowed; unprotect them in the same `up` (allowGpuPoolReplacement "
            "true for a GPU pool, deletionProtection false otherwise; docs/upgrades.md)",
            file=sys.stderr,
        )
        return EXIT_DISRUPTIVE
    if blocked:
        names = [*allowed, *(c.name for c in blocked)]
        keys = ", ".join(c.key for c in blocked)
        # The direct command, quoted for the shell, so a --set value with spaces or quotes pastes as it is.
        rerun = shlex.join(
            [".venv/bin/triton-gke", "plan", "--stack", stack, "--against", str(path), *words]
            + [word for name in names for word in ("--allow-disruption", name)]
        )
        print(
            f"error: {len(blocked)} change(s) would take a region down or lose state ({keys}); "
            f"see docs/lifecycle.md for the safe way, or allow them: {rerun}",
            file=sys.stderr,
        )
        return EXIT_DISRUPTIVE
    return 0


def evaluate(stack: str, overrides: dict[str, str] | None = None, config_file: Path | None = None) -> Plan:
    project_name, _ = config_schema()
    return run_program(stack, stack_config(stack, config_file=config_file) | (overrides or {}), project_name)


if __name__ == "__main__":
    sys.exit(main())
