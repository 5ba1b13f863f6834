"""The validated settings of one stack, as frozen dataclasses: what every consumer reads (types, no Pulumi)."""

from __future__ import annotations

from dataclasses import dataclass

from triton_gke.model_repo.settings import ModelRepoSettings
from triton_gke.observability.settings import SloSettings
from triton_gke.settings.catalogue import GpuCatalogue
from triton_gke.settings.lifecycle import DEFAULTS as LIFECYCLE_DEFAULTS
from triton_gke.settings.lifecycle import LifecycleSettings


@dataclass(frozen=True)
class RegionSettings:
    name: str
    zones: tuple[str, ...]
    # Row of the region in infra/data/gcp_regions.csv: fixes its address ranges, so adding or
    # removing another region never renumbers this one.
    index: int


@dataclass(frozen=True)
class MaintenanceExclusion:
    """A time GKE must not start the upgrades `scope` names (settings/maintenance.py)."""

    name: str
    start_time: str
    end_time: str
    scope: str


@dataclass(frozen=True)
class MaintenanceWindow:
    """One recurring window GKE may upgrade a cluster in: its first opening (RFC3339 UTC times) and an RRULE.

    The defaults are the first region's window (settings/maintenance.py default_window(0)).
    """

    start_time: str = "2026-01-03T01:00:00Z"
    end_time: str = "2026-01-03T08:00:00Z"
    recurrence: str = "FREQ=WEEKLY;BYDAY=SA,SU"


@dataclass(frozen=True)
class MaintenanceSettings:
    """Each region's recurring window and the exclusions every cluster of the stack shares (settings/maintenance.py)."""

    # (region, window), in the stack's region order.
    windows: tuple[tuple[str, MaintenanceWindow], ...] = ()
    exclusions: tuple[MaintenanceExclusion, ...] = ()

    def window(self, region: str) -> MaintenanceWindow:
        """The region's window; a settings object built without one for it (a library caller's) gives the first's."""
        return dict(self.windows).get(region, MaintenanceWindow())


@dataclass(frozen=True)
class ClusterSettings:
    release_channel: str
    kubernetes_version: str
    deletion_protection: bool
    master_authorized_cidrs: tuple[str, ...]
    maintenance: MaintenanceSettings = MaintenanceSettings()
    # allowGpuPoolReplacement: lift Pulumi's protect from the GPU pools for the one `up` that replaces them.
    allow_gpu_pool_replacement: bool = False

    @property
    def protect_gpu_pool(self) -> bool:
        """Pulumi's protect on the GPU pools: a protected stack refuses their replacement unless it is allowed."""
        return self.deletion_protection and not self.allow_gpu_pool_replacement


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

    @property
    def min_triton_pods(self) -> int:
        """Triton pods a region keeps at its minimum (the HPA's minReplicas): one per GPU node, at least one."""
        return max(1, self.min_nodes)


@dataclass(frozen=True)
class ModelStoreSettings:
    location: str
    force_destroy: bool
    prefix: str
    # modelHoldRegions: regions whose Triton keeps the live model versions (model_repo/sync.py, Held versions).
    hold_regions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServingSettings:
    # The Triton image is not here: its one field is ModelRepoSettings.triton_image_tag (the build records it too),
    # and k8s/on_cluster.py derives the image reference from it.
    queue_time_target_us: int
    # tritonStartupMinutes: the one budget Triton's startup probe and Pulumi's waits derive from (k8s/triton.py).
    startup_minutes: int = 40
    # tritonBuildEngines: the engine-build Jobs (k8s/engine_build.py), and Triton serving their plans (the model
    # settings' plan_compute_capabilities). Off by default: the Job needs a GPU node of its own, which a pool at
    # gpuMaxNodes (dev: one node, held by Triton) never gives it, so every later `up` that changes the Job would wait
    # for it in vain; and no plan it builds has run on a GPU here yet (docs/gpus.md).
    build_engines: bool = False
    # inferenceAuth: Triton's inference API group needs the generated key (contracts/triton.py inference_restrictions);
    # inferenceKeySlot: which of the two keys (and header names) it checks, the key change's switch.
    inference_auth: bool = True
    inference_key_slot: str = "a"


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
    # The share of max_rate_per_pod the HTTP backend service offers a pod; gRPC gets the rest (lbHttpSharePercent).
    http_share_percent: int = 50
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
class CapacitySettings:
    """How the stack is sized (settings/capacity.py): the target, and the capacity record it was sized from."""

    # Requests/s each region must serve at the SLO (targetRps; 0: no target, the explicit node counts apply).
    target_rps: int = 0
    # capacityHeadroomPercent: provisioned capacity above the target (25: 1.25 x the target).
    headroom_percent: int = 25
    # The served variant whose record applies (capacityVariant, default locustModel).
    variant: str = ""
    # The record read ("" when none applies; `missing` says why): its path relative to the project, its source
    # ("reference" or "measured") and what one GPU, and one node with all its GPUs, serve at the SLO.
    record_path: str = ""
    record_source: str = ""
    rps_per_gpu: float = 0.0
    rps_per_node: float = 0.0
    missing: str = ""

    @property
    def sized(self) -> bool:
        return self.target_rps > 0


@dataclass(frozen=True)
class RegionOverride:
    """What one region serves apart from the stack-wide settings (regionOverrides, settings/region_overrides.py);
    None: the stack-wide value."""

    triton_image_tag: str | None = None
    queue_time_ms: int | None = None
    capacity_scaler_percent: int | None = None


NO_OVERRIDE = RegionOverride()


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
    capacity: CapacitySettings = CapacitySettings()
    # How a Triton pod leaves the load balancer (settings/lifecycle.py): preStop, exit timeout, grace, health check.
    lifecycle: LifecycleSettings = LIFECYCLE_DEFAULTS
    # What the program tells the user at every plan and `up` without refusing (pulumi.log.warn under the engine):
    # a kubernetesVersion near or past the end of its GKE support (settings/versions.py).
    warnings: tuple[str, ...] = ()
    # regionOverrides: (region, what it serves apart from the stack-wide settings), for a change one region at a time.
    region_overrides: tuple[tuple[str, RegionOverride], ...] = ()

    def override(self, region: str) -> RegionOverride:
        return dict(self.region_overrides).get(region, NO_OVERRIDE)

    def image_tag(self, region: str) -> str:
        """The region's Triton image tag: its override, else the stack's (model_repo's one field)."""
        return self.override(region).triton_image_tag or self.model_repo.triton_image_tag

    def queue_time_target_us(self, region: str) -> int:
        """The region's HPA queue-time target: its override (ms), else the stack's."""
        ms = self.override(region).queue_time_ms
        return self.serving.queue_time_target_us if ms is None else ms * 1000

    def capacity_scaler(self, region: str) -> float:
        """The share of capacity the balancer offers the region's backends (1.0 unless overridden)."""
        percent = self.override(region).capacity_scaler_percent
        return 1.0 if percent is None else percent / 100
