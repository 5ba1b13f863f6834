"""Cluster and node pools: regions and zones (GPU catalogue), GKE version, CPU and GPU pools (T4, L4) and limits."""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Mapping

from triton_gke.contracts.gke_limits import MAX_NODES_PER_CLUSTER, MAX_NODES_PER_POOL_ZONE
from triton_gke.contracts.paths import project_dir
from triton_gke.settings import catalogue, gpu_types, versions
from triton_gke.settings.catalogue import CatalogueError, GpuCatalogue
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader, show
from triton_gke.settings.source_ranges import cidr_ranges
from triton_gke.settings.values import (
    ClusterSettings,
    CpuPoolSettings,
    GpuPoolSettings,
    MaintenanceSettings,
    RegionSettings,
)

# GKE's release channels (the provider's release_channel.channel values, less UNSPECIFIED: every cluster of this program
# is enrolled in one, so kubernetesVersion is a floor under it); EXTENDED and its sources: settings/versions.py.
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", versions.EXTENDED_CHANNEL)
DRIVER_VERSIONS = ("DEFAULT", "LATEST", "INSTALLATION_DISABLED")
# kubernetes-validate ships schemas for these minors; a cluster outside them cannot be checked.
KUBERNETES_MINORS = range(25, 38)
# Which machine types carry which GPUs, and how many: infra/data/gpu_types.csv (settings/gpu_types.py), one row per
# shape with its source. T4 on N1 (Google's "NVIDIA T4 GPUs" table, https://cloud.google.com/compute/docs/gpus#t4-gpus:
# 1 or 2 GPUs 1-48 vCPUs and 1-312 GB, 4 GPUs 1-96 vCPUs and 1-624 GB; one T4 allows 48 vCPUs, not 24); L4 built into
# G2 types with a fixed GPU count.
# GKE's node limits: contracts/gke_limits.py, shared with the component's replica bounds.
# Persistent Disk sizes, GB: pd-balanced (node boot disks and the standard-rwo class behind Prometheus' volume)
# from 10 GB to 64 TiB ("Persistent Disk" limits, https://cloud.google.com/compute/docs/disks/persistent-disks).
DISK_MIN_GB = 10
DISK_MAX_GB = 65536


def check_provider_location(config: Mapping[str, str], regions: tuple[RegionSettings, ...]) -> None:
    """gcp:region and gcp:zone, the gcp provider's defaults for resources that name no region or zone.

    This program names one for every regional and zonal resource, from triton-gke:regions and triton-gke:zones
    (resources without one, like the VPC, firewalls and the global load balancer, are global), so the defaults
    place nothing. A default outside the stack's regions is still refused: it says the user meant to deploy
    elsewhere, which would silently not happen; one of the stack's own regions (or its zones) is harmless.
    """
    names = [r.name for r in regions]
    known = catalogue.load_regions()
    region, zone = config.get("gcp:region"), config.get("gcp:zone")
    if region is not None and region not in names:
        close = difflib.get_close_matches(region, names, n=1) or difflib.get_close_matches(region, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"gcp:region: {show(region)} is not valid{hint}; this program deploys to triton-gke:regions "
            f"({', '.join(names)}): set the regions there, and gcp:region to one of them or not at all"
        )
    zones = [z for r in names for z in known[r]]
    if zone is not None and zone not in zones:
        close = difflib.get_close_matches(zone, zones, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"gcp:zone: {show(zone)} is not valid{hint}; expected a zone of the stack's regions "
            f"({', '.join(names)}): set the zones in triton-gke:zones, and gcp:zone to one of them or not at all"
        )


def gpu_catalogue(reader: Reader) -> GpuCatalogue:
    override = reader.path("gpuCatalogue")
    path = (project_dir() / override) if override else catalogue.DEFAULT_GPU_CATALOGUE
    try:
        return catalogue.load_gpu_catalogue(path)
    except CatalogueError as err:
        raise ConfigError(f"{reader.full('gpuCatalogue')}: {err}") from None


