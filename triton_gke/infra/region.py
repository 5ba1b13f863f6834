"""TritonGkeRegion: one region of the system: its GKE cluster (CPU and T4 pools), Triton on it (TritonOnCluster,
with its HPA, monitoring and Locust as asked) and the lifecycle of the zonal NEGs GKE creates for Triton.

Given the shared pieces: the project, the VPC and the region's subnet (in `cluster`), the model repository and the
identity that reads it (in `serving` and `wiring`). Children are named `<role>-<name>` with the region as the name
(gke-REGION, negs-REGION, and TritonOnCluster's triton-REGION, ...): the names the stack's resources had before this
component existed (see TritonGkeSystem for the aliases that keep their identity).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import pulumi

from triton_gke.infra.cluster import GkeCluster, GkeClusterArgs
from triton_gke.infra.model_upload import VENV_PYTHON
from triton_gke.infra.negs import ZonalNegs, ZonalNegsArgs
from triton_gke.k8s.common import ArgsError, unknown_field_problem
from triton_gke.k8s.engine_build import EngineBuild, EngineBuildArgs
from triton_gke.k8s.on_cluster import ClusterWiring, TritonOnCluster, TritonOnClusterArgs, check_args
from triton_gke.k8s.triton import neg_names
from triton_gke.settings.serving import nodes_driver_branch

TYPE_TOKEN = "triton-gke:index:TritonGkeRegion"


class TritonGkeRegionArgs(TypedDict):
    """The inputs of TritonGkeRegion."""

    project: str
    """The Google Cloud project."""
    cluster: GkeClusterArgs
    """The region's cluster on the shared VPC and the region's subnet (infra/cluster_args.py maps a stack's settings
    onto it); its region and zones are the region's."""
    serving: TritonOnClusterArgs
    """Triton and its add-ons on the cluster (kubeconfig left out: the cluster's own provider is used)."""
    wiring: NotRequired[ClusterWiring]
    """What Triton waits for (bucket access, enabled APIs) and the stack's load-test and monitoring choices."""
    python: NotRequired[str]
    """The Python that runs the NEG cleanup commands; default `.venv/bin/python` (infra/model_upload.py)."""


class TritonGkeRegion(pulumi.ComponentResource):
    """One region: a GKE cluster with a T4 pool, Triton serving on it, and its zonal NEGs' lifecycle."""

    cluster_name: pulumi.Output[str]
    """The GKE cluster's name."""
    endpoint: pulumi.Output[str]
    """The cluster's control-plane endpoint."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig for the cluster (secret)."""

    def __init__(
        self,
        name: str,
        args: TritonGkeRegionArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        child_aliases: Sequence[pulumi.Alias] = (),
        engines: EngineBuildArgs | None = None,
    ) -> None:
        serving = _serving(args)
        driver_branch = _driver_branch(args.get("cluster")) if isinstance(args, Mapping) else None
        _check(name, args, serving, driver_branch)
        super().__init__(TYPE_TOKEN, name, None, opts)
        moved = pulumi.ResourceOptions(parent=self, aliases=list(child_aliases))
        cluster_args = args["cluster"]
        self._cluster = GkeCluster(f"gke-{name}", cluster_args, opts=moved)
        # `ready` waits for Triton's NEG Service, which is declared below (it waits for `cleanup`): a deferred
        # Output hands it over.
        neg_service, resolve_neg_service = pulumi.deferred_output()
        self._negs = ZonalNegs(
            f"negs-{name}",
            ZonalNegsArgs(
                project=args["project"],
                region=cluster_args.region,
                zones=tuple(cluster_args.zones),
                neg_names=tuple(neg_names(self._cluster.cluster_name).values()),
                cluster=self._cluster,
                neg_service=neg_service,
                python=args.get("python", VENV_PYTHON),
            ),
            opts=moved,
        )
        given = args.get("wiring") or ClusterWiring()
        # The engine-build Job of this region's GPU type (k8s/engine_build.py): Triton's Deployment waits for it with
        # the bucket grants, so it starts only once the plans exist.
        self._engines = (
            None
            if engines is None
            else EngineBuild(
                f"engines-{name}",
                engines,
                opts=pulumi.ResourceOptions(parent=self, providers=[self._cluster.provider]),
            )
        )
        wiring = dataclasses.replace(
            given,
            bucket_access=(*given.bucket_access, *((self._engines.job,) if self._engines else ())),
            neg_cleanup=[self._negs.cleanup],
            neg_name_prefix=self._cluster.cluster_name,
            driver_branch=driver_branch,
            child_aliases=tuple(child_aliases),
            kubernetes_minor=_kubernetes_minor(cluster_args),
        )
        self._triton = TritonOnCluster(
            name,
            serving,
            opts=pulumi.ResourceOptions(parent=self, providers=[self._cluster.provider]),
            wiring=wiring,
        )
        neg_service_resource = self._triton.serving.neg_service
        assert neg_service_resource is not None  # container_native_lb is on (_serving)
        resolve_neg_service(pulumi.Output.from_input(neg_service_resource))
        self.cluster_name = pulumi.Output.from_input(self._cluster.cluster.name)
        self.endpoint = pulumi.Output.from_input(self._cluster.cluster.endpoint)
        self.kubeconfig = pulumi.Output.secret(self._cluster.kubeconfig)
        self.register_outputs(
            {"cluster_name": self.cluster_name, "endpoint": self.endpoint, "kubeconfig": self.kubeconfig}
        )

    @property
    def cluster(self) -> GkeCluster:
        return self._cluster

    @property
    def negs(self) -> ZonalNegs:
        return self._negs

    @property
    def triton(self) -> TritonOnCluster:
        return self._triton

    @property
    def engines(self) -> EngineBuild | None:
        return self._engines


