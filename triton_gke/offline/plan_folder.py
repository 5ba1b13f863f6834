"""Plan any Python Pulumi program folder offline: `triton-gke plan-folder FOLDER [--stack S] [--config K=V] [--json]`.

The folder's program runs under the same mock runtime as `triton-gke plan` (offline/runtime.py run_program_folder):
its Pulumi.yaml, its Pulumi.<stack>.yaml and --config values are the config; the language host's working
directory is the folder (contracts/paths.py project_dir). Printed: every resource it declares with its parent and
provider, then the stack outputs' values (secrets as "[secret]"), so a user can check the provider they passed
reached the children; with --json each resource's URN, parent, provider, dependencies and inputs, and the outputs.
Bad input (no such folder, no Pulumi.yaml, no such stack file, a component refusing its Args) is one line on stderr
and exit 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.offline.plan_view import one_line_each, tree_order
from triton_gke.offline.runtime import (
    Plan,
    PlannedResource,
    close_event_loop,
    output_values,
    program_file,
    run_program_folder,
)
from triton_gke.one_line import OneLineParser
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.stack import check_stack_name
from triton_gke.settings.stack_file import read_yaml_file

PROG = "triton-gke plan-folder"


class FolderError(Exception):
    """The folder, its project file or its stack file cannot be planned; str() is one line."""


def _parser(prog: str) -> OneLineParser:
    parser = OneLineParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a Python Pulumi program folder (with Pulumi.yaml)")
    parser.add_argument("--stack", default="dev", help="the stack whose Pulumi.<stack>.yaml is read (default dev)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a config value")
    parser.add_argument("--json", action="store_true", help="print the resources and outputs as JSON")
    return parser


def check_folder(folder: Path, stack: str) -> None:
    """Refuse, in one line, what would otherwise end in a traceback or plan with no stack file at all."""
    try:
        check_stack_name(stack, "--stack")
    except ConfigError as err:
        raise FolderError(str(err)) from None
    if not folder.is_dir():
        raise FolderError(f"{folder}: no such folder")
    project_file = folder / "Pulumi.yaml"
    if not project_file.is_file():
        raise FolderError(f"{folder}: no Pulumi.yaml; not a Pulumi project folder")
    project = read_yaml_file(project_file, "a Pulumi project file", FolderError)
    if not isinstance(project, dict) or not project.get("name"):
        raise FolderError(f"{project_file}: not a Pulumi project file (no name)")
    runtime = project.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise FolderError(f"{project_file}: runtime {runtime_name!r}: only python programs run under the offline mocks")
    # `pulumi up --stack S` reads Pulumi.S.yaml beside Pulumi.yaml: with none, nothing of the stack's config is
    # read, so a misspelt stack would plan the defaults without a word.
    main = project.get("main")
    if main is not None and not isinstance(main, str):
        raise FolderError(f"{project_file}: main: expected a path, got {type(main).__name__}")
    program = program_file(folder, main)
    if not program.is_file():
        raise FolderError(f"{program}: no such program file (Pulumi.yaml `main`, default the folder's __main__.py)")
    if not (folder / f"Pulumi.{stack}.yaml").is_file():
        stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))
        known = f"; its stacks: {', '.join(stacks)}" if stacks else ""
        raise FolderError(f"{folder}: Pulumi.{stack}.yaml: no such stack file{known}")


def parse_config(pairs: Sequence[str]) -> dict[str, str]:
    """--config KEY=VALUE pairs (a key without a namespace is the project's, as `pulumi config set` takes it)."""
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FolderError(f"--config {pair!r}: expected KEY=VALUE")
        config[key] = value
    return config


def resource_rows(plan: Plan) -> list[dict[str, Any]]:
    """One JSON-friendly row per resource, as `triton-gke plan --json` writes them (urn, provider, dependsOn), in
    plan_view.tree_order: registrations finish in any order under the mock runtime, the output may not."""
    return [_row(plan, r) for r in tree_order(plan)]


def _row(plan: Plan, resource: PlannedResource) -> dict[str, Any]:
    provider = plan.by_urn(resource.provider_urn)
    return {
        "urn": resource.urn,
        "type": resource.type,
        "name": resource.name,
        "parent": f"{resource.parent.type}::{resource.parent.name}" if resource.parent else None,
        # The provider resource the engine would bind it to: its name (null: the default provider), and its URN.
        "provider": provider.name if provider else None,
        "providerUrn": resource.provider_urn or None,
        "dependsOn": sorted(set(resource.dependencies)),
        "inputs": resource.inputs,
    }


def plan_folder(folder: Path, stack: str, config: Mapping[str, str]) -> Plan:
    """The folder's plan; FolderError for bad input, or for a refusal the program raised as a pulumi.RunError."""
    check_folder(folder, stack)
    try:
        return run_program_folder(folder, stack, config)
    except pulumi.RunError as err:  # a component refusing its Args (k8s/common.py ArgsError), pulumi.Config.require
        raise FolderError(f"{folder}: {' '.join(str(err).split())}") from None


def print_plan(plan: Plan, as_json: bool) -> None:
    outputs = output_values(plan.outputs)
    if as_json:
        print(json.dumps({"resources": resource_rows(plan), "outputs": outputs}, indent=2, default=str))
        return
    print(text_view(plan, outputs))


def text_view(plan: Plan, outputs: Mapping[str, Any]) -> str:
    """The resources in --json's order, each with its parent and what it is bound to (the provider a user passed to a
    component is what they check first), then the stack outputs as compact JSON (secrets "[secret]", as --json has
    them). Names come from the program: each line is kept one line (plan_view.one_line_each)."""
    resources = tree_order(plan)
    lines = [f"Resources ({len(resources)}):"] + [_resource_line(r, _row(plan, r)) for r in resources]
    lines += ["", f"Outputs ({len(outputs)}):"] if outputs else ["", "Outputs: none"]
    lines += [f"  {name} = {json.dumps(value, default=str, sort_keys=True)}" for name, value in outputs.items()]
    return one_line_each(lines)


def _resource_line(resource: PlannedResource, row: Mapping[str, Any]) -> str:
    parent = f"  (in {row['parent']})" if row["parent"] else ""
    return f"  {row['type']}  {row['name']}{parent}  [{_binding(resource, row['provider'])}]"


def _binding(resource: PlannedResource, provider: str | None) -> str:
    """A component has no provider of its own (its children have theirs); a custom resource with none named gets
    its package's default provider from the engine (https://www.pulumi.com/docs/iac/concepts/resources/providers/)."""
    if not resource.custom:
        return "component"
    return f"provider {provider}" if provider else "default provider"


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = _parser(prog).parse_args(argv)
    try:
        plan = plan_folder(args.folder, args.stack, parse_config(args.config))
    except FolderError as err:
        print(f"error: {prog}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # the program itself failed: one line naming it, as a refusal is
        where = args.folder / "__main__.py"
        print(f"error: {prog}: {where}: {type(err).__name__}: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_FAILED
    print_plan(plan, args.json)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(prog="python -m triton_gke.offline.plan_folder"))
    finally:
        close_event_loop()  # before interpreter shutdown could print a traceback from an open loop
