"""Hourly cost estimate of a stack from the shipped price catalogues (list prices; egress, disks and LB data extra).

Here, beside the catalogues it reads, not in infra/: the program's estimatedCost output (infra/system.py), the plan
view (offline/plan_view.py) and the bench's $/1M figures (bench/metrics/cost.py) all price with it, and the bench
imports no Pulumi room (.importlinter, bench-no-pulumi).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from triton_gke.bounded_files import one_line
from triton_gke.contracts.paths import DATA_DIR
from triton_gke.settings.catalogue import CatalogueError, GpuCatalogue, price_usd_h, read_csv_table
from triton_gke.settings.values import StackSettings

VM_PRICES = DATA_DIR / "gcp_vm_prices.csv"
GKE_CLUSTER_USD_H = 0.10
MILLS = Decimal("0.001")  # cost figures are rounded to a tenth of a cent per hour
FORWARDING_RULE_USD_H = 0.025


@dataclass(frozen=True)
class VmPrice:
    on_demand: float
    spot: float | None


def load_vm_prices(path: Path = VM_PRICES) -> dict[tuple[str, str], VmPrice]:
    """(machine type, region) -> its list prices, read through the one bounded reader (settings/catalogue.py): a
    regular UTF-8 CSV file; every price a plain non-negative decimal (no NaN, infinity or negative number) or, for
    Spot, empty (unknown). Anything else is one CatalogueError line naming the file, the row and the column."""
    _, rows = read_csv_table(path)
    required = {"machine_type", "region", "price_on_demand_usd_h", "price_spot_usd_h"}
    if rows and not required <= set(rows[0]):
        raise CatalogueError(f"{one_line(path)}: expected CSV columns {', '.join(sorted(required))}")
    prices = {}
    for number, row in enumerate(rows, start=1):
        where = f"{one_line(path)}: data row {number}"
        key = (row["machine_type"].strip(), row["region"].strip())
        if not all(key):
            raise CatalogueError(f"{where}: machine_type and region: expected both")
        spot = row["price_spot_usd_h"].strip()
        prices[key] = VmPrice(
            price_usd_h(row["price_on_demand_usd_h"], f"{where}: price_on_demand_usd_h"),
            price_usd_h(spot, f"{where}: price_spot_usd_h") if spot else None,
        )
    return prices


@dataclass(frozen=True)
class RegionCost:
    region: str
    min_usd_h: float | None
    max_usd_h: float | None
    missing: tuple[str, ...]  # prices the catalogues lack; the estimate is None when any is missing


def _gpu_price(catalogue: GpuCatalogue, accelerator: str, zones: tuple[str, ...], spot: bool) -> Decimal | None:
    offers = [catalogue.offer(accelerator, z) for z in zones]
    prices = [_usd(o.spot_usd_h if spot else o.on_demand_usd_h, f"{accelerator} in {o.zone}") for o in offers if o]
    return max(prices) if prices else None


def _usd(price: float, what: str) -> Decimal:
    """A price as the exact decimal its file shows (0.35, not the binary float nearest to it), so sums and
    rounding carry no binary round-off; NaN, infinity or a negative price (a VmPrice or catalogue built by hand) is
    one CatalogueError line, never a figure of the cost table or the estimatedCost output."""
    if isinstance(price, bool) or not isinstance(price, int | float | Decimal):
        raise CatalogueError(f"price of {what}: {price!r} is not a number")
    exact = Decimal(repr(price)) if isinstance(price, float) else Decimal(price)
    if not exact.is_finite() or exact < 0:
        raise CatalogueError(f"price of {what}: {price!r} is not a finite price >= 0")
    return exact


def _rounded(usd_h: Decimal) -> float:
    """USD per hour to the tenth of a cent, rounded half-even on the exact decimal; the float whose repr it is."""
    return float(usd_h.quantize(MILLS, rounding=ROUND_HALF_EVEN))


def _hourly(nodes_usd_h: Decimal) -> float:
    return _rounded(_usd(GKE_CLUSTER_USD_H, "the GKE cluster fee") + nodes_usd_h)


def region_costs(settings: StackSettings, vm_prices: dict[tuple[str, str], VmPrice] | None = None) -> list[RegionCost]:
    vm_prices = vm_prices if vm_prices is not None else load_vm_prices()
    gpu, cpu = settings.gpu_pool, settings.cpu_pool
    kind = "spot" if gpu.spot else "on-demand"
    costs = []
    for region in settings.regions:
        gpu_vm = vm_prices.get((gpu.machine_type, region.name))
        gpu_vm_h = (gpu_vm.spot if gpu.spot else gpu_vm.on_demand) if gpu_vm else None
        gpu_vm_h = None if gpu_vm_h is None else _usd(gpu_vm_h, f"{gpu.machine_type} in {region.name}")
        cpu_vm = vm_prices.get((cpu.machine_type, region.name))
        cpu_h = None if cpu_vm is None else _usd(cpu_vm.on_demand, f"{cpu.machine_type} in {region.name}")
        t4_h = _gpu_price(settings.gpu_catalogue, gpu.accelerator_type, region.zones, gpu.spot)
        missing = tuple(
            what
            for what, price in (
                (f"{gpu.machine_type} {kind} in {region.name}", gpu_vm_h),
                (f"{cpu.machine_type} on-demand in {region.name}", cpu_h),
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
                _hourly(gpu.min_nodes * gpu_node_h + cpu.min_nodes * cpu_h),
                _hourly(gpu.max_nodes * gpu_node_h + cpu.max_nodes * cpu_h),
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
    lb_exact = _usd(lb_h, "the forwarding rules")
    return {
        "perRegionUsdPerHour": {r.region: {"min": r.min_usd_h, "max": r.max_usd_h} for r in regions},
        "loadBalancerUsdPerHour": lb_h,
        "totalUsdPerHour": {
            "min": _rounded(sum((_usd(r.min_usd_h, r.region) for r in regions), lb_exact)) if known else None,
            "max": _rounded(sum((_usd(r.max_usd_h, r.region) for r in regions), lb_exact)) if known else None,
        },
        "missingPrices": [m for r in regions for m in r.missing],
        "note": "List prices from infra/data; excludes egress, disks, NAT and load-balancer data processing.",
    }
