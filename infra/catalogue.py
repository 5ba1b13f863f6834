"""Dated catalogues shipped with the project: GCP regions, and T4 zones with prices.

Both are plain CSV files with `#` comment lines (source and date) so users can read, diff and
override them. Loading never touches the network.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
REGIONS_CSV = DATA_DIR / "gcp_regions.csv"
DEFAULT_GPU_CATALOGUE = DATA_DIR / "gcp_t4_zones.csv"


class CatalogueError(ValueError):
    """A catalogue file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class ZonePrice:
    """One accelerator offer in one zone, USD per GPU-hour (the VM is billed separately)."""

    accelerator: str
    region: str
    zone: str
    on_demand_usd_h: float
    spot_usd_h: float


@dataclass(frozen=True)
class GpuCatalogue:
    source: str
    offers: tuple[ZonePrice, ...]

    @property
    def accelerators(self) -> tuple[str, ...]:
        return tuple(sorted({o.accelerator for o in self.offers}))

    def regions_with(self, accelerator: str) -> tuple[str, ...]:
        return tuple(sorted({o.region for o in self.offers if o.accelerator == accelerator}))

    def zones_with(self, accelerator: str, region: str) -> tuple[str, ...]:
        return tuple(sorted(o.zone for o in self.offers if o.accelerator == accelerator and o.region == region))

    def offer(self, accelerator: str, zone: str) -> ZonePrice | None:
        return next((o for o in self.offers if o.accelerator == accelerator and o.zone == zone), None)


def _data_rows(path: Path) -> list[dict[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise CatalogueError(f"{path}: cannot read ({err.strerror})") from None
    return list(csv.DictReader(line for line in lines if line.strip() and not line.startswith("#")))


def load_regions(path: Path = REGIONS_CSV) -> dict[str, tuple[str, ...]]:
    """Region name -> its zone names, in the file's (append-only) order."""
    return {row["region"]: tuple(f"{row['region']}-{z}" for z in row["zones"].split()) for row in _data_rows(path)}


def load_gpu_catalogue(path: Path) -> GpuCatalogue:
    rows = _data_rows(path)
    required = {"accelerator", "region", "zone", "price_on_demand_usd_h", "price_spot_usd_h"}
    if not rows or not required <= set(rows[0]):
        raise CatalogueError(f"{path}: expected CSV columns {', '.join(sorted(required))}")
    offers = []
    for number, row in enumerate(rows, start=1):
        try:
            offers.append(
                ZonePrice(
                    accelerator=row["accelerator"].strip(),
                    region=row["region"].strip(),
                    zone=row["zone"].strip(),
                    on_demand_usd_h=float(row["price_on_demand_usd_h"]),
                    spot_usd_h=float(row["price_spot_usd_h"]),
                )
            )
        except (TypeError, ValueError):
            raise CatalogueError(f"{path}: data row {number} has a missing or non-numeric price") from None
    source = next((ln for ln in path.read_text().splitlines() if ln.startswith("# Source")), "")
    return GpuCatalogue(source=source.lstrip("# "), offers=tuple(offers))
