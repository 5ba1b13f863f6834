"""The offline plan: what `pulumi up` would create for a stack, without the CLI or a cloud account.

    triton-gke plan --stack dev            # resource tree, key properties, count per type
    triton-gke plan --stack prod --json    # JSON: type, name, parent, dependsOn, customTimeouts, inputs...
    triton-gke plan --stack dev --out DIR  # also every Kubernetes object as YAML

Invalid stack config or option: one line on stderr, exit code 2; an invalid generated Kubernetes manifest: exit 3;
--against, a change that takes a region down and --allow-disruption does not name: exit 4.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import stat
import sys
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from triton_gke.bounded_files import one_line, read_capped_file
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_BAD_MANIFEST, EXIT_DISRUPTIVE
from triton_gke.contracts.paths import build_dir
from triton_gke.infra.cost import load_vm_prices, region_costs, usd_per_million
from triton_gke.k8s.common import ArgsError
from triton_gke.k8s.schema import ManifestError, validate_manifest
from triton_gke.offline.lifecycle import applied_state, compare, refused, stack_of, summary, unknown_names
from triton_gke.offline.make_args import settings_words, with_model_repo_args
from triton_gke.offline.plan_diff import PlanFileError, index_records, load_plan
from triton_gke.offline.runtime import Plan, PlannedResource, close_event_loop, run_program
from triton_gke.one_line import OneLineParser, file_path, invoked_as
from triton_gke.settings import ConfigError, StackSettings, from_stack_file, stack_config
from triton_gke.settings.load_balancer import describe_split, shares_of
from triton_gke.settings.schema import config_schema, overrides_from
from triton_gke.settings.stack import check_stack_name

KUBERNETES_PREFIX = "kubernetes:"

# Dotted input paths shown beside each resource in the tree; other types show their first scalars.
KEY_PROPERTIES: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "name",
        "location",
        "nodeLocations",
        "releaseChannel.channel",
        "minMasterVersion",
        "workloadIdentityConfig.workloadPool",
        "privateClusterConfig.enablePrivateNodes",
        "deletionProtection",
    ),
    "gcp:container/nodePool:NodePool": (
        "location",
        "nodeConfig.machineType",
        "nodeConfig.guestAccelerators.0.type",
        "nodeConfig.guestAccelerators.0.count",
        "nodeConfig.guestAccelerators.0.gpuDriverInstallationConfig.gpuDriverVersion",
        "nodeConfig.taints",
        "nodeConfig.spot",
        "autoscaling.totalMinNodeCount",
        "autoscaling.totalMaxNodeCount",
        "nodeConfig.serviceAccount",
        "nodeConfig.workloadMetadataConfig.mode",
        "nodeConfig.shieldedInstanceConfig.enableSecureBoot",
    ),
    "gcp:compute/subnetwork:Subnetwork": ("region", "ipCidrRange", "secondaryIpRanges", "privateIpGoogleAccess"),
    "gcp:serviceaccount/account:Account": ("accountId",),
    "command:local:Command": ("create", "triggers"),
    "gcp:storage/bucket:Bucket": (
        "name",
        "location",
        "uniformBucketLevelAccess",
        "publicAccessPrevention",
        "versioning.enabled",
        "forceDestroy",
    ),
    "gcp:projects/iAMMember:IAMMember": ("role", "member"),
    "gcp:serviceaccount/iAMMember:IAMMember": ("role", "member", "serviceAccountId"),
}
# Who may act as a Google service account through Workload Identity (render_text's own section).
SA_IAM_TYPES = ("gcp:serviceaccount/iAMMember:IAMMember", "gcp:serviceaccount/iAMBinding:IAMBinding")
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
TRITON_IMAGE_PREFIX = "nvcr.io/nvidia/tritonserver:"

# Shown for every Kubernetes object (those a kind lacks are skipped).
K8S_PROPERTIES = (
    "metadata.namespace",
    "metadata.name",
    "spec.type",
    "spec.replicas",
    "spec.minReplicas",
    "spec.maxReplicas",
    "spec.template.spec.containers.0.image",
    "spec.template.spec.nodeSelector",
)


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
    print(f"against {path}: {summary(changes)}")
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


def plan_records(plan: Plan) -> list[dict[str, Any]]:
    """One record per resource; dependsOn lists the URNs it waits for (explicit and implied by its inputs), so
    the graph can be read: the engine creates a resource after, and deletes it before, everything in dependsOn."""
    return [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": r.parent.name if r.parent else None,
            "provider": _provider_name(plan, r),
            "dependsOn": sorted(set(r.dependencies)),
            "customTimeouts": r.custom_timeouts,
            "protect": r.protect,
            "ignoreChanges": sorted(r.ignore_changes),
            "replaceOnChanges": sorted(r.replace_on_changes),
            "deleteBeforeReplace": r.delete_before_replace,
            # The URNs the engine also finds this resource's old state by (offline/runtime.py engine_aliases).
            "aliases": list(r.aliases),
            "inputs": _tidy(r.inputs),
        }
        for r in _tree_order(plan)
    ]


def _provider_name(plan: Plan, resource: PlannedResource) -> str | None:
    provider = plan.by_urn(resource.provider_urn)
    return provider.name if provider else None


def _tidy(value: Any) -> Any:
    """Whole-number floats (the wire format has no ints) back to ints."""
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _children(plan: Plan) -> dict[str, list[PlannedResource]]:
    children: dict[str, list[PlannedResource]] = {}
    for r in plan.resources:
        children.setdefault(r.parent.urn if r.parent else "", []).append(r)
    for group in children.values():
        group.sort(key=lambda r: (r.custom, r.type, r.name))
    return children


def _tree_order(plan: Plan) -> list[PlannedResource]:
    children = _children(plan)
    ordered: list[PlannedResource] = []

    def walk(urn: str) -> None:
        for child in children.get(urn, []):
            ordered.append(child)
            walk(child.urn)

    walk("")
    return ordered


def _lookup(inputs: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(inputs, list) and part.isdigit() and int(part) < len(inputs):
            inputs = inputs[int(part)]
        elif isinstance(inputs, dict) and part in inputs:
            inputs = inputs[part]
        else:
            return None
    return inputs


def _key_properties(resource: PlannedResource) -> str:
    inputs = _tidy(resource.inputs)
    paths = KEY_PROPERTIES.get(resource.type) or (
        K8S_PROPERTIES if resource.type.startswith(KUBERNETES_PREFIX) else None
    )
    if paths is None:
        paths = tuple(k for k, v in inputs.items() if isinstance(v, str | int | bool) and k != "name")[:4]
    shown = []
    for path in paths:
        value = _lookup(inputs, path)
        if value is not None:
            shown.append(f"{_label(path)}={json.dumps(value, separators=(',', ':'))}")
    return "  ".join(shown)


def _label(path: str) -> str:
    parts = [p for p in path.split(".") if not p.isdigit()]
    return ".".join(parts[-2:]) if parts[-1] in ("type", "count", "mode", "channel") else parts[-1]


def render_text(plan: Plan, k8s_files: list[Path]) -> str:
    children = _children(plan)
    lines = [
        f"Offline plan of stack '{plan.stack}': Pulumi's mock runtime evaluated the real program; nothing was created.",
        "",
    ]

    def walk(urn: str, indent: str) -> None:
        for child in children.get(urn, []):
            props = _key_properties(child)
            lines.append(f"{indent}{child.type}  {child.name}" + (f"\n{indent}    {props}" if props else ""))
            walk(child.urn, indent + "    ")

    walk("", "")
    lines += ["", *workload_identity_lines(plan)]
    lines += ["", "Resources by type:"]
    counts = Counter(r.type for r in plan.resources)
    lines += [f"  {n:4d}  {t}" for t, n in sorted(counts.items())]
    lines.append(f"  {len(plan.resources):4d}  in all")
    if k8s_files:
        lines.append(f"Kubernetes objects: {len(k8s_files)} written under {_common_dir(k8s_files)}")
    return "\n".join(lines)


def workload_identity_lines(plan: Plan) -> list[str]:
    """The section of the text plan that names each stack's own principal: every Kubernetes principal that may act as
    a Google service account (roles/iam.workloadIdentityUser), and the service account each Triton Deployment runs
    as. Every cluster of a project gives NAMESPACE/KSA the same principal, so a principal another stack of the
    project also runs would let that stack read this one's bucket (docs/security.md)."""
    lines = ["Workload Identity (a pod running as the member, in any cluster of the project, acts as the account):"]
    for resource in plan.resources:
        if resource.type not in SA_IAM_TYPES or resource.inputs.get("role") != WORKLOAD_IDENTITY_USER:
            continue
        account = str(resource.inputs.get("serviceAccountId", "")).rsplit("/", 1)[-1]
        members = [resource.inputs["member"]] if "member" in resource.inputs else resource.inputs.get("members", [])
        lines += [f"  {member} -> {account}  ({resource.name})" for member in members]
    for deployment in plan.of_type("kubernetes:apps/v1:Deployment"):
        pod = _lookup(deployment.inputs, "spec.template.spec") or {}
        if any(str(c.get("image", "")).startswith(TRITON_IMAGE_PREFIX) for c in pod.get("containers", [])):
            namespace = _lookup(deployment.inputs, "metadata.namespace")
            lines.append(f"  Triton runs as {namespace}/{pod.get('serviceAccountName')}  ({deployment.name})")
    return lines


