"""One VPC for the stack; per region a VPC-native subnet and Cloud NAT for private nodes."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

import pulumi
import pulumi_gcp as gcp

from triton_gke.settings.values import RegionSettings

PODS_RANGE = "pods"
SERVICES_RANGE = "services"


@dataclass(frozen=True)
class SubnetPlan:
    """Address ranges of one region, derived from its fixed catalogue index (never its position in the stack)."""

    nodes: IPv4Network
    pods: IPv4Network
    services: IPv4Network
    control_plane: IPv4Network

    @classmethod
    def for_region(cls, region: RegionSettings) -> SubnetPlan:
        i = region.index
        if not 0 <= i < 64:
            raise ValueError(f"region index {i} is outside the 64 address plans")
        return cls(
            nodes=IPv4Network(f"10.{i}.0.0/20"),
            services=IPv4Network(f"10.{i}.16.0/20"),
            pods=IPv4Network(f"10.{64 + i}.0.0/16"),
            control_plane=IPv4Network(f"172.16.{i}.0/28"),
        )


@dataclass(frozen=True)
class NetworkArgs:
    regions: tuple[RegionSettings, ...]


class Network(pulumi.ComponentResource):
    """A custom-mode VPC with one subnet, router and NAT per region."""

    vpc: gcp.compute.Network
    subnets: dict[str, gcp.compute.Subnetwork]
    plans: dict[str, SubnetPlan]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vpc = gcp.compute.Network(
            f"{name}-vpc",
            auto_create_subnetworks=False,
            routing_mode="GLOBAL",
            description="Triton inference clusters",
            opts=child,
        )
        self.subnets = {}
        self.plans = {}
        for region in args.regions:
            self._add_region(name, region)
        self.register_outputs({"vpc": self.vpc.self_link, "subnets": {r: s.self_link for r, s in self.subnets.items()}})

    def _add_region(self, name: str, region: RegionSettings) -> None:
        plan = SubnetPlan.for_region(region)
        child = pulumi.ResourceOptions(parent=self)
        subnet = gcp.compute.Subnetwork(
            f"{name}-{region.name}",
            region=region.name,
            network=self.vpc.id,
            ip_cidr_range=str(plan.nodes),
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE, ip_cidr_range=str(plan.pods)),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE, ip_cidr_range=str(plan.services)),
            ],
            # Nodes have no public IPs; this lets them reach Google APIs (GCS, Artifact Registry) directly.
            private_ip_google_access=True,
            opts=child,
        )
        router = gcp.compute.Router(f"{name}-{region.name}-router", region=region.name, network=self.vpc.id, opts=child)
        # NAT gives private nodes egress for public images (nvcr.io) without exposing them.
        gcp.compute.RouterNat(
            f"{name}-{region.name}-nat",
            region=region.name,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )
        self.subnets[region.name] = subnet
        self.plans[region.name] = plan
