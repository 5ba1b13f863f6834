"""What an offline plan shows: its JSON records, the resource tree as text, the capacity table, and the Kubernetes
objects it declares, checked against the target cluster's schema (offline/plan.py prints them)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import one_line
from triton_gke.k8s.schema import ManifestError, validate_manifest
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.settings import StackSettings
from triton_gke.settings.cost import load_vm_prices, region_costs, usd_per_million
from triton_gke.settings.load_balancer import describe_split, shares_of

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
        for r in tree_order(plan)
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


def tree_order(plan: Plan) -> list[PlannedResource]:
    """Every resource, parents before children, siblings by (custom, type, name): the same order at every run, whatever
    order the program's registrations happened to finish in."""
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
            lines.append(f"{indent}{child.type}  {child.name}")
            lines.extend([f"{indent}    {props}"] if props else [])
            walk(child.urn, indent + "    ")

    walk("", "")
    lines += ["", *workload_identity_lines(plan)]
    lines += ["", "Resources by type:"]
    counts = Counter(r.type for r in plan.resources)
    lines += [f"  {n:4d}  {t}" for t, n in sorted(counts.items())]
    lines.append(f"  {len(plan.resources):4d}  in all")
    if k8s_files:
        lines.append(f"Kubernetes objects: {len(k8s_files)} written under {_common_dir(k8s_files)}")
    return one_line_each(lines)


def one_line_each(lines: list[str]) -> str:
    """The lines joined, each kept one line: a name from the stack's settings or a path from the command line that
    holds a line break (LF, CR, VT, FF, NEL U+0085, U+2028, U+2029: what str.splitlines() splits at) or another
    character that is not printable is shown escaped, so it can never forge a line of the plan (issue 44)."""
    return "\n".join(one_line(line) for line in lines)


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
        return one_line_each(["", f"Capacity: no record for {cap.variant}, so no table: {cap.missing}"])
    lines = [
        "",
        f"Capacity of {cap.variant} at the SLO (p{slo.quantile * 100:g} <= {slo.latency_ms} ms), "
        f"{gpu.accelerator_count} x {gpu.accelerator_type} per node: {cap.rps_per_node:g} req/s per node, "
        f"from the {cap.record_source} record {cap.record_path}",
        *_sizing_lines(settings),
        _table_line([name for name, _ in CAPACITY_COLUMNS]),
    ]
    lines += [_capacity_row(settings, region, costs) for region, costs in _region_costs(settings).items()]
    rate = "the target" if cap.sized else "what the minimum serves"
    lines.append(
        f"$/h: the region at its minimum size (GKE fee, cpuMinNodes, GPU minimum; list prices, infra/data); "
        f"$/1M req at {rate}; n/a: a price infra/data lacks."
    )
    return one_line_each(lines)


def _sizing_lines(settings: StackSettings) -> list[str]:
    """One string per line: one_line_each escapes a line break inside a line (a name must not forge one), so a
    block meant to span lines is given as its lines (it printed a literal \\n before the warning)."""
    lb = settings.load_balancer
    split = [describe_split(lb.max_rate_per_pod, shares_of(lb.http_share_percent))] if lb.enabled else []
    return [*_sized_or_explicit(settings), *split]


def _sized_or_explicit(settings: StackSettings) -> list[str]:
    cap = settings.capacity
    if not cap.sized:
        lines = ["No targetRps: the explicit gpuMinNodes and gpuMaxNodes; the table shows what they serve."]
        lb = settings.load_balancer
        if lb.enabled and lb.max_rate_per_pod > cap.rps_per_node:
            # RATE balancing fills a backend up to maxRatePerEndpoint before it spills to the next region
            # (https://cloud.google.com/load-balancing/docs/backend-service#rate_balancing_mode).
            lines.append(
                f"Warning: lbMaxRatePerPod {lb.max_rate_per_pod} is above a pod's {cap.rps_per_node:g} req/s at the "
                "SLO: the load balancer keeps sending a region requests its pods cannot serve in time; set "
                "targetRps (which derives it) or lower lbMaxRatePerPod."
            )
        return lines
    return [
        f"Sized for targetRps {cap.target_rps} req/s per region with {cap.headroom_percent} % headroom: "
        f"GPU minimum {settings.gpu_pool.min_nodes} nodes, lbMaxRatePerPod {settings.load_balancer.max_rate_per_pod}, "
        f"HPA queue-time target {settings.serving.queue_time_target_us / 1000:g} ms (derived)."
    ]


def _region_costs(settings: StackSettings) -> dict[str, dict[bool, float | None]]:
    """region -> {spot: $/h at minimum size}, from settings/cost.py (None where a price is missing)."""
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
        for r in tree_order(plan)
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