def _common_dir(files: list[Path]) -> Path:
    return Path(*Path(files[0]).parts[: len(Path(files[0]).parts) - 2]) if files else Path()


# ---------------------------------------------------------------- the capacity table (text output only)

CAPACITY_COLUMNS = (
    ("region", 24),
    ("target req/s", 12),
    ("nodes min/max", 13),
    ("serves req/s", 17),
    ("on-demand $/h", 13),
    ("$/1M req", 9),
    ("spot $/h", 9),
    ("$/1M req", 9),
)


def capacity_table(settings: StackSettings) -> str:
    """Per region: the target, what a node serves at the SLO (the capacity record), the GPU nodes, what they serve,
    and what the region costs per hour and per million requests, with on-demand and with Spot GPU nodes."""
    cap, gpu, slo = settings.capacity, settings.gpu_pool, settings.monitoring.slo
    if not cap.record_path:
        return f"\nCapacity: no record for {cap.variant}, so no table: {cap.missing}"
    lines = [
        "",
        f"Capacity of {cap.variant} at the SLO (p{slo.quantile * 100:g} <= {slo.latency_ms} ms), "
        f"{gpu.accelerator_count} x {gpu.accelerator_type} per node: {cap.rps_per_node:g} req/s per node, "
        f"from the {cap.record_source} record {cap.record_path}",
        _sizing_line(settings),
        _table_line([name for name, _ in CAPACITY_COLUMNS]),
    ]
    lines += [_capacity_row(settings, region, costs) for region, costs in _region_costs(settings).items()]
    rate = "the target" if cap.sized else "what the minimum serves"
    lines.append(
        f"$/h: the region at its minimum size (GKE fee, cpuMinNodes, GPU minimum; list prices, infra/data); "
        f"$/1M req at {rate}; n/a: a price infra/data lacks."
    )
    return "\n".join(lines)


