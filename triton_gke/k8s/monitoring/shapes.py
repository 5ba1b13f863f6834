"""Shapes the monitoring builders (and the metrics adapter of k8s/autoscaling.py) share.

A builder declares its objects through a `Scope`: the prefix of their resource names and the component that parents
them. Each helper here declares exactly what the monolithic k8s/monitoring.py did, so names and inputs are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke.k8s.common import ANY_NODE, PodPlacement, non_root_pod_security

# The `nobody` user: Prometheus' image runs as it, and prometheus-adapter needs no user of its own.
NOBODY = 65534


@dataclass(frozen=True)
class Scope:
    """Where a builder declares: resource names `PREFIX-SUFFIX`, every object a child of `parent`.

    `aliases` go on every object declared through the scope: where those objects lived before a refactoring moved
    them here (e.g. `pulumi.Alias(parent=old_component)`), so `pulumi up` moves them in its state instead of
    deleting and recreating them (https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/).
    """

    prefix: str
    parent: pulumi.Resource
    aliases: Sequence[pulumi.Alias] = ()

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent, aliases=list(self.aliases) or None, **kwargs)


def meta(name: str, namespace: pulumi.Input[str] | None = None, **labels: str) -> kubernetes.meta.v1.ObjectMetaArgs:
    return kubernetes.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=labels or None)


def app_labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name}


def config_map_volume(
    name: str, config_map: kubernetes.core.v1.ConfigMap, key: str | None = None
) -> kubernetes.core.v1.VolumeArgs:
    """A volume of `config_map`: every key as a file, or only `key` when given."""
    items = [kubernetes.core.v1.KeyToPathArgs(key=key, path=key)] if key else None
    return kubernetes.core.v1.VolumeArgs(
        name=name, config_map=kubernetes.core.v1.ConfigMapVolumeSourceArgs(name=config_map.metadata.name, items=items)
    )


def single_pod_deployment(
    scope: Scope,
    name: str,
    ns: pulumi.Input[str],
    uid: int,
    container: kubernetes.core.v1.ContainerArgs,
    volumes: list[kubernetes.core.v1.VolumeArgs],
    service_account: kubernetes.core.v1.ServiceAccount | None = None,
    placement: PodPlacement = ANY_NODE,
) -> kubernetes.apps.v1.Deployment:
    """One pod where `placement` lets it run (default: any node), running as `uid`, replaced (never surged) on
    change."""
    labels = app_labels(name)
    return kubernetes.apps.v1.Deployment(
        scope.name(name),
        metadata=meta(name, ns, **labels),
        spec=kubernetes.apps.v1.DeploymentSpecArgs(
            replicas=1,
            # A single writer of its volume: never two Prometheus pods on one disk.
            strategy=kubernetes.apps.v1.DeploymentStrategyArgs(type="Recreate"),
            selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
            template=kubernetes.core.v1.PodTemplateSpecArgs(
                metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=labels),
                spec=kubernetes.core.v1.PodSpecArgs(
                    service_account_name=service_account.metadata.name if service_account else None,
                    automount_service_account_token=service_account is not None,
                    **placement.pod_fields(),
                    security_context=non_root_pod_security(uid),
                    containers=[container],
                    volumes=volumes,
                ),
            ),
        ),
        opts=scope.opts(),
    )


def service(
    scope: Scope,
    name: str,
    ns: pulumi.Input[str],
    ports: dict[str, int],
    sources: tuple[str, ...],
    target: dict[str, str] | None = None,
    selector_name: str | None = None,
) -> kubernetes.core.v1.Service:
    """The Service of the single-pod Deployment `selector_name` (default `name`); container ports by name."""
    return kubernetes.core.v1.Service(
        scope.name(f"{name}-svc"),
        metadata=meta(name, ns),
        spec=kubernetes.core.v1.ServiceSpecArgs(
            # Reached with kubectl port-forward; a LoadBalancer only for the ranges the stack lists.
            type="LoadBalancer" if sources else "ClusterIP",
            load_balancer_source_ranges=list(sources) or None,
            selector=app_labels(selector_name or name),
            ports=[
                kubernetes.core.v1.ServicePortArgs(name=n, port=p, target_port=(target or {}).get(n, n))
                for n, p in ports.items()
            ],
        ),
        opts=scope.opts(),
    )
