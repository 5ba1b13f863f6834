"""Pieces every Kubernetes component shares."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as kubernetes

# Matches the taint of the T4 pool (infra/cluster.py): only pods that tolerate it land on GPU nodes.
GPU_TOLERATION = kubernetes.core.v1.TolerationArgs(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
# The CPU pool's node label (infra/cluster.py POOL_ROLE_LABEL).
CPU_POOL_SELECTOR = {"triton-gke/pool": "cpu"}


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