def _sizing_line(settings: StackSettings) -> str:
    lb = settings.load_balancer
    split = f"\n{describe_split(lb.max_rate_per_pod, shares_of(lb.http_share_percent))}" if lb.enabled else ""
    return _sized_or_explicit(settings) + split


def _sized_or_explicit(settings: StackSettings) -> str:
    cap = settings.capacity
    if not cap.sized:
        line = "No targetRps: the explicit gpuMinNodes and gpuMaxNodes; the table shows what they serve."
        lb = settings.load_balancer
        if lb.enabled and lb.max_rate_per_pod > cap.rps_per_node:
            # RATE balancing fills a backend up to maxRatePerEndpoint before it spills to the next region
            # (https://cloud.google.com/load-balancing/docs/backend-service#rate_balancing_mode).
            line += (
                f"\nWarning: lbMaxRatePerPod {lb.max_rate_per_pod} is above a pod's {cap.rps_per_node:g} req/s at the "
                "SLO: the load balancer keeps sending a region requests its pods cannot serve in time; set "
                "targetRps (which derives it) or lower lbMaxRatePerPod."
            )
        return line
    return (
        f"Sized for targetRps {cap.target_rps} req/s per region with {cap.headroom_percent} % headroom: "
        f"GPU minimum {settings.gpu_pool.min_nodes} nodes, lbMaxRatePerPod {settings.load_balancer.max_rate_per_pod}, "
        f"HPA queue-time target {settings.serving.queue_time_target_us / 1000:g} ms (derived)."
    )


