"""The validated settings of one stack, as frozen dataclasses: what every consumer reads (types, no Pulumi)."""

from __future__ import annotations

from dataclasses import dataclass

from model_repo.settings import ModelRepoSettings
from observability.settings import SloSettings
from settings.catalogue import GpuCatalogue


@dataclass(frozen=True)
class RegionSettings:
    name: str
    zones: tuple[str, ...]
    # Row of the region in infra/data/gcp_regions.csv: fixes its address ranges, so adding or
    # removing another region never renumbers this one.
    index: int


@dataclass(frozen=True)
class ClusterSettings:
    release_channel: str
    kubernetes_version: str
    deletion_protection: bool
    master_authorized_cidrs: tuple[str, ...]


@dataclass(frozen=True)
class CpuPoolSettings:
    machine_type: str
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True)
class GpuPoolSettings:
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    min_nodes: int
    max_nodes: int
    spot: bool
    disk_size_gb: int
    driver_version: str

    @property
    def gke_installs_driver(self) -> bool:
        return self.driver_version != "INSTALLATION_DISABLED"


@dataclass(frozen=True)
class ModelStoreSettings:
    location: str
    force_destroy: bool
    prefix: str


@dataclass(frozen=True)
class ServingSettings:
    image: str
    queue_time_target_us: int
    # tritonStartupMinutes: the one budget Triton's startup probe and Pulumi's waits derive from (k8s/triton.py).
    startup_minutes: int = 40


@dataclass(frozen=True)
class LoadTestSettings:
    workers: int
    model: str
    rps_per_user: int
    protocol: str
    payload: str
    # The whole test's rate (requests/s, 0: unset, rps_per_user applies), a load shape in the locustfile's
    # rate_steps syntax ("": none) and the arrival process (loadtest/arrivals.py).
    rate: int = 0
    rate_steps: str = ""
    arrival: str = "poisson"


@dataclass(frozen=True)
class LoadBalancerSettings:
    enabled: bool
    domain: str
    max_rate_per_pod: int
    # Cloud Armor: requests per minute one client IP may send to each backend service, and the only sources
    # allowed (empty: any source).
    rate_limit_per_minute: int = 3000
    source_ranges: tuple[str, ...] = ()


@dataclass(frozen=True)
class MonitoringSettings:
    mode: str
    slo: SloSettings
    retention: str
    storage_gb: int


@dataclass(frozen=True)
class StackSettings:
    project: str
    stack: str
    regions: tuple[RegionSettings, ...]
    cluster: ClusterSettings
    cpu_pool: CpuPoolSettings
    gpu_pool: GpuPoolSettings
    gpu_catalogue: GpuCatalogue
    model_store: ModelStoreSettings
    model_repo: ModelRepoSettings
    serving: ServingSettings
    load_test: LoadTestSettings
    web_ui_source_ranges: tuple[str, ...]
    load_balancer: LoadBalancerSettings
    monitoring: MonitoringSettings
