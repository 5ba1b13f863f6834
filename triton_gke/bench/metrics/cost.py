"""Cost per million inferences: the stack's list prices (infra/data, priced by settings/cost.py) over a measured or
reference RPS.

Two views per region and pricing (on-demand, spot):
- one GPU node (GPU VM + its T4s) serving `rps`: the marginal cost of capacity;
- the region at its minimum size (GKE fee, CPU pool, `gpuMinNodes` GPU nodes), each GPU node
  serving `rps` (throughput assumed linear in pods, as the reference does).

CPU-twin RPS are NOT GPU RPS: $/1M at a CPU-measured RPS only shows the arithmetic. The
reference's T4 figures (architecture.md) give the realistic comparison. Egress, disks, NAT and
load-balancer data processing are excluded from the node and region figures; the last one is
shown separately because it scales with the request size (UINT8 sends 4x fewer bytes).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from triton_gke.settings.cost import VmPrice, load_vm_prices, region_costs, usd_per_million

if TYPE_CHECKING:
    from triton_gke.settings.values import StackSettings

# ResNet-50 on one T4 at p95 <= 100 ms, from the reference tutorial ("Measure and tune performance
# of a TensorFlow inference system"); its TF-TRT variants map to this project's ORT+TensorRT ones.
REFERENCE_T4_RPS = {
    "original": 253.0,
    "trt_fp32": 381.0,
    "trt_fp16": 1072.5,
    "trt_int8": 1085.4,
    "trt_int8_bs16_count4": 2236.6,
}
# Global external Application Load Balancer, inbound data processed (public price list, 2025-2026).
LB_DATA_USD_PER_GIB = 0.008
PRICINGS = ("on-demand", "spot")


@dataclass(frozen=True)
class Pricing:
    region: str
    pricing: str  # "on-demand" | "spot" (of the GPU nodes; the CPU pool stays on-demand)
    node_usd_h: float | None  # one GPU node: VM + accelerators; None when a price is missing
    region_usd_h: float | None  # the region at minimum size
    gpu_nodes: int  # GPU nodes at minimum size
    missing: tuple[str, ...]


@dataclass(frozen=True)
class CostRow:
    variant: str
    rps_source: str  # "measured (CPU twin)" or "measured (stack)" | "reference T4"
    rps: float
    region: str
    pricing: str
    node_usd_h: float | None
    node_usd_per_1m: float | None
    region_usd_h: float | None
    region_usd_per_1m: float | None
    lb_data_usd_per_1m: float | None  # input tensors through the global LB (globalLoadBalancer: true only)


def lb_usd_per_million(bytes_per_request: int) -> float:
    return bytes_per_request * 1_000_000 / 2**30 * LB_DATA_USD_PER_GIB


def node_usd_h(
    settings: StackSettings, region: str, spot: bool, vm_prices: dict[tuple[str, str], VmPrice]
) -> float | None:
    gpu = settings.gpu_pool
    vm = vm_prices.get((gpu.machine_type, region))
    vm_h = (vm.spot if spot else vm.on_demand) if vm else None
    zones = next(r.zones for r in settings.regions if r.name == region)
    offers = [settings.gpu_catalogue.offer(gpu.accelerator_type, z) for z in zones]
    gpu_prices = [(o.spot_usd_h if spot else o.on_demand_usd_h) for o in offers if o]
    if vm_h is None or not gpu_prices:
        return None
    return vm_h + max(gpu_prices) * gpu.accelerator_count  # the dearest zone, as settings.cost does


def pricings(settings: StackSettings) -> list[Pricing]:
    """Per region of the stack, on-demand and spot GPU nodes."""
    vm_prices = load_vm_prices()
    found = []
    for pricing in PRICINGS:
        spot = pricing == "spot"
        variant = dataclasses.replace(settings, gpu_pool=dataclasses.replace(settings.gpu_pool, spot=spot))
        for region in region_costs(variant, vm_prices):
            node = node_usd_h(settings, region.region, spot, vm_prices)
            found.append(
                Pricing(region.region, pricing, node, region.min_usd_h, settings.gpu_pool.min_nodes, region.missing)
            )
    return sorted(found, key=lambda p: (p.region, PRICINGS.index(p.pricing)))


def cost_rows(
    prices: list[Pricing], measured_rps: dict[str, float | None], bytes_per_request: dict[str, int], measured_label: str
) -> list[CostRow]:
    """One row per variant x RPS source x region x pricing; sources without an RPS are skipped."""
    rows = []
    for variant, measured in measured_rps.items():
        sources = [(measured_label, measured), ("reference T4", REFERENCE_T4_RPS.get(variant))]
        lb = lb_usd_per_million(bytes_per_request[variant]) if variant in bytes_per_request else None
        for source, rps in sources:
            if not rps:
                continue
            for p in prices:
                region_rps = rps * p.gpu_nodes
                rows.append(
                    CostRow(
                        variant,
                        source,
                        rps,
                        p.region,
                        p.pricing,
                        p.node_usd_h,
                        usd_per_million(p.node_usd_h, rps),
                        p.region_usd_h,
                        usd_per_million(p.region_usd_h, region_rps),
                        lb,
                    )
                )
    return rows


def records(items: Sequence[Pricing | CostRow]) -> list[dict[str, Any]]:
    """Plain JSON-ready dicts (tuples become lists, as they come back from results.json)."""
    return [json.loads(json.dumps(dataclasses.asdict(item))) for item in items]
