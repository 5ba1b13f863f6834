"""triton-gke: Pulumi components that serve NVIDIA Triton on GKE with T4 GPUs.

Installed, every room of the repository is a subpackage (`triton_gke.infra`, `triton_gke.k8s`, ...). The public
components are importable from here; they load on first use, so the command line does not pay for Pulumi's SDKs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


def _installed_version() -> str:
    """The installed distribution's version: pyproject.toml's static `version` when it was installed (an editable
    install keeps it until `make setup` installs again); "0+unknown" for a tree used without installing it. Read on
    first use of `__version__` (__getattr__ below): importing importlib.metadata costs every command ~60 ms at
    start."""
    import importlib.metadata

    try:
        return importlib.metadata.version("triton-gke")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


# Public name -> module that defines it. Three levels of composition: TritonOnCluster (Triton onto an existing GKE
# cluster), TritonGkeRegion (a region's cluster, serving and NEGs), TritonGkeSystem (every region from one settings
# object); the building blocks below them stay public too.
_PUBLIC: dict[str, str] = {
    "GkeCluster": "triton_gke.infra.cluster",
    "GkeClusterArgs": "triton_gke.infra.cluster",
    "GlobalLoadBalancer": "triton_gke.infra.global_lb",
    "GlobalLoadBalancerArgs": "triton_gke.infra.global_lb",
    "ModelStore": "triton_gke.infra.model_store",
    "ModelStoreArgs": "triton_gke.infra.model_store",
    "Network": "triton_gke.infra.network",
    "NetworkArgs": "triton_gke.infra.network",
    "ClusterWiring": "triton_gke.k8s.on_cluster",
    "TritonGkeRegion": "triton_gke.infra.region",
    "TritonGkeRegionArgs": "triton_gke.infra.region",
    "TritonGkeSystem": "triton_gke.infra.system",
    "TritonGkeSystemArgs": "triton_gke.infra.system",
    "TritonOnCluster": "triton_gke.k8s.on_cluster",
    "TritonOnClusterArgs": "triton_gke.k8s.on_cluster",
    "TritonServing": "triton_gke.k8s.triton",
    "TritonServingArgs": "triton_gke.k8s.triton",
}

__all__ = [
    "__version__",
    "ClusterWiring",
    "GkeCluster",
    "GkeClusterArgs",
    "GlobalLoadBalancer",
    "GlobalLoadBalancerArgs",
    "ModelStore",
    "ModelStoreArgs",
    "Network",
    "NetworkArgs",
    "TritonGkeRegion",
    "TritonGkeRegionArgs",
    "TritonGkeSystem",
    "TritonGkeSystemArgs",
    "TritonOnCluster",
    "TritonOnClusterArgs",
    "TritonServing",
    "TritonServingArgs",
]

if TYPE_CHECKING:  # the same names, spelled out for editors and type checkers, which do not run __getattr__
    __version__: str
    from triton_gke.infra.cluster import GkeCluster, GkeClusterArgs
    from triton_gke.infra.global_lb import GlobalLoadBalancer, GlobalLoadBalancerArgs
    from triton_gke.infra.model_store import ModelStore, ModelStoreArgs
    from triton_gke.infra.network import Network, NetworkArgs
    from triton_gke.infra.region import TritonGkeRegion, TritonGkeRegionArgs
    from triton_gke.infra.system import TritonGkeSystem, TritonGkeSystemArgs
    from triton_gke.k8s.on_cluster import ClusterWiring, TritonOnCluster, TritonOnClusterArgs
    from triton_gke.k8s.triton import TritonServing, TritonServingArgs


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _installed_version()
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'triton_gke' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
