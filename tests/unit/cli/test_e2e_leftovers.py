"""The leftover filter of `triton-gke e2e` (triton_gke/cli/e2e_leftovers.py): the stack's own resources are reported,
other stacks' and foreign ones never; and the names it knows are the names the program plans."""

from __future__ import annotations

import json

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.support.stacks import stack_settings
from triton_gke.cli.e2e_leftovers import CLUSTER_LABEL, LISTINGS, NEG_PORTS, StackNames, leftovers
from triton_gke.k8s.triton import neg_names
from triton_gke.settings.catalogue import load_regions

LISTING = {listing.kind: listing for listing in LISTINGS}
REGIONS = sorted(load_regions())
ZONE_URL = "https://www.googleapis.com/compute/v1/projects/p/zones/{}-a"

stacks = st.from_regex(r"[a-z][a-z0-9]{0,7}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
projects = st.from_regex(r"[a-z][a-z0-9-]{4,20}[a-z0-9]", fullmatch=True)
region_sets = st.lists(st.sampled_from(REGIONS), min_size=1, max_size=3, unique=True).map(tuple)
hashes = st.from_regex(r"[0-9a-f]{8}", fullmatch=True)


def items_of(names: StackNames, gke_hash: str) -> dict[str, list[dict[str, object]]]:
    """Every resource the stack creates or GKE creates for it, as its listing shows it."""
    clusters = sorted(names.clusters)
    return {
        "cluster": [{"name": c, "location": r} for c, r in zip(clusters, sorted(names.regions), strict=False)],
        "NEG": [{"name": n, "zone": ZONE_URL.format(names.regions[0])} for n in sorted(names.negs)],
        "disk": [{"name": f"pvc-{gke_hash}", "labels": {CLUSTER_LABEL: c}} for c in clusters],
        "firewall rule": [{"name": n} for n in sorted(names.firewall_rules)]
        + [{"name": f"gke-{c}-{gke_hash}-{s}"} for c in clusters for s in ("all", "vms", "master")],
        "address": [{"name": n} for n in sorted(names.addresses)],
        "bucket": [{"name": n} for n in sorted(names.buckets)],
    }


def reported(names: StackNames, items: dict[str, list[dict[str, object]]]) -> dict[str, list[str]]:
    return {kind: leftovers(LISTING[kind], names, kind_items) for kind, kind_items in items.items()}


@given(projects, stacks, region_sets, hashes)
def test_every_resource_of_the_stack_is_reported(project, stack, regions, gke_hash):
    names = StackNames(project, stack, regions)
    items = items_of(names, gke_hash)
    for kind, lines in reported(names, items).items():
        assert len(lines) == len(items[kind]), (kind, lines)


@st.composite
def stack_pairs(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    """A stack, its regions, and another stack: any, or one whose names start with the first's (dev, dev-us-west1-x)."""
    stack, regions = draw(stacks), draw(region_sets)
    longer = st.builds(
        lambda region, tail: f"{stack}-{region}{tail}", st.sampled_from(regions), st.sampled_from(["", "-x", "x"])
    )
    return stack, draw(st.one_of(stacks, longer)), regions


@given(projects, stack_pairs(), region_sets, hashes)
def test_another_stacks_resources_are_never_reported(project, pair, other_regions, gke_hash):
    stack, other, regions = pair
    assume(stack != other)
    names = StackNames(project, stack, regions)
    theirs = items_of(StackNames(project, other, other_regions), gke_hash)
    assert reported(names, theirs) == {kind: [] for kind in theirs}


@given(projects, stacks, region_sets, st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", max_size=70))
def test_foreign_names_are_never_reported(project, stack, regions, name):
    names = StackNames(project, stack, regions)
    own = names.clusters | names.negs | names.firewall_rules | names.addresses | names.buckets
    assume(name not in own and not names.gke_firewall_rule(name))
    for listing in LISTINGS:
        assert leftovers(listing, names, [{"name": name, "labels": {CLUSTER_LABEL: name}}]) == []


def test_one_line_per_leftover_names_kind_name_and_zone():
    names = StackNames("e2e-scratch-project", "dev", ("us-central1",))
    neg = {"name": "triton-dev-us-central1-http", "zone": ZONE_URL.format("us-central1")}
    assert leftovers(LISTING["NEG"], names, [neg, {"name": "k8s1-0a1b2c3d-x"}]) == [
        "NEG triton-dev-us-central1-http (us-central1-a)"
    ]


def test_neg_ports_are_the_programs(tmp_path):
    """NEG_PORTS copies k8s/triton.py neg_names' ports (the filter's module imports no Pulumi room)."""
    assert tuple(neg_names("x")) == NEG_PORTS


def test_the_names_the_filter_knows_are_the_names_prod_plans(prod_plan):
    """Every cluster, firewall rule, address, bucket and NEG of the planned prod stack (three regions, the load
    balancer) is its own to the filter: a changed name in the program (infra/, k8s/triton.py) turns this red."""
    clusters = prod_plan.of_type("gcp:container/cluster:Cluster")
    regions = tuple(cluster.inputs["location"] for cluster in clusters)
    names = StackNames(stack_settings("prod")["gcp:project"], "prod", regions)
    planned = {
        "cluster": [c.inputs["name"] for c in clusters],
        "firewall rule": [r.inputs["name"] for r in prod_plan.of_type("gcp:compute/firewall:Firewall")],
        "address": [r.inputs["name"] for r in prod_plan.of_type("gcp:compute/globalAddress:GlobalAddress")],
        "bucket": [r.inputs["name"] for r in prod_plan.of_type("gcp:storage/bucket:Bucket")],
        "NEG": [
            port["name"]
            for service in prod_plan.of_type("kubernetes:core/v1:Service")
            if "cloud.google.com/neg" in (service.inputs["metadata"].get("annotations") or {})
            for port in json.loads(service.inputs["metadata"]["annotations"]["cloud.google.com/neg"])[
                "exposed_ports"
            ].values()
        ],
    }
    assert all(planned.values()) and len(planned["NEG"]) == 2 * len(regions), planned
    for kind, planned_names in planned.items():
        items = [{"name": name} for name in planned_names]
        assert len(leftovers(LISTING[kind], names, items)) == len(items), (kind, planned_names)
