"""GPU types as data: which machine shapes carry which GPU, how many, at what price (infra/data/gpu_types.csv).

One row per machine shape. A family whose GPUs are attached to a general-purpose VM (T4 on N1) has rows with
machine_type `n1-*`: any N1 type with at most `vcpus` and `memory_gb` for that GPU count. A family with the GPUs built
in (L4 in G2) has one row per machine type, whose GPU count is fixed. The file's header names every source.

The settings layer (settings/cluster.py gpu_pool) checks gpuAcceleratorType, gpuAcceleratorCount and gpuMachineType
against it; the capacity contract (capacity/gpu_choice.py) reads the reference throughput and prices from it. A
GPU's memory is the one fact of a GPU type kept elsewhere, in contracts/gpus.py, because the model repository (below
settings/) checks against it too; GpuType.memory_bytes reads it from there.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from triton_gke.bounded_files import one_line
from triton_gke.contracts.gpus import gpu_memory_bytes
from triton_gke.contracts.naming import COMPUTE_CAPABILITY
from triton_gke.contracts.paths import DATA_DIR
from triton_gke.settings.catalogue import CatalogueError, MachineShape, price_usd_h, read_csv_table

GPU_TYPES_CSV = DATA_DIR / "gpu_types.csv"
COLUMNS = (
    "accelerator", "family", "machine_type", "gpus_per_vm", "vcpus", "memory_gb", "compute_capability", "spot",
    "quota_metric", "spot_quota_metric", "reference_rps_per_gpu", "price_region", "price_on_demand_usd_h",
    "price_spot_usd_h", "price_read",
)  # fmt: skip
# Facts of the GPU itself: every row of one accelerator must agree on them.
PER_GPU = COLUMNS[6:] + ("family",)
_COUNT = re.compile(r"[1-9][0-9]{0,2}")
_QUOTA = re.compile(r"[A-Z][A-Z0-9_]{2,63}")
_RPS = re.compile(r"[1-9][0-9]{0,7}(\.[0-9]{1,3})?")


@dataclass(frozen=True)
class MachineRule:
    """One machine shape of a GPU type: `machine_type` is a name, or FAMILY-* for attached GPUs (then vcpus and
    memory_gb are maxima for gpus_per_vm GPUs)."""

    machine_type: str
    gpus_per_vm: int
    vcpus: int
    memory_gb: int

    @property
    def attached(self) -> bool:
        return self.machine_type.endswith("-*")


@dataclass(frozen=True)
class GpuType:
    accelerator: str
    family: str
    compute_capability: str
    spot: bool
    quota_metric: str
    spot_quota_metric: str
    reference_rps_per_gpu: float
    price_region: str
    price_on_demand_usd_h: float
    price_spot_usd_h: float
    price_read: str
    rules: tuple[MachineRule, ...]

    @property
    def attached(self) -> bool:
        return all(r.attached for r in self.rules)

    @property
    def gpu_counts(self) -> tuple[int, ...]:
        return tuple(sorted({r.gpus_per_vm for r in self.rules}))

    @property
    def memory_bytes(self) -> int | None:
        """One GPU's memory, from its one home (contracts/gpus.py): the table has no column of its own for it."""
        return gpu_memory_bytes(self.accelerator)

    def quota(self, spot: bool) -> str:
        return self.spot_quota_metric if spot else self.quota_metric