def regions(reader: Reader, gpu_catalogue: GpuCatalogue, accelerator: str) -> tuple[RegionSettings, ...]:
    known = catalogue.load_regions()
    names = reader.strings("regions")
    if not names:
        raise reader.fail("regions", [], "list at least one region")
    zones = reader.strings("zones")
    with_gpu = gpu_catalogue.regions_with(accelerator)
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see infra/data/gcp_regions.csv"
            raise reader.fail("regions", name, f"unknown GCP region; {hint}")
        if name not in with_gpu:
            raise reader.fail(
                "regions",
                name,
                f"it has no {accelerator} zone in the GPU catalogue; regions with one: {', '.join(with_gpu)}",
            )
        if names.count(name) > 1:
            raise reader.fail("regions", name, "each region may be listed once")
    for zone in zones:
        _check_zone(reader, zone, names, known, gpu_catalogue, accelerator)
        if zones.count(zone) > 1:
            raise reader.fail("zones", zone, "each zone may be listed once")
    return tuple(
        RegionSettings(
            name=name,
            zones=tuple(z for z in zones if z.startswith(f"{name}-"))
            or gpu_catalogue.zones_with(accelerator, name)[:3],
            index=list(known).index(name),
        )
        for name in names
    )


def _check_zone(
    reader: Reader,
    zone: str,
    regions: tuple[str, ...],
    known: dict[str, tuple[str, ...]],
    gpu_catalogue: GpuCatalogue,
    accelerator: str,
) -> None:
    region = next((r for r in regions if zone.startswith(f"{r}-")), None)
    if region is None or zone not in known[region]:
        raise reader.fail("zones", zone, f"not a zone of the stack's regions ({', '.join(regions)})")
    if gpu_catalogue.offer(accelerator, zone) is None:
        in_region = gpu_catalogue.zones_with(accelerator, region)
        raise reader.fail("zones", zone, f"it has no {accelerator}; {region} zones with one: {', '.join(in_region)}")


DEFAULT_MAINTENANCE = MaintenanceSettings()


def cluster(
    reader: Reader, today: datetime.date, maintenance: MaintenanceSettings = DEFAULT_MAINTENANCE
) -> tuple[ClusterSettings, str]:
    """The cluster settings and a warning ("" when none) about the version's support on `today`: never a refusal for
    a date (settings/versions.py POLICY), only for a version no GKE cluster can have."""
    version = reader.string("kubernetesVersion")
    match = re.fullmatch(r"1\.([1-9][0-9]*)", version)  # no leading zeros: "1.035" is no GKE version
    if not match or int(match.group(1)) not in KUBERNETES_MINORS:
        supported = f"1.{KUBERNETES_MINORS.start}..1.{KUBERNETES_MINORS.stop - 1}"
        raise reader.fail("kubernetesVersion", version, f'expected a minor version in {supported}, like "1.35"')
    minor = int(match.group(1))
    channel = reader.choice("releaseChannel", RELEASE_CHANNELS)
    if channel == versions.EXTENDED_CHANNEL and minor < versions.FIRST_EXTENDED_MINOR:
        raise reader.fail(
            "releaseChannel",
            channel,
            f"GKE offers extended support from 1.{versions.FIRST_EXTENDED_MINOR} on, and kubernetesVersion is "
            f"1.{minor}; raise it or choose REGULAR",
        )
    try:
        notice = versions.check_support(minor, today, channel=channel)
    except CatalogueError as err:
        raise ConfigError(f"{reader.full('kubernetesVersion')}: {err}") from None
    cidrs = cidr_ranges(reader, "masterAuthorizedCidrs", public_allowed=True)
    settings = ClusterSettings(
        release_channel=channel,
        kubernetes_version=f"1.{minor}",
        deletion_protection=reader.boolean("deletionProtection"),
        master_authorized_cidrs=cidrs,
        maintenance=maintenance,
        allow_gpu_pool_replacement=reader.boolean("allowGpuPoolReplacement"),
    )
    return settings, notice and f"{reader.full('kubernetesVersion')}: {notice}"


def _node_range(reader: Reader, prefix: str, fewest: int = 0) -> tuple[int, int]:
    low = reader.integer(
        f"{prefix}MinNodes", minimum=fewest, maximum=MAX_NODES_PER_CLUSTER, why="GKE nodes per cluster"
    )
    high = reader.integer(f"{prefix}MaxNodes", minimum=1, maximum=MAX_NODES_PER_CLUSTER, why="GKE nodes per cluster")
    if low > high:
        raise reader.fail(f"{prefix}MinNodes", low, f"must not exceed {prefix}MaxNodes ({high})")
    return low, high


# At least one CPU node: the pool then starts with a node in every zone (its initial count per zone rounds up), and
# GKE's NEG controller creates a zone's NEGs only where the zone has nodes ("NEGs should be created in zones with
# candidate nodes only", kubernetes/ingress-gce pkg/neg/syncers/transaction.go listTargetZonesPerSubnet), so every
# zone's NEG exists for the load balancer's backends (infra/negs.py waits for them) although GPU pools start empty.
CPU_MIN_NODES = 1


