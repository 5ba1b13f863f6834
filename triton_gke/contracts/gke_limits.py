"""GKE's node limits, and the Triton replica bound that follows from them: one home for the settings layer (stack
keys cpuMaxNodes/gpuMaxNodes) and the component (TritonOnCluster min_replicas/max_replicas).

GKE quotas and limits (https://cloud.google.com/kubernetes-engine/quotas): 1,000 nodes per node pool per zone,
15,000 nodes per Standard cluster.
"""

from __future__ import annotations

MAX_NODES_PER_POOL_ZONE = 1000
MAX_NODES_PER_CLUSTER = 15000
# Triton runs one pod per GPU node (the HPA's bounds are the GPU pool's node range), so no cluster holds more
# replicas than it holds nodes: a stack whose gpuMaxNodes the settings accept is never refused by the component.
MAX_TRITON_REPLICAS = MAX_NODES_PER_CLUSTER
