"""Where each stack key is checked: one function of the settings layer per key, its one home.

Every key of Pulumi.yaml's schema is read (typed, bounded, refused in one line naming it) by exactly one of the
steps `load_stack_settings` runs (settings/stack.py); later steps use the value it returned, and a rule relating two
keys (min below max, the SLO knobs' order, a variant the stack serves) names the key to change but reads neither
again. Domain modules (model_repo/settings.py, observability/settings.py) keep their types and the rules a caller
without a stack needs too (a Triton release tag, an SLO's own bounds); the step that reads a key is the one caller
that applies them to it. tests/unit/settings/test_homes.py traces every read to pin this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from triton_gke.settings import (
    capacity,
    cluster,
    lifecycle,
    load_balancer,
    maintenance,
    model_store,
    monitoring,
    region_overrides,
    serving,
    source_ranges,
)

STEPS: Mapping[Callable[..., Any], tuple[str, ...]] = {
    cluster.gpu_catalogue: ("gpuCatalogue",),
    cluster.gpu_pool: (
        *("gpuAcceleratorType", "gpuAcceleratorCount", "gpuMachineType", "gpuMinNodes", "gpuMaxNodes"),
        *("gpuDiskSizeGb", "gpuSpot", "gpuDriverVersion"),
    ),
    cluster.regions: ("regions", "zones"),
    serving.model_repo: (
        *("modelVariants", "modelUint8Input", "modelMaxBatchSize", "modelPreferredBatchSize"),
        *("modelMaxQueueDelayUs", "modelInstanceCount", "modelSmallBatchSize", "modelSmallBatchInstanceCount"),
        *("modelSource", "tritonImageTag"),
    ),
    cluster.cluster: (
        *("kubernetesVersion", "masterAuthorizedCidrs", "releaseChannel", "deletionProtection"),
        "allowGpuPoolReplacement",
    ),
    maintenance.maintenance: (
        *("maintenanceWindows", "maintenanceStartTime", "maintenanceEndTime", "maintenanceRecurrence"),
        "maintenanceExclusions",
    ),
    cluster.cpu_pool: ("cpuMinNodes", "cpuMaxNodes", "cpuMachineType"),
    model_store.model_store: ("modelPrefix", "bucketLocation", "bucketForceDestroy", "modelHoldRegions"),
    serving.serving: (
        *("autoscaleQueueTimeMs", "tritonStartupMinutes", "tritonBuildEngines", "inferenceAuth"),
        "inferenceKeySlot",
    ),
    serving.load_test: (
        *("locustModel", "locustPayload", "locustWorkers", "locustRps", "locustProtocol", "locustRate"),
        *("locustRateSteps", "locustArrival"),
    ),
    source_ranges.cidr_ranges: ("webUiSourceRanges",),
    load_balancer.load_balancer: (
        *("domain", "globalLoadBalancer", "lbSourceRanges", "lbRateLimitPerMinute", "lbMaxRatePerPod"),
        "lbHttpSharePercent",
    ),
    monitoring.monitoring: (
        *("sloLatencyMs", "sloForMinutes", "sloMaxFailurePercent", "sloQueueTimeMs"),
        *("prometheusRetention", "monitoringMode", "prometheusStorageGb"),
    ),
    lifecycle.lifecycle: tuple(lifecycle.STACK_KEYS.values()),
    region_overrides.region_overrides: ("regionOverrides",),
    capacity.sized: ("targetRps", "capacityHeadroomPercent", "capacityVariant", "capacityRecord"),
}

# gcp:project, the provider's key (not in the schema): keys.gcp_project reads and checks this stack's; only
# shared_project.other_stack_projects reads the other stack files' (compared as they are, for a warning).
# Stack key -> the one function that reads and checks it.
HOMES: Mapping[str, Callable[..., Any]] = {key: step for step, keys in STEPS.items() for key in keys}
