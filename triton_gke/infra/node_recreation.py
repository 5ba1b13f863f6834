"""Node pool changes that Pulumi applies in place but GKE carries out by recreating every node, and how long that
takes: one estimate, read by the lifecycle compare (offline/lifecycle.py, `plan --against`) and by the pools' custom
timeouts (infra/cluster.py), so what `--against` announces is what `up` waits for.

Which changes recreate nodes. The provider updates these node_config fields in place (not ForceNew; nodePoolUpdate
calls nodePoolNodeConfigUpdate, terraform-provider-google-beta google-beta/services/container/node_config.go at
3dc173a397749158369ea839a2890d89f8c9c370: machine_type, disk_size_gb, disk_type, boot_disk through
UpdateNodePoolRequest, image_type through ClusterUpdate.DesiredImageType), and GKE answers with a node upgrade:
- GKE's API (googleapis/googleapis google/container/v1/cluster_service.proto, UpdateNodePoolRequest): machine_type,
  disk_type, disk_size_gb and boot_disk each "Initiates an upgrade operation that migrates the nodes in the node
  pool to the specified" value; containerd_config "Initiates an upgrade operation that recreates the nodes".
- The image type goes through the same node upgrade: `gcloud container clusters upgrade --image-type`, "During node
  pool upgrades, nodes will be deleted and recreated"
  (https://cloud.google.com/sdk/gcloud/reference/container/clusters/upgrade).
A node upgrade follows the pool's upgrade settings (GPU pool: maxSurge 0, maxUnavailable 1, infra/cluster.py
GPU_POOL_UPGRADE), "Disruption stays within the limits of PodDisruptionBudget" (NodePool.UpgradeSettings,
cluster_service.proto).

How long, per batch of `at_once` nodes (maxSurge + maxUnavailable, "determines the level of parallelism", same
message), as parts each with its source:
- the new node's VM and GPU driver: NODE_READY_MINUTES;
- the drain of the next node waits for the pod evicted before it to be Ready again (its PodDisruptionBudget allows
  no second disruption meanwhile, https://kubernetes.io/docs/concepts/workloads/pods/disruptions/): at most the
  pod's startup budget (tritonStartupMinutes, the startup probe's window, k8s/triton.py) plus its
  terminationGracePeriodSeconds (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination).
Times ceil(nodes / at_once) batches, nodes being the pool's maximum (gpuMaxNodes): an upper bound, not a forecast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# In-place node_config paths (Pulumi's camelCase) whose change makes GKE recreate every node of the pool (above).
RECREATING_PATHS: tuple[str, ...] = (
    "nodeConfig.machineType",
    "nodeConfig.imageType",
    "nodeConfig.diskSizeGb",
    "nodeConfig.diskType",
    "nodeConfig.bootDisk",
    "nodeConfig.containerdConfig",
)
# A GPU node from VM creation to Ready with its driver: "GPU node ready ~9 min (VM + driver)" (public Terraform logs,
# as gathered in the shared performance anchors of 2026-12), rounded up. A CPU node gets the same: no source gives
# it separately, and an overestimate only lengthens a timeout.
NODE_READY_MINUTES = 10
# A pool's pods when it runs no Triton (the CPU pool): no startup budget of their own, Kubernetes' default
# terminationGracePeriodSeconds, 30 s (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/).
DEFAULT_POD_STARTUP_MINUTES = 0
KUBERNETES_DEFAULT_GRACE_S = 30
# google_container_node_pool's own timeouts: create, update and delete "Default `2 hours`"
# (terraform-provider-google-beta resource_container_node_pool.go Timeouts: schema.DefaultTimeout(2 * time.Hour),
# website/docs/r/container_node_pool.html.markdown "Timeouts", at the commit above). Pulumi's customTimeouts
# replace them for one resource (https://www.pulumi.com/docs/iac/concepts/resources/options/customtimeouts/):
# never set lower than this.
PROVIDER_DEFAULT_MINUTES = 120


@dataclass(frozen=True)
class RecreationEstimate:
    """Recreating up to `nodes` nodes, `at_once` at a time, each batch waiting for a node and for the pods it took."""

    nodes: int
    at_once: int
    pod_startup_minutes: int
    pod_termination_grace_s: int

    @property
    def batches(self) -> int:
        return math.ceil(self.nodes / self.at_once) if self.nodes > 0 else 0

    @property
    def per_batch_minutes(self) -> int:
        return NODE_READY_MINUTES + self.pod_startup_minutes + math.ceil(self.pod_termination_grace_s / 60)

    @property
    def total_minutes(self) -> int:
        return self.batches * self.per_batch_minutes

    @property
    def timeout_minutes(self) -> int:
        """The pool's create/update/delete timeout: the whole recreation, never below the provider's default."""
        return max(PROVIDER_DEFAULT_MINUTES, self.total_minutes)

    def text(self) -> str:
        grace = math.ceil(self.pod_termination_grace_s / 60)
        return (
            f"up to {self.nodes} node(s), {self.at_once} at a time, ~{self.per_batch_minutes} min each (node ready "
            f"{NODE_READY_MINUTES} + pod startup {self.pod_startup_minutes} + grace {grace}): up to "
            f"~{self.total_minutes} min"
        )


def estimate(
    nodes: int, max_surge: int, max_unavailable: int, pod_startup_minutes: int, pod_termination_grace_s: int
) -> RecreationEstimate:
    """The estimate for a pool of at most `nodes` nodes with these upgrade settings and pods."""
    if min(nodes, max_surge, max_unavailable, pod_startup_minutes, pod_termination_grace_s) < 0:
        raise ValueError("node counts, upgrade settings and pod times are not negative")
    if max_surge + max_unavailable < 1:
        raise ValueError("maxSurge + maxUnavailable must be at least 1: GKE upgrades no node otherwise")
    return RecreationEstimate(nodes, max_surge + max_unavailable, pod_startup_minutes, pod_termination_grace_s)


def recreating_paths(paths: tuple[str, ...] | list[str]) -> list[str]:
    """The changed paths (of a node pool) among RECREATING_PATHS, or below one."""
    return [p for p in paths if any(p == r or p.startswith(r + ".") or p.startswith(r + "[") for r in RECREATING_PATHS)]