def _serving(args: Any) -> Any:
    """The region's TritonOnClusterArgs with container_native_lb on: its NEG lifecycle (ZonalNegs) and the global
    load balancer use the NEGs GKE creates for Triton's NEG Service. A refusal of an explicit false is _check's."""
    serving = args.get("serving") if isinstance(args, Mapping) else None
    if not isinstance(serving, Mapping) or "container_native_lb" in serving:
        return serving
    return {**serving, "container_native_lb": True}


def _kubernetes_minor(cluster: Any) -> int | None:
    """The cluster's Kubernetes minor (33 for "1.33"); None where the version is not plain "1.MINOR"."""
    if not isinstance(cluster, GkeClusterArgs) or not isinstance(cluster.kubernetes_version, str):
        return None
    parts = cluster.kubernetes_version.split(".")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def _driver_branch(cluster: Any) -> int | None:
    """The NVIDIA driver branch GKE installs on the region's GPU nodes, by the settings layer's rule
    (settings/serving.py nodes_driver_branch); None where the Kubernetes version is not plain "1.MINOR"."""
    minor = _kubernetes_minor(cluster)
    return None if minor is None else nodes_driver_branch(minor, cluster.gpu_pool.driver_version)


def _check(name: str, args: Any, serving: Any, driver_branch: int | None) -> None:
    """One ArgsError line naming the field, before any child is declared: unknown fields first."""
    where = f"TritonGkeRegion {name!r}"
    if not isinstance(args, Mapping):
        raise ArgsError(where, f"args: expected a TritonGkeRegionArgs mapping, got {type(args).__name__}")
    unknown = unknown_field_problem(args, TritonGkeRegionArgs.__annotations__)
    if unknown:
        raise ArgsError(where, unknown)
    if not isinstance(args.get("cluster"), GkeClusterArgs):
        raise ArgsError(where, "cluster: expected GkeClusterArgs (infra/cluster_args.py gke_cluster_args)")
    if not isinstance(args.get("project"), str) or not args["project"]:
        raise ArgsError(where, "project: expected the Google Cloud project ID")
    if args["cluster"].region != name:
        raise ArgsError(where, f"cluster: its region {args['cluster'].region!r} is not this component's name")
    if isinstance(serving, Mapping) and "kubeconfig" in serving:
        raise ArgsError(where, "serving.kubeconfig: leave it out; the region's own cluster provider is used")
    if isinstance(serving, Mapping) and serving.get("container_native_lb") is False:
        raise ArgsError(where, "serving.container_native_lb: leave it out; the region's load balancer needs NEGs")
    try:
        check_args(name, serving, driver_branch=driver_branch)
    except ArgsError as err:
        raise ArgsError(where, f"serving: {err.problem}") from None
