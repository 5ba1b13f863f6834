"""Hourly cost estimate of a stack from the shipped price catalogues (list prices; egress, disks and LB data extra)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from settings.catalogue import DATA_DIR, GpuCatalogue
from settings.values import StackSettings

VM_PRICES = DATA_DIR / "gcp_vm_prices.csv"
GKE_CLUSTER_USD_H = 0.10
FORWARDING_RULE_USD_H = 0.025


@dataclass(frozen=True)
class VmPrice:
    on_demand: float
    spot: float | None


def load_vm_prices(path: Path = VM_PRICES) -> dict[tuple[str, str], VmPrice]:
    rows = csv.DictReader(line for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {
        (r["machine_type"], r["region"]): VmPrice(
            float(r["price_on_demand_usd_h"]), float(r["price_spot_usd_h"]) if r["price_spot_usd_h"] else None
        )
        for r in rows
    }


@dataclass(frozen=True)
class RegionCost:
    region: str
    min_usd_h: float | None
    max_usd_h: float | None
    missing: tuple[str, ...]  # prices the catalogues lack; the estimate is None when any is missing


def _gpu_price(catalogue: GpuCatalogue, accelerator: str, zones: tuple[str, ...], spot: bool) -> float | None:
    offers = [catalogue.offer(accelerator, z) for z in zones]
    prices = [(o.spot_usd_h if spot else o.on_demand_usd_h) for o in offers if o]
    return max(prices) if prices else None


def _hourly(nodes_usd_h: float) -> float:
    return round(GKE_CLUSTER_USD_H + nodes_usd_h, 3)


def region_costs(settings: StackSettings, vm_prices: dict[tuple[str, str], VmPrice] | None = None) -> list[RegionCost]:
    vm_prices = vm_prices if vm_prices is not None else load_vm_prices()
    gpu, cpu = settings.gpu_pool, settings.cpu_pool
    kind = "spot" if gpu.spot else "on-demand"
    costs = []
    for region in settings.regions:
        gpu_vm = vm_prices.get((gpu.machine_type, region.name))
        gpu_vm_h = (gpu_vm.spot if gpu.spot else gpu_vm.on_demand) if gpu_vm else None
        cpu_vm = vm_prices.get((cpu.machine_type, region.name))
        t4_h = _gpu_price(settings.gpu_catalogue, gpu.accelerator_type, region.zones, gpu.spot)
        missing = tuple(
            what
            for what, price in (
                (f"{gpu.machine_type} {kind} in {region.name}", gpu_vm_h),
                (f"{cpu.machine_type} on-demand in {region.name}", cpu_vm),
                (f"{gpu.accelerator_type} {kind} in {region.name}", t4_h),
            )
            if price is None
        )
        if missing:
            costs.append(RegionCost(region.name, None, None, missing))
            continue
        gpu_node_h = gpu_vm_h + t4_h * gpu.accelerator_count
        costs.append(
            RegionCost(
                region.name,
                _hourly(gpu.min_nodes * gpu_node_h + cpu.min_nodes * cpu_vm.on_demand),
                _hourly(gpu.max_nodes * gpu_node_h + cpu.max_nodes * cpu_vm.on_demand),
                (),
            )
        )
    return costs


def usd_per_million(usd_h: float | None, rps: float | None) -> float | None:
    """Dollars per million requests at `rps` sustained for an hour (None without a price or a rate)."""
    if usd_h is None or not rps or rps <= 0:
        return None
    return usd_h / (rps * 3600) * 1_000_000


def stack_cost_summary(settings: StackSettings) -> dict[str, object]:
    """The cost output: per region and in total, at the pools' minimum and maximum sizes."""
    regions = region_costs(settings)
    lb_h = (
        FORWARDING_RULE_USD_H * (2 if settings.load_balancer.domain else 1) if settings.load_balancer.enabled else 0.0
    )
    known = all(r.min_usd_h is not None for r in regions)
    return {
        "perRegionUsdPerHour": {r.region: {"min": r.min_usd_h, "max": r.max_usd_h} for r in regions},
        "loadBalancerUsdPerHour": lb_h,
        "totalUsdPerHour": {
            "min": round(sum(r.min_usd_h for r in regions) + lb_h, 3) if known else None,
            "max": round(sum(r.max_usd_h for r in regions) + lb_h, 3) if known else None,
        },
        "missingPrices": [m for r in regions for m in r.missing],
        "note": "List prices from infra/data; excludes egress, disks, NAT and load-balancer data processing.",
    }