def cpu_pool(reader: Reader) -> CpuPoolSettings:
    low, high = _node_range(reader, "cpu", fewest=CPU_MIN_NODES)
    machine_type = reader.string("cpuMachineType")
    shape = _machine_shape(reader, "cpuMachineType", machine_type)
    if shape.accelerator_optimized:
        raise reader.fail(
            "cpuMachineType", machine_type, "an accelerator-optimized type comes with GPUs; use e.g. n1-standard-8"
        )
    if shape.arm:
        raise reader.fail(
            "cpuMachineType", machine_type, "Arm nodes are tainted arm64 on GKE and the pool's images are amd64"
        )
    return CpuPoolSettings(machine_type=machine_type, min_nodes=low, max_nodes=high)


def _machine_shape(reader: Reader, key: str, machine_type: str) -> catalogue.MachineShape:
    try:
        return catalogue.machine_shape(machine_type)
    except ValueError as err:
        raise reader.fail(key, machine_type, str(err)) from None


def check_nodes_per_zone(
    reader: Reader, regions: tuple[RegionSettings, ...], cpu: CpuPoolSettings, gpu: GpuPoolSettings
) -> None:
    """Pool-wide maxima within GKE's per-zone and per-cluster node limits, for the region with fewest zones."""
    region = min(regions, key=lambda r: len(r.zones))
    for prefix, pool in (("cpu", cpu), ("gpu", gpu)):
        most = MAX_NODES_PER_POOL_ZONE * len(region.zones)
        if pool.max_nodes > most:
            raise reader.fail(
                f"{prefix}MaxNodes",
                pool.max_nodes,
                f"GKE allows {MAX_NODES_PER_POOL_ZONE:,} nodes per pool per zone: at most {most:,} over "
                f"{region.name}'s {len(region.zones)} zone(s)",
            )
    if cpu.max_nodes + gpu.max_nodes > MAX_NODES_PER_CLUSTER:
        raise reader.fail(
            "gpuMaxNodes",
            gpu.max_nodes,
            f"with cpuMaxNodes ({cpu.max_nodes:,}) above GKE's {MAX_NODES_PER_CLUSTER:,} nodes per cluster",
        )


def gpu_pool(reader: Reader, gpu_catalogue: GpuCatalogue) -> GpuPoolSettings:
    accelerator = reader.string("gpuAcceleratorType")
    if accelerator not in gpu_catalogue.accelerators:
        raise reader.fail(
            "gpuAcceleratorType",
            accelerator,
            f"unknown accelerator type; allowed: {', '.join(gpu_catalogue.accelerators)}",
        )
    try:
        gpu_type = gpu_types.shipped_gpu_types().get(accelerator)
    except CatalogueError as err:
        raise ConfigError(f"{reader.full('gpuAcceleratorType')}: {err}") from None
    if gpu_type is None:
        known = ", ".join(gpu_types.shipped_gpu_types())
        raise reader.fail(
            "gpuAcceleratorType", accelerator, f"no machine rules in infra/data/gpu_types.csv; GPU types: {known}"
        )
    count = reader.integer("gpuAcceleratorCount", minimum=1)
    if count not in gpu_type.gpu_counts:
        short = gpu_types.short_name(accelerator)
        raise reader.fail(
            "gpuAcceleratorCount",
            count,
            f"{gpu_types.with_article(short)} node carries {gpu_types.counts_text(gpu_type.gpu_counts)} GPUs",
        )
    machine_type = reader.string("gpuMachineType")
    shape = _machine_shape(reader, "gpuMachineType", machine_type)
    problem = gpu_types.machine_problem(gpu_type, machine_type, shape, count)
    if problem:
        raise reader.fail("gpuMachineType", machine_type, problem)
    low, high = _node_range(reader, "gpu")
    disk = reader.integer(
        "gpuDiskSizeGb", minimum=DISK_MIN_GB, maximum=DISK_MAX_GB, why="pd-balanced boot disk size in GB"
    )
    return GpuPoolSettings(
        machine_type=machine_type,
        accelerator_type=accelerator,
        accelerator_count=count,
        min_nodes=low,
        max_nodes=high,
        spot=reader.boolean("gpuSpot"),
        disk_size_gb=disk,
        driver_version=reader.choice("gpuDriverVersion", DRIVER_VERSIONS),
    )
