"""What `triton-gke e2e` counts as left behind: the listings it reads after `pulumi destroy`, and which of their
items are the stack's own, by the names the program gives them (never by a prefix: another stack's names may start
with this one's).

The names come from their homes: clusters infra/cluster.py (gcp_name("triton", stack, region)), the zonal NEGs
k8s/triton.py neg_names (the cluster's name, one per port; infra/region.py), the firewall rules infra/global_lb.py
and infra/cluster.py, the load balancer's address infra/global_lb.py, the model bucket contracts/naming.py.
tests/unit/cli/test_e2e_leftovers.py checks every such name in a planned stack against own_names.

What GKE creates itself for a cluster and may leave when the cluster goes:
- firewall rules named "gke-[cluster-name]-[cluster-hash]-all" (and -master, -vms, -inkubelet, -exkubelet, -ssh):
  GKE's "Automatically created firewall rules" (https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules);
  matched as gke-CLUSTER-HASH-SUFFIX with an 8-hex hash and one of those suffixes, so a longer cluster name of
  another stack never matches;
- disks (node boot disks, PersistentVolumeClaims' disks) carrying the label goog-k8s-cluster-name=CLUSTER, the
  label GKE's billing export names a cluster's resources by
  (https://cloud.google.com/kubernetes-engine/docs/how-to/cost-allocations); their names hold only a cut cluster
  name or a PV's UID, so the label alone tells whose they are.
NEGs GKE names itself (k8s1-HASH-...) belong to Services without this program's `cloud.google.com/neg` names; the
program names its NEGs (k8s/triton.py neg_names), so those names are the ones it can leave.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from triton_gke.contracts.naming import gcp_name, model_bucket_name

# GKE's own firewall rules' suffixes (the firewall-rules page above) and the 8-hex cluster hash in their names.
GKE_FIREWALL_SUFFIXES = ("all", "master", "vms", "inkubelet", "exkubelet", "ssh")
CLUSTER_HASH = "[0-9a-f]{8}"
CLUSTER_LABEL = "goog-k8s-cluster-name"
# The NEG ports k8s/triton.py neg_names names (its keys); tests/unit/cli/test_e2e_leftovers.py compares them.
NEG_PORTS = ("http", "grpc")


@dataclass(frozen=True)
class StackNames:
    """The names a stack's resources have in its project: what a listing after `destroy` must not show."""

    project: str
    stack: str
    regions: tuple[str, ...]

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(gcp_name("triton", self.stack, region) for region in self.regions)

    @property
    def negs(self) -> frozenset[str]:
        return frozenset(f"{cluster}-{port}" for cluster in self.clusters for port in NEG_PORTS)

    @property
    def firewall_rules(self) -> frozenset[str]:
        lb = (gcp_name("triton", self.stack, f"allow-lb-{region}", max_len=63) for region in self.regions)
        plane = (gcp_name("triton", self.stack, region, "control-plane", max_len=63) for region in self.regions)
        return frozenset([*lb, *plane])

    @property
    def addresses(self) -> frozenset[str]:
        return frozenset({gcp_name("triton", self.stack, "ip", max_len=63)})

    @property
    def buckets(self) -> frozenset[str]:
        return frozenset({model_bucket_name(self.project, self.stack)})

    def gke_firewall_rule(self, name: str) -> bool:
        """A firewall rule GKE made for one of the stack's clusters (gke-CLUSTER-HASH-SUFFIX)."""
        suffixes = "|".join(GKE_FIREWALL_SUFFIXES)
        return any(
            re.fullmatch(f"gke-{re.escape(cluster)}-{CLUSTER_HASH}-(?:{suffixes})", name) for cluster in self.clusters
        )


@dataclass(frozen=True)
class Listing:
    """One gcloud listing after `destroy`: its words (less --project, --format) and which items are the stack's."""

    kind: str
    words: tuple[str, ...]
    owns: Callable[[StackNames, Mapping[str, Any]], bool]
    where: Callable[[Mapping[str, Any]], str]


def _name(item: Mapping[str, Any]) -> str:
    return str(item.get("name", ""))


def _last(url: object) -> str:
    """The last part of a zone's or region's URL (the listings give them as URLs), or the text itself."""
    return str(url or "").rstrip("/").rpartition("/")[2]


def _disk_owned(names: StackNames, item: Mapping[str, Any]) -> bool:
    labels = item.get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(CLUSTER_LABEL) in names.clusters


# Each listing's reference page, in the order they run:
# https://cloud.google.com/sdk/gcloud/reference/container/clusters/list
# https://cloud.google.com/sdk/gcloud/reference/compute/network-endpoint-groups/list
# https://cloud.google.com/sdk/gcloud/reference/compute/disks/list
# https://cloud.google.com/sdk/gcloud/reference/compute/firewall-rules/list
# https://cloud.google.com/sdk/gcloud/reference/compute/addresses/list
# https://cloud.google.com/sdk/gcloud/reference/storage/buckets/list
LISTINGS: tuple[Listing, ...] = (
    Listing(
        "cluster",
        ("container", "clusters", "list"),
        lambda names, item: _name(item) in names.clusters,
        lambda item: _last(item.get("location") or item.get("zone")),
    ),
    Listing(
        "NEG",
        ("compute", "network-endpoint-groups", "list"),
        lambda names, item: _name(item) in names.negs,
        lambda item: _last(item.get("zone") or item.get("region")),
    ),
    Listing("disk", ("compute", "disks", "list"), _disk_owned, lambda item: _last(item.get("zone"))),
    Listing(
        "firewall rule",
        ("compute", "firewall-rules", "list"),
        lambda names, item: _name(item) in names.firewall_rules or names.gke_firewall_rule(_name(item)),
        lambda item: "global",
    ),
    Listing(
        "address",
        ("compute", "addresses", "list"),
        lambda names, item: _name(item) in names.addresses,
        lambda item: _last(item.get("region")) or "global",
    ),
    Listing(
        "bucket",
        ("storage", "buckets", "list"),
        lambda names, item: _name(item) in names.buckets,
        lambda item: "global",
    ),
)


def leftovers(listing: Listing, names: StackNames, items: Iterable[Any]) -> list[str]:
    """One line per item of the listing that is the stack's own: `KIND NAME (WHERE)`."""
    return [
        f"{listing.kind} {_name(item)} ({listing.where(item) or 'global'})"
        for item in items
        if isinstance(item, Mapping) and listing.owns(names, item)
    ]