def _region_costs(settings: StackSettings) -> dict[str, dict[bool, float | None]]:
    """region -> {spot: $/h at minimum size}, from infra/cost.py (None where a price is missing)."""
    prices = load_vm_prices()
    found: dict[str, dict[bool, float | None]] = {}
    for spot in (False, True):
        priced = dataclasses.replace(settings, gpu_pool=dataclasses.replace(settings.gpu_pool, spot=spot))
        for cost in region_costs(priced, prices):
            found.setdefault(cost.region, {})[spot] = cost.min_usd_h
    return found


def _pods(settings: StackSettings) -> tuple[int, int]:
    """(fewest, most) Triton pods the table counts, one per GPU node: gpuMinNodes to gpuMaxNodes, the range the HPA
    scales them in (settings/monitoring.py refuses operator mode, the one without an HPA)."""
    return settings.gpu_pool.min_nodes, settings.gpu_pool.max_nodes


def _capacity_row(settings: StackSettings, region: str, usd_h: dict[bool, float | None]) -> str:
    cap, gpu = settings.capacity, settings.gpu_pool
    serves = tuple(cap.rps_per_node * pods for pods in _pods(settings))
    rate = cap.target_rps if cap.sized else serves[0]
    cells = [
        region,
        str(cap.target_rps) if cap.sized else "-",
        f"{gpu.min_nodes}/{gpu.max_nodes}",
        f"{serves[0]:.1f}-{serves[1]:.1f}",  # one decimal, one rounding: 1072.5 is not 1072 and 3217.5 not 3218
    ]
    for spot in (False, True):
        cells += [_money(usd_h.get(spot), 3), _money(usd_per_million(usd_h.get(spot), rate), 4)]
    return _table_line(cells)


def _table_line(cells: list[str]) -> str:
    """The region left-aligned, numbers right-aligned, in CAPACITY_COLUMNS' widths."""
    widths = [width for _, width in CAPACITY_COLUMNS]
    numbers = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
    aligned = [cells[0].ljust(widths[0]), *numbers]
    return "  " + "  ".join(aligned)


