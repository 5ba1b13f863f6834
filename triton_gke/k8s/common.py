"""Pieces every Kubernetes component shares."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.contracts.placement import (
    CPU_POOL,
    GPU_POOL,
    GPU_TAINT_EFFECT_K8S,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    POOL_LABEL,
)

# The effects a Kubernetes taint may have, in the Kubernetes spelling
# (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/); GKE's node-pool API spells
# the same three NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE (infra/cluster.py GKE_TAINT_EFFECTS).
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeTaint:
    """A taint every node of a pool carries; `effect` in the Kubernetes spelling."""

    key: str
    value: str
    effect: str

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("taint key: must not be empty")
        if self.effect not in TAINT_EFFECTS:
            raise ValueError(f"taint effect: {self.effect!r} is not one of {', '.join(TAINT_EFFECTS)}")


@dataclass(frozen=True)
class NodePoolPlacement:
    """A node pool as pods see it: the label that selects its nodes and the taint (if any) that keeps others off.

    One value feeds both sides, the GKE pool's label and taint (infra/cluster.py) and the pods' node selector and
    toleration (k8s/), so the two cannot drift apart.
    """

    pool: str
    taint: NodeTaint | None = None

    def __post_init__(self) -> None:
        if not self.pool:
            raise ValueError(f"{POOL_LABEL}: the pool's label value must not be empty")

    @property
    def node_labels(self) -> dict[str, str]:
        """The labels the pool puts on its nodes."""
        return {POOL_LABEL: self.pool}

    @property
    def node_selector(self) -> dict[str, str]:
        """A pod's nodeSelector that lands it on this pool only."""
        return {POOL_LABEL: self.pool}

    @property
    def toleration(self) -> kubernetes.core.v1.TolerationArgs:
        """What a pod that must run on this pool tolerates: the taint's key with any value (operator Exists)."""
        if self.taint is None:
            raise ValueError(f"node pool {self.pool!r} has no taint to tolerate")
        return kubernetes.core.v1.TolerationArgs(key=self.taint.key, operator="Exists", effect=self.taint.effect)


# Only pods that tolerate the GPU taint land on T4 nodes; the CPU pool is untainted, so system pods land there.
GPU_NODES = NodePoolPlacement(GPU_POOL, NodeTaint(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT_K8S))
CPU_NODES = NodePoolPlacement(CPU_POOL)


@dataclass(frozen=True)
class PodPlacement:
    """Where a workload's pods may run: the node labels they select (empty: any node) and the taints they tolerate.

    The default, ANY_NODE, schedules on any untainted node of a plain cluster: no nodeSelector at all, since Kubernetes
    reads an absent one as "every node" (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/
    #nodeselector: the pod runs only on nodes with every label it names). A stack whose pools carry labels of their
    own passes them (infra/system.py passes CPU_NODES.node_selector).
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[kubernetes.core.v1.TolerationArgs, ...] = ()

    def pod_fields(self) -> dict[str, Any]:
        """The PodSpecArgs keywords: node_selector and tolerations, each None when empty (so left out of the spec)."""
        return {"node_selector": dict(self.node_selector) or None, "tolerations": list(self.tolerations) or None}


ANY_NODE = PodPlacement()


def restricted_namespace(resource_name: str, name: str, parent: pulumi.Resource) -> kubernetes.core.v1.Namespace:
    """A namespace whose pods must meet the 'restricted' Pod Security Standard (non-root, no escalation)."""
    return kubernetes.core.v1.Namespace(
        resource_name,
        metadata=kubernetes.meta.v1.ObjectMetaArgs(
            name=name,
            labels={
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
            },
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def non_root_container_security() -> kubernetes.core.v1.SecurityContextArgs:
    return kubernetes.core.v1.SecurityContextArgs(
        allow_privilege_escalation=False, capabilities=kubernetes.core.v1.CapabilitiesArgs(drop=["ALL"])
    )


def non_root_pod_security(uid: int) -> kubernetes.core.v1.PodSecurityContextArgs:
    """Pod-level half of the restricted Pod Security Standard, running as the image's own user."""
    return kubernetes.core.v1.PodSecurityContextArgs(
        run_as_non_root=True,
        run_as_user=uid,
        run_as_group=uid,
        fs_group=uid,
        seccomp_profile=kubernetes.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def required_node_affinity(
    *expressions: kubernetes.core.v1.NodeSelectorRequirementArgs,
) -> kubernetes.core.v1.AffinityArgs:
    """Schedule only on nodes matching every expression."""
    return kubernetes.core.v1.AffinityArgs(
        node_affinity=kubernetes.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=kubernetes.core.v1.NodeSelectorArgs(
                node_selector_terms=[kubernetes.core.v1.NodeSelectorTermArgs(match_expressions=list(expressions))]
            )
        )
    )


def http_probe(
    path: str, port: str, period: int = 10, failures: int = 3, timeout: int | None = None
) -> kubernetes.core.v1.ProbeArgs:
    return kubernetes.core.v1.ProbeArgs(
        http_get=kubernetes.core.v1.HTTPGetActionArgs(path=path, port=port),
        period_seconds=period,
        failure_threshold=failures,
        timeout_seconds=timeout,
    )


class ArgsError(ValueError, pulumi.RunError):
    """Bad Args of a public component: one line naming the component, the field and what is allowed.

    A pulumi.RunError, so `pulumi up` prints the line without a traceback, as it does for a bad stack key
    (infra/config.py; RunError is "a clean exit rather than the usual verbose unhandled error logic",
    https://www.pulumi.com/docs/reference/pkg/nodejs/pulumi/pulumi/classes/RunError.html). Raised before the
    component declares any child, so nothing is half-declared.

    The component and the problem are data (`component`, e.g. "TritonOnCluster 'team'", and `problem`, the line
    from the field on), so a composing component names the field under its own without reading the text.
    """

    def __init__(self, component: str, problem: str) -> None:
        self.component = component
        self.problem = problem
        super().__init__(f"{component}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Copied or pickled (asyncio, Pulumi's runtime) with its data: the default would call __init__(message).
        return type(self), (self.component, self.problem)


def unknown_field_problem(args: Mapping[str, Any], known: Collection[str]) -> str | None:
    """`FIELD: unknown field; did you mean ...?` for the first key of `args` not in `known`, else None."""
    unknown = next((key for key in args if key not in known), None)
    if unknown is None:
        return None
    close = difflib.get_close_matches(str(unknown), known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"expected one of {', '.join(known)}"
    return f"{unknown}: unknown field; {hint}"
