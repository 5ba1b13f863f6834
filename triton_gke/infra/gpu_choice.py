"""The cheaper GPU type for one region and target rate, from the shipped tables (capacity/gpu_choice.py does the sums).

    .venv/bin/python -m triton_gke.infra.gpu_choice --region us-central1 --target-rps 20000 [--spot] [--headroom 25]

Per GPU type offered in the region (infra/data/gcp_t4_zones.csv): its machine type (MACHINES below, one of
infra/data/gpu_types.csv), its reference rate per GPU (gpu_types.csv reference_rps_per_gpu: MLPerf ResNet-50 INT8
Server, a ratio between GPU types rather than what this project's Triton serves at its SLO), the GPU's price in the
region (the lowest of its zones, as settings/cost.py prices a pool) and the VM's (infra/data/gcp_vm_prices.csv).
"""

from __future__ import annotations

import sys

from triton_gke.capacity.gpu_choice import Costed, GpuOption, arithmetic, as_fraction, choose
from triton_gke.one_line import OneLineParser
from triton_gke.settings.catalogue import DEFAULT_GPU_CATALOGUE, GpuCatalogue, load_gpu_catalogue
from triton_gke.settings.cost import load_vm_prices
from triton_gke.settings.gpu_types import GpuType, shipped_gpu_types

# The node each GPU type is compared on: the project's default T4 node (Pulumi.yaml gpuMachineType) and the G2 type
# whose VM price the catalogue holds.
MACHINES = {"nvidia-tesla-t4": "n1-standard-4", "nvidia-l4": "g2-standard-8"}


def region_options(
    region: str,
    spot: bool,
    catalogue: GpuCatalogue | None = None,
    gpu_types: dict[str, GpuType] | None = None,
    machines: dict[str, str] | None = None,
) -> list[GpuOption]:
    catalogue = load_gpu_catalogue(DEFAULT_GPU_CATALOGUE) if catalogue is None else catalogue
    gpu_types = shipped_gpu_types() if gpu_types is None else gpu_types
    machines = MACHINES if machines is None else machines
    vm_prices = load_vm_prices()
    options = []
    for name, gpu in gpu_types.items():
        offers = [o for o in catalogue.offers if o.accelerator == name and o.region == region]
        if not offers or name not in machines:
            continue
        machine = machines[name]
        rule = next((r for r in gpu.rules if r.machine_type in (machine, f"{gpu.family}-*")), None)
        if rule is None:
            raise ValueError(f"{machine} carries no {name} (infra/data/gpu_types.csv)")
        price = min(o.spot_usd_h if spot else o.on_demand_usd_h for o in offers)
        vm = vm_prices.get((machine, region))
        vm_h = None if vm is None else (vm.spot if spot else vm.on_demand)
        options.append(
            GpuOption(
                accelerator=name,
                machine_type=machine,
                gpus_per_node=1 if rule.machine_type.endswith("-*") else rule.gpus_per_vm,
                rps_per_gpu=as_fraction(gpu.reference_rps_per_gpu),
                gpu_usd_h=as_fraction(price),
                vm_usd_h=None if vm_h is None else as_fraction(vm_h),
                rate_source="MLPerf ResNet-50 INT8 Server per GPU, infra/data/gpu_types.csv",
            )
        )
    return options


def choose_for_region(
    region: str, target_rps: float, spot: bool = False, headroom_percent: int = 0
) -> tuple[Costed, list[str]]:
    options = region_options(region, spot)
    if not options:
        raise ValueError(
            f"no GPU type of infra/data/gpu_types.csv is offered in {region} (infra/data/gcp_t4_zones.csv)"
        )
    target = as_fraction(target_rps)
    best, costed = choose(options, target, headroom_percent)
    kind = "Spot" if spot else "on-demand"
    header = f"{region}, {float(target):.10g} req/s, {kind}, {headroom_percent} % headroom:"
    return best, [header, *("  " + line for line in arithmetic(costed, best, target, headroom_percent))]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m triton_gke.infra.gpu_choice", description=__doc__.splitlines()[0])
    parser.add_argument("--region", required=True)
    parser.add_argument("--target-rps", type=float, required=True)
    parser.add_argument("--spot", action="store_true")
    parser.add_argument("--headroom", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        _, lines = choose_for_region(args.region, args.target_rps, args.spot, args.headroom)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