def load_gpu_types(path: Path = GPU_TYPES_CSV) -> dict[str, GpuType]:
    """Accelerator name -> its GpuType; CatalogueError (one line naming the file and row) on a bad table."""
    _, rows = read_csv_table(path)
    if not rows or not set(COLUMNS) <= set(rows[0]):
        raise CatalogueError(f"{one_line(path)}: expected CSV columns {', '.join(COLUMNS)}")
    facts: dict[str, dict[str, str]] = {}
    rules: dict[str, list[MachineRule]] = {}
    for number, raw in enumerate(rows, start=1):
        where = f"{one_line(path)}: data row {number}"
        row = {key: raw[key].strip() for key in COLUMNS}
        empty = next((key for key in COLUMNS if not row[key]), None)
        if empty:
            raise CatalogueError(f"{where}: {empty}: empty")
        for key in ("gpus_per_vm", "vcpus", "memory_gb"):
            if not _COUNT.fullmatch(row[key]):
                raise CatalogueError(f"{where}: {key}: {one_line(row[key][:40])!r} is not a count (1 to 999)")
        if not COMPUTE_CAPABILITY.fullmatch(row["compute_capability"]):
            raise CatalogueError(f"{where}: compute_capability: {one_line(row['compute_capability'][:40])!r} is not "
                                 "MAJOR.MINOR (e.g. 7.5)")  # fmt: skip
        if row["spot"] not in ("yes", "no"):
            raise CatalogueError(f"{where}: spot: expected yes or no")
        for key in ("quota_metric", "spot_quota_metric"):
            if not _QUOTA.fullmatch(row[key]):
                raise CatalogueError(f"{where}: {key}: {one_line(row[key][:40])!r} is not a quota metric name")
        if not _RPS.fullmatch(row["reference_rps_per_gpu"]):
            raise CatalogueError(f"{where}: reference_rps_per_gpu: not a positive rate")
        for key in ("price_on_demand_usd_h", "price_spot_usd_h"):
            price_usd_h(row[key], f"{where}: {key}")
        name = row["accelerator"]
        machine = row["machine_type"]
        if machine.endswith("-*") and machine[:-2] != row["family"]:
            raise CatalogueError(f"{where}: machine_type {one_line(machine[:40])!r} is not {row['family']}-*")
        if not machine.endswith("-*") and not machine.startswith(f"{row['family']}-"):
            raise CatalogueError(f"{where}: machine_type {one_line(machine[:40])!r} is not of family {row['family']}")
        known = facts.setdefault(name, {key: row[key] for key in PER_GPU})
        differ = next((key for key in PER_GPU if known[key] != row[key]), None)
        if differ:
            raise CatalogueError(f"{where}: {differ}: {name} rows disagree ({known[differ]!r} vs {row[differ]!r})")
        rule = MachineRule(machine, int(row["gpus_per_vm"]), int(row["vcpus"]), int(row["memory_gb"]))
        if any(r.machine_type == machine and (r.attached is False or r.gpus_per_vm == rule.gpus_per_vm)
               for r in rules.get(name, ())):  # fmt: skip
            raise CatalogueError(f"{where}: {name} {one_line(machine[:40])} is listed twice")
        rules.setdefault(name, []).append(rule)
    table = {}
    for name, fact in facts.items():
        if len({r.attached for r in rules[name]}) > 1:
            raise CatalogueError(f"{one_line(path)}: {name}: mixes attached (FAMILY-*) and built-in machine types")
        table[name] = GpuType(
            accelerator=name,
            family=fact["family"],
            compute_capability=fact["compute_capability"],
            spot=fact["spot"] == "yes",
            quota_metric=fact["quota_metric"],
            spot_quota_metric=fact["spot_quota_metric"],
            reference_rps_per_gpu=float(fact["reference_rps_per_gpu"]),
            price_region=fact["price_region"],
            price_on_demand_usd_h=float(fact["price_on_demand_usd_h"]),
            price_spot_usd_h=float(fact["price_spot_usd_h"]),
            price_read=fact["price_read"],
            rules=tuple(rules[name]),
        )
    return table


@functools.cache
def shipped_gpu_types() -> dict[str, GpuType]:
    """The shipped table, read once per process (it is package data, not a user file)."""
    return load_gpu_types()


def short_name(accelerator: str) -> str:
    """T4 for nvidia-tesla-t4, L4 for nvidia-l4: how messages name a GPU."""
    return accelerator.rsplit("-", 1)[-1].upper()


def with_article(short: str) -> str:
    """ "a T4", "an L4": letters read with a leading vowel sound take "an"."""
    return f"{'an' if short[0] in 'AEFHILMNORSX' else 'a'} {short}"


def counts_text(counts: tuple[int, ...]) -> str:
    """(1, 2, 4) -> "1, 2 or 4"."""
    words = [str(c) for c in counts]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def machine_problem(gpu: GpuType, machine_type: str, shape: MachineShape, count: int) -> str | None:
    """Why `machine_type` (of `shape`) cannot carry `count` of `gpu`'s GPUs, in one clause; None if it can.
    `count` is one of gpu.gpu_counts (the caller checks gpuAcceleratorCount first)."""
    short = short_name(gpu.accelerator)
    if gpu.attached:
        # Attached GPUs go to the family's general-purpose types, not to the shared-core f1-micro and g1-small.
        if shape.family != gpu.family or machine_type in ("f1-micro", "g1-small"):
            family = gpu.family.upper()
            return f"{with_article(short)} attaches to {family} machine types only, e.g. {gpu.family}-standard-4"
        rule = next(r for r in gpu.rules if r.gpus_per_vm == count)
        if shape.vcpus > rule.vcpus:
            return f"{count} {short} allow at most {rule.vcpus} vCPUs per VM"
        if shape.memory_mb is not None and shape.memory_mb > rule.memory_gb * 1024:
            return f"{count} {short} allow at most {rule.memory_gb} GB of memory per VM"
        return None
    fixed = {r.machine_type: r for r in gpu.rules}
    rule = fixed.get(machine_type)
    fits = [m for m, r in fixed.items() if r.gpus_per_vm == count]
    if rule is None:
        return f"{with_article(short)} comes built into {gpu.family.upper()} types; {count} {short}: {', '.join(fits)}"
    if rule.gpus_per_vm != count:
        return (
            f"{machine_type} has {rule.gpus_per_vm} {short} built in, not gpuAcceleratorCount {count}; "
            f"{count} {short}: {', '.join(fits)}"
        )
    return None
