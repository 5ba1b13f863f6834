"""The rollout's preview check: before a step's `up`, the engine's preview of it may change only the step's regions,
and never replace or delete what takes a region down.

The preview's steps arrive as engine events (pulumi.automation Stack.preview(on_event=...)): a ResourcePreEvent per
resource with its `op` (same, create, update, replace, create-replacement, delete-replaced, delete, ...), its URN and
type, and the old and new inputs (pulumi/automation/events.py StepEventMetadata.from_json, SDK 3.272). What takes a
region down is the replacement guard's own rule (offline/lifecycle.py `disruption` and `refused`, the home of
`triton-gke plan --against`): a GKE cluster, a GPU node pool, Triton's Deployment or namespace, the bucket, the
address. No --allow-disruption here: a rollout step never needs one.

Which region a resource belongs to: its name holds the region's name as a whole '-'-separated part (gke-REGION,
gke-REGION-gpu, triton-REGION-..., monitoring-REGION-...: infra/region.py names every child after its region). A
resource naming no region is shared (the network, the bucket, the balancer): only the balancer's backend services may
change, and only in a step that moves a capacity scaler.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from triton_gke.offline.lifecycle import Change, disruption, refused

BACKEND_SERVICE = "gcp:compute/backendService:BackendService"
# Engine ops (pulumi/automation/events.py OpType) as the guard's actions; read, refresh and same change nothing.
ACTION_OF_OP = {
    "create": "create",
    "update": "update",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
    "delete": "delete",
    "import": "create",
    "import-replacement": "replace",
}


@dataclass(frozen=True)
class Step:
    """One resource step of a preview."""

    op: str
    urn: str
    type: str
    inputs: dict[str, Any]
    protect: bool = False

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


def steps_of(events: Iterable[Any]) -> list[Step]:
    """The resource steps of a preview's engine events (pulumi.automation.events.EngineEvent)."""
    steps = []
    for event in events:
        pre = getattr(event, "resource_pre_event", None)
        if pre is None:
            continue
        meta = pre.metadata
        state = meta.old or meta.new
        inputs = (state.inputs if state else None) or {}
        protect = bool(meta.old and meta.old.protect)
        steps.append(Step(str(getattr(meta.op, "value", meta.op)), meta.urn, meta.type, inputs, protect))
    return steps


def region_of(name: str, regions: Sequence[str]) -> str | None:
    """The stack region a resource's name names as a whole '-'-separated part, or None (a shared resource)."""
    for region in sorted(regions, key=len, reverse=True):
        if name == region or name.startswith(f"{region}-") or name.endswith(f"-{region}") or f"-{region}-" in name:
            return region
    return None


def problems(steps: Sequence[Step], allowed: Sequence[str], regions: Sequence[str], scaler: bool) -> list[str]:
    """Why this preview must not be applied: one line per resource, empty when it may."""
    lines = []
    changes = []
    for step in steps:
        action = ACTION_OF_OP.get(step.op)
        if action is None:
            continue
        region = region_of(step.name, regions)
        key = f"{step.type}::{step.name}"
        if region is not None and region not in allowed:
            lines.append(f"{action} {key}: region {region} is outside this step ({', '.join(allowed)})")
        elif region is None and not (scaler and step.type == BACKEND_SERVICE and action == "update"):
            lines.append(f"{action} {key}: a shared resource (no region's own); this step changes {', '.join(allowed)}")
        record = {"type": step.type, "inputs": step.inputs}
        if action in ("replace", "delete"):
            changes.append(Change(key, action, disruption=disruption(record), protected=step.protect))
    for change in refused(changes, ()):
        lines.append(f"{change.action} {change.key}: takes down {change.disruption or 'a protected resource'}")
    return lines