def _money(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def kubernetes_objects(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """(provider name, manifest) for every Kubernetes object the program declares."""
    return [
        (_provider_name(plan, r) or "default", _tidy(r.inputs))
        for r in _tree_order(plan)
        if r.type.startswith(KUBERNETES_PREFIX) and r.custom
    ]


def invalid_kubernetes_objects(plan: Plan, kubernetes_version: str) -> list[str]:
    """One line per object the target cluster's schema rejects."""
    problems = []
    for _, manifest in kubernetes_objects(plan):
        try:
            validate_manifest(manifest, kubernetes_version)
        except ManifestError as err:
            problems.append(str(err))
    return problems


# ---------------------------------------------------------------- the --out folder

# Lists (one relative path a line) the files the plan wrote into its out folder: the next plan removes
# those and nothing else, so `--out .` or a folder holding other files can never lose a stranger's file.
WRITTEN_LIST = ".offline-plan-files"
_WRITTEN_LIST_MAX_BYTES = 4 * 1024 * 1024  # a plan writes ~100 files
# Every file is created, never opened for overwriting, and never through a link: a symlink planted in the
# out folder (or the folder of a cluster replaced by one) would otherwise send the YAML to any file the user
# can write (O_NOFOLLOW: open(2) fails on a link as the last component, O_EXCL: fails on anything existing,
# links included; https://man7.org/linux/man-pages/man2/open.2.html).
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class _FolderError(Exception):
    """A refusal of the out folder, without the option it came from (check_out_dir and write_kubernetes_objects
    raise it again as a ConfigError starting with that option: `--out` or `--stack S`)."""


def default_out_dir(stack: str) -> Path:
    """build/plan/<stack>; a stack name that is not a plain Pulumi stack name (`../../v`) is a ConfigError."""
    return build_dir() / "plan" / check_stack_name(stack)


def check_out_dir(out_dir: Path, option: str = "--out") -> None:
    """Refuse an out folder that is a link, or holds files the plan did not write (no list of written files).

    No exception for a folder of folders: whatever it holds, the plan removes only what its own list names.
    """
    try:
        _check_out_dir(out_dir)
    except _FolderError as err:
        raise ConfigError(f"{option}: {err}") from None


def _check_out_dir(out_dir: Path) -> None:
    _refuse_link(out_dir)
    _refuse_link(out_dir / WRITTEN_LIST)
    if out_dir.exists() and not out_dir.is_dir():
        raise _FolderError(f"{out_dir} exists and is not a folder")
    if not out_dir.is_dir() or (out_dir / WRITTEN_LIST).is_file() or not any(out_dir.iterdir()):
        return
    raise _FolderError(
        f"{out_dir} is not empty and was not written by offline.plan (no {WRITTEN_LIST}); choose an empty or new folder"
    )


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise _FolderError(f"{path} is a symbolic link; the plan never writes or removes through a link (remove it)")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _check_path(out_dir: Path, relative: PurePosixPath) -> os.stat_result | None:
    """lstat each component of out_dir/relative: a link anywhere is refused; the last one's stat (None: absent)."""
    for depth in range(1, len(relative.parts) + 1):
        path = out_dir.joinpath(*relative.parts[:depth])
        status = _lstat(path)
        if status is None:
            return None
        _refuse_link(path)
        if depth < len(relative.parts) and not stat.S_ISDIR(status.st_mode):
            raise _FolderError(f"{path} is in the way of the plan's files and is not a folder")
    return status


def _previously_written(out_dir: Path) -> list[PurePosixPath]:
    """The regular files an earlier plan listed, relative to out_dir (entries leaving it are dropped); never found by
    a pattern: without the list nothing is the plan's."""
    listing = out_dir / WRITTEN_LIST
    if _lstat(listing) is None:
        return []
    # Through the one bounded reader: out_dir is the user's, and the list replaced by a FIFO must not hang the plan.
    data = read_capped_file(listing, _WRITTEN_LIST_MAX_BYTES, "the plan's list of the files it wrote", _FolderError)
    if b"\0" in data:  # no file name holds one
        raise _FolderError(f"{one_line(listing)}: binary data (a NUL byte); not the plan's list of the files it wrote")
    lines = data.decode("utf-8", errors="surrogateescape").splitlines()  # names as os.fsencode wrote them
    entries = [PurePosixPath(line) for line in lines if line.strip()]
    inside = [e for e in entries if e.parts and not e.is_absolute() and ".." not in e.parts]
    return sorted({e for e in inside if (s := _check_path(out_dir, e)) is not None and stat.S_ISREG(s.st_mode)})


def _planned_files(plan: Plan) -> list[tuple[PurePosixPath, dict[str, Any]]]:
    files = []
    for provider, manifest in kubernetes_objects(plan):
        meta = manifest.get("metadata", {})
        name = f"{manifest.get('kind', 'Object')}-{meta.get('namespace', 'cluster')}-{meta.get('name', 'unnamed')}.yaml"
        files.append((PurePosixPath(provider, name.lower()), manifest))
    return files


def _check_targets(out_dir: Path, targets: list[PurePosixPath], previous: list[PurePosixPath]) -> None:
    """Before anything changes: every file the plan writes is new or its own, on a path without links."""
    for relative in targets:
        status = _check_path(out_dir, relative)
        if status is not None and relative not in previous:
            raise _FolderError(f"{out_dir / relative} exists and was not written by offline.plan")


def write_kubernetes_objects(plan: Plan, out_dir: Path, option: str = "--out") -> list[Path]:
    """Replace the files an earlier plan wrote into out_dir with this plan's, and list them for the next one.

    Everything is checked first (links, strangers in the way), so a refusal leaves the folder as it was. A refusal
    is a ConfigError starting with `option`, the command-line option the folder came from.
    """
    try:
        return _write_kubernetes_objects(plan, out_dir)
    except _FolderError as err:
        raise ConfigError(f"{option}: {err}") from None


def _write_kubernetes_objects(plan: Plan, out_dir: Path) -> list[Path]:
    _check_out_dir(out_dir)
    previous = _previously_written(out_dir)
    files = _planned_files(plan)
    _check_targets(out_dir, [relative for relative, _ in files], previous)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        root = os.open(out_dir, _DIRECTORY)
    except OSError as err:
        raise _FolderError(f"cannot use {out_dir}: {err.strerror}") from None
    try:
        # Listed first with the old ones: a plan killed half-way leaves a list that still covers its files.
        _write_listing(root, sorted({*previous, *(relative for relative, _ in files)}))
        _remove_previous(out_dir, previous)
        for relative, manifest in files:
            _create(root, relative, yaml.safe_dump(manifest, sort_keys=False))
        _write_listing(root, [relative for relative, _ in files])
    except OSError as err:  # a link or file planted between the checks and the writes
        raise _FolderError(f"cannot write {out_dir / (err.filename or '')}: {err.strerror}") from None
    finally:
        os.close(root)
    return [out_dir / relative for relative, _ in files]


def _remove_previous(out_dir: Path, previous: list[PurePosixPath]) -> None:
    for relative in previous:
        path = out_dir / relative
        path.unlink()  # unlink(2) removes a link itself, never its target
        if path.parent != out_dir:
            with contextlib.suppress(OSError):  # its provider folder, when nothing else is left in it
                path.parent.rmdir()


def _create(root: int, relative: PurePosixPath, text: str) -> None:
    """Create root/relative (new file, no link followed: each folder is opened with O_NOFOLLOW)."""
    folder = os.dup(root)
    try:
        for part in relative.parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=folder)
            inner = _open(part, _DIRECTORY, folder, relative)
            os.close(folder)
            folder = inner
        fd = _open(relative.name, _CREATE, folder, relative, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    finally:
        os.close(folder)


def _open(name: str, flags: int, folder: int, relative: PurePosixPath, mode: int = 0o777) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=folder)
    except OSError as err:
        err.filename = relative.as_posix()
        raise


def _write_listing(root: int, relatives: list[PurePosixPath]) -> None:
    """Write the list beside the files under a temporary name, then rename it over the old one (rename(2)
    replaces the name itself, even a link, never what a link points to)."""
    temporary = f"{WRITTEN_LIST}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=root)
    fd = _open(temporary, _CREATE, root, PurePosixPath(temporary), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{relative.as_posix()}\n" for relative in relatives))
    os.replace(temporary, WRITTEN_LIST, src_dir_fd=root, dst_dir_fd=root)


if __name__ == "__main__":
    sys.exit(main())
