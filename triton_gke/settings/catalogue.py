"""Dated catalogues shipped with the project: GCP regions, and T4 zones with prices.

Both are plain CSV files with `#` comment lines (source and date) so users can read, diff and
override them. Loading never touches the network.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from triton_gke.bounded_files import one_line, read_text_file
from triton_gke.contracts.gpus import GPU_MEMORY_BYTES, gpu_memory_bytes  # noqa: F401 (re-exported)
from triton_gke.contracts.paths import DATA_DIR

# The data stay beside the infrastructure code that deploys to those regions (infra/data/).
REGIONS_CSV = DATA_DIR / "gcp_regions.csv"
DEFAULT_GPU_CATALOGUE = DATA_DIR / "gcp_t4_zones.csv"


# Memory of one GPU by accelerator name: contracts/gpus.py (model_repo/settings.py checks variants against it too).


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


# Catalogue and price files are a few KB (gcp_t4_zones.csv ~5 KB); far more is not one, and is not read whole.
MAX_CSV_BYTES = 1024 * 1024
# A price in USD per hour as a plain decimal (0.35, 0.0035; no sign, exponent, NaN or infinity): far above any
# Compute Engine list price (the largest VMs cost tens of dollars an hour), so a typo of a few digits is refused.
MAX_USD_H = Decimal(10_000)
_PRICE = re.compile(r"(0|[1-9][0-9]{0,5})(\.[0-9]{1,9})?")


def read_csv_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(the `#` comment lines, the data rows) of a catalogue CSV, read through the one bounded reader (a regular
    UTF-8 file of at most MAX_CSV_BYTES); a row with more or fewer cells than the header, or a file that is no CSV,
    is one CatalogueError line naming the file."""
    text = read_text_file(path, MAX_CSV_BYTES, "a CSV catalogue", CatalogueError)
    lines = text.splitlines()
    comments = [line for line in lines if line.startswith("#")]
    data = [line for line in lines if line.strip() and not line.startswith("#")]
    try:
        table = list(csv.reader(data))
    except csv.Error as err:  # a field over csv's size limit, an unterminated quote...
        raise CatalogueError(f"{one_line(path)}: not a CSV catalogue ({one_line(err)})") from None
    if not table:
        return comments, []
    header = [name.strip() for name in table[0]]
    rows = []
    for number, cells in enumerate(table[1:], start=1):
        if len(cells) != len(header):
            raise CatalogueError(
                f"{one_line(path)}: data row {number} has {len(cells)} cells; the header has {len(header)}"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return comments, rows


def _data_rows(path: Path) -> list[dict[str, str]]:
    return read_csv_table(path)[1]


def price_usd_h(cell: str | None, where: str) -> float:
    """A price cell as the exact decimal it shows (a float whose repr is that decimal): a plain non-negative decimal
    of at most MAX_USD_H; NaN, infinity, a sign, an exponent or more digits are one CatalogueError line (`where`
    names the file, row and column)."""
    text = (cell or "").strip()
    if not _PRICE.fullmatch(text) or Decimal(text) > MAX_USD_H:
        raise CatalogueError(
            f"{where}: {one_line(text[:40])!r} is not a price (a plain decimal of USD per hour, 0 to {MAX_USD_H})"
        )
    return float(text)


def load_regions(path: Path = REGIONS_CSV) -> dict[str, tuple[str, ...]]:
    """Region name -> its zone names, in the file's (append-only) order."""
    return {row["region"]: tuple(f"{row['region']}-{z}" for z in row["zones"].split()) for row in _data_rows(path)}


def load_gpu_catalogue(path: Path) -> GpuCatalogue:
    comments, rows = read_csv_table(path)
    required = {"accelerator", "region", "zone", "price_on_demand_usd_h", "price_spot_usd_h"}
    if not rows or not required <= set(rows[0]):
        raise CatalogueError(f"{one_line(path)}: expected CSV columns {', '.join(sorted(required))}")
    offers = []
    seen: dict[tuple[str, str, str], int] = {}
    for number, row in enumerate(rows, start=1):
        where = f"{one_line(path)}: data row {number}"
        names = {key: row[key].strip() for key in ("accelerator", "region", "zone")}
        empty = next((key for key, value in names.items() if not value), None)
        if empty:
            raise CatalogueError(f"{where}: {empty}: empty")
        count = row.get("count", "1").strip()
        if not re.fullmatch(r"[1-9][0-9]?", count):  # GPUs per offer: Compute Engine attaches 1 to 16
            raise CatalogueError(f"{where}: count: {one_line(count[:40])!r} is not a GPU count (1 to 99)")
        # One offer per accelerator, count and zone: a repeated zone would be listed twice in a cluster's node
        # locations and its price would depend on which row wins.
        offer = (names["accelerator"], count, names["zone"])
        if offer in seen:
            raise CatalogueError(
                f"{where}: {one_line(' '.join(offer)[:120])} repeats data row {seen[offer]} (one row per zone)"
            )
        seen[offer] = number
        offers.append(
            ZonePrice(
                **names,
                on_demand_usd_h=price_usd_h(row["price_on_demand_usd_h"], f"{where}: price_on_demand_usd_h"),
                spot_usd_h=price_usd_h(row["price_spot_usd_h"], f"{where}: price_spot_usd_h"),
            )
        )
    source = next((ln for ln in comments if ln.startswith("# Source")), "")
    return GpuCatalogue(source=source.lstrip("# "), offers=tuple(offers))


# ---------------------------------------------------------------- Compute Engine machine shapes

# Machine families Compute Engine offers, by purpose ("Machine families resource and comparison guide",
# https://cloud.google.com/compute/docs/machine-resource). Accelerator-optimized families come with their own
# GPUs attached (https://cloud.google.com/compute/docs/accelerator-optimized-machines): a CPU pool on one would
# pay for GPUs nothing schedules on. Arm families (https://cloud.google.com/kubernetes-engine/docs/concepts/arm-on-gke)
# get the kubernetes.io/arch=arm64:NoSchedule taint on GKE, so the pool's amd64 system and load-test pods stay Pending.
GENERAL_FAMILIES = ("c3", "c3d", "c4", "c4d", "e2", "n1", "n2", "n2d", "n4", "n4d", "t2d")
ARM_FAMILIES = ("c4a", "n4a", "t2a")
COMPUTE_FAMILIES = ("c2", "c2d", "h3", "h4d")
MEMORY_FAMILIES = ("m1", "m2", "m3", "m4", "x4")
STORAGE_FAMILIES = ("z3",)
ACCELERATOR_FAMILIES = ("a2", "a3", "a4", "a4x", "g2", "g4")
MACHINE_FAMILIES = (
    GENERAL_FAMILIES + ARM_FAMILIES + COMPUTE_FAMILIES + MEMORY_FAMILIES + STORAGE_FAMILIES + ACCELERATOR_FAMILIES
)
MACHINE_KINDS = (
    "standard", "highmem", "highcpu", "megamem", "ultramem", "hypermem", "highgpu", "megagpu", "ultragpu", "edgegpu"
)  # fmt: skip
# Shared-core types (https://cloud.google.com/compute/docs/general-purpose-machines#sharedcore).
SHARED_CORE = {"e2-micro": 2, "e2-small": 2, "e2-medium": 2, "f1-micro": 1, "g1-small": 1}
# Predefined sizes of the two series this project uses (general-purpose machines page above):
# N1 (https://cloud.google.com/compute/docs/general-purpose-machines#n1_machines) and
# E2 (https://cloud.google.com/compute/docs/general-purpose-machines#e2_machine_types).
N1_VCPUS = {
    "standard": (1, 2, 4, 8, 16, 32, 64, 96),
    "highmem": (2, 4, 8, 16, 32, 64, 96),
    "highcpu": (2, 4, 8, 16, 32, 64, 96),
}
E2_VCPUS = {"standard": (2, 4, 8, 16, 32), "highmem": (2, 4, 8, 16), "highcpu": (2, 4, 8, 16, 32)}
# N1 memory per vCPU of the predefined kinds, MB: 3.75 GB, 6.5 GB, 0.9 GB.
N1_MB_PER_VCPU = {"standard": 3840, "highmem": 6656, "highcpu": 921.6}
# Families with custom machine types ("Create a VM with a custom machine type",
# https://cloud.google.com/compute/docs/instances/creating-instance-with-custom-machine-type).
CUSTOM_FAMILIES = ("n1", "n2", "n2d", "e2", "n4")
# N1 custom rules, same page and Google's own helper (compute-custom-machine-type-helper-class sample:
# cpuSeriesN1Limit = cores 1 or 2..96 even, 922..6656 MB per core, extended memory up to 624 GB):
# 1 vCPU or an even count up to 96; memory a multiple of 256 MB, 0.9 to 6.5 GB per vCPU unless the
# type ends in -ext (extended memory).
N1_CUSTOM_MAX_VCPUS = 96
N1_CUSTOM_MB_PER_VCPU = (922, 6656)
N1_EXTENDED_MAX_MB = 624 * 1024
CUSTOM_MEMORY_STEP_MB = 256

_PREDEFINED = re.compile(
    r"(?P<family>[a-z][a-z0-9]*)-(?P<kind>[a-z]+)-(?P<vcpus>[1-9][0-9]*)(?P<gpus>g)?(?P<suffix>(-[a-z0-9]+)*)"
)
# Counts are plain ASCII numbers without leading zeros, as Compute Engine names them.
_CUSTOM = re.compile(r"(?:(?P<family>[a-z][a-z0-9]*)-)?custom-(?P<vcpus>[1-9][0-9]*)-(?P<mb>[1-9][0-9]*)(?P<ext>-ext)?")


@dataclass(frozen=True)
class MachineShape:
    family: str
    vcpus: int
    memory_mb: float | None  # None where this catalogue does not know the family's memory per vCPU

    @property
    def accelerator_optimized(self) -> bool:
        return self.family in ACCELERATOR_FAMILIES

    @property
    def arm(self) -> bool:
        return self.family in ARM_FAMILIES


def machine_shape(name: str) -> MachineShape:
    """The shape of a Compute Engine machine type name; ValueError says in one clause why it is not one."""
    if name in SHARED_CORE:
        return MachineShape(name.split("-")[0], SHARED_CORE[name], None)
    custom = _CUSTOM.fullmatch(name)
    if custom:
        return _custom_shape(custom.group("family") or "n1", int(custom.group("vcpus")), int(custom.group("mb")),
                             extended=bool(custom.group("ext")))  # fmt: skip
    match = _PREDEFINED.fullmatch(name)
    if not match:
        raise ValueError("not a machine type name (FAMILY-KIND-VCPUS, e.g. n1-standard-8, or n1-custom-VCPUS-MB)")
    family, kind, vcpus = match.group("family"), match.group("kind"), int(match.group("vcpus"))
    if family not in MACHINE_FAMILIES:
        raise ValueError(f"unknown machine family {family!r}; known: {', '.join(MACHINE_FAMILIES)}")
    if kind not in MACHINE_KINDS:
        raise ValueError(f"unknown machine kind {kind!r}; known: {', '.join(MACHINE_KINDS)}")
    if match.group("gpus"):
        # a2-highgpu-1g, a3-highgpu-8g: accelerator-optimized types named by GPU count, their vCPUs fixed by it.
        if family not in ACCELERATOR_FAMILIES or vcpus < 1:
            raise ValueError("only accelerator-optimized types are named by GPU count (e.g. a2-highgpu-1g)")
        return MachineShape(family, 0, None)
    sizes = {"n1": N1_VCPUS, "e2": E2_VCPUS}.get(family)
    if sizes is not None:
        if match.group("suffix") or vcpus not in sizes.get(kind, ()):
            allowed = "; ".join(f"{family}-{k}-{'/'.join(map(str, v))}" for k, v in sizes.items())
            raise ValueError(f"not a predefined {family.upper()} type ({allowed})")
    elif vcpus < 1:
        raise ValueError("a machine type has at least 1 vCPU")
    memory = vcpus * N1_MB_PER_VCPU[kind] if family == "n1" else None
    return MachineShape(family, vcpus, memory)


def _custom_shape(family: str, vcpus: int, memory_mb: int, extended: bool) -> MachineShape:
    if family not in CUSTOM_FAMILIES:
        raise ValueError(f"{family.upper()} has no custom machine types; custom families: {', '.join(CUSTOM_FAMILIES)}")
    if family != "n1":
        if vcpus < 1 or memory_mb < 1 or memory_mb % CUSTOM_MEMORY_STEP_MB:
            raise ValueError(f"a custom type has >= 1 vCPU and memory in multiples of {CUSTOM_MEMORY_STEP_MB} MB")
        return MachineShape(family, vcpus, memory_mb)
    if not (vcpus == 1 or (vcpus % 2 == 0 and 2 <= vcpus <= N1_CUSTOM_MAX_VCPUS)):
        raise ValueError(f"an N1 custom type has 1 vCPU or an even number up to {N1_CUSTOM_MAX_VCPUS}")
    if memory_mb % CUSTOM_MEMORY_STEP_MB:
        raise ValueError(f"custom memory must be a multiple of {CUSTOM_MEMORY_STEP_MB} MB")
    low, high = (vcpus * N1_CUSTOM_MB_PER_VCPU[0], vcpus * N1_CUSTOM_MB_PER_VCPU[1])
    if memory_mb < low or (memory_mb > high and not extended):
        raise ValueError(
            f"N1 custom memory is 0.9 to 6.5 GB per vCPU ({low:g} to {high:g} MB for {vcpus}), or more with -ext"
        )
    if extended and memory_mb > N1_EXTENDED_MAX_MB:
        raise ValueError(f"N1 extended memory reaches at most {N1_EXTENDED_MAX_MB} MB")
    return MachineShape(family, vcpus, memory_mb)


# ---------------------------------------------------------------- GCS bucket locations

# "Bucket locations" (https://cloud.google.com/storage/docs/locations): multi-regions and the predefined
# dual-regions. A configurable dual-region needs custom placement, which this project does not set.
MULTI_REGIONS = {"US": ("us-",), "EU": ("europe-",), "ASIA": ("asia-",)}
# EU holds data in EU member states only: London (europe-west2) and Zurich (europe-west6) are outside it.
EU_OUTSIDE = ("europe-west2", "europe-west6")
DUAL_REGIONS = {
    "ASIA1": ("asia-northeast1", "asia-northeast2"),
    "EUR4": ("europe-north1", "europe-west4"),
    "EUR5": ("europe-west1", "europe-west2"),
    "EUR7": ("europe-west10", "europe-west3"),
    "EUR8": ("europe-west3", "europe-west6"),
    "NAM4": ("us-central1", "us-east1"),
}


def bucket_location_regions(location: str, known_regions: tuple[str, ...]) -> tuple[str, ...]:
    """The Compute regions a GCS location keeps data in (upper or lower case); ValueError if it is no location."""
    name = location.upper()
    if name in DUAL_REGIONS:
        return DUAL_REGIONS[name]
    if name in MULTI_REGIONS:
        prefixes = MULTI_REGIONS[name]
        outside = EU_OUTSIDE if name == "EU" else ()
        return tuple(r for r in known_regions if r.startswith(prefixes) and r not in outside)
    if location.lower() in known_regions:
        return (location.lower(),)
    raise ValueError(
        f"not a GCS location: a region, a predefined dual-region ({', '.join(DUAL_REGIONS)}) "
        f"or a multi-region ({', '.join(MULTI_REGIONS)})"
    )


# ---------------------------------------------------------------- GKE-installed NVIDIA drivers

GKE_GPU_DRIVERS_CSV = DATA_DIR / "gke_gpu_drivers.csv"


def load_gke_gpu_drivers(path: Path = GKE_GPU_DRIVERS_CSV) -> dict[int, dict[str, int]]:
    """Kubernetes minor -> {"DEFAULT": branch, "LATEST": branch} of the driver GKE installs on COS."""
    table = {}
    for row in _data_rows(path):
        table[int(row["minor"])] = {"DEFAULT": int(row["default_branch"]), "LATEST": int(row["latest_branch"])}
    return table


def gke_driver_branch(minor: int, choice: str, path: Path = GKE_GPU_DRIVERS_CSV) -> int:
    """Driver branch GKE installs for `choice` on a cluster of 1.`minor`; newer minors than the table keep its last row
    (GKE only moves drivers forward), older ones its first."""
    table = load_gke_gpu_drivers(path)
    nearest = min(max(minor, min(table)), max(table))
    return table[nearest][choice]
