"""Where pods may run: the GPU pool's taint and the label that names each node pool.

The node pools (infra/cluster.py) set these; the workloads (k8s/) tolerate and select them; the policy pack
(policy/policies.py) checks them. Plain values only: the node-pool value object builds the Pulumi arguments.

GPU workloads tolerate the GPU taint but select nodes by GKE's own label `cloud.google.com/gke-accelerator`, not by
POOL_LABEL: GKE sets it on every GPU node to the accelerator TYPE (e.g. nvidia-tesla-t4,
https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#multiple_gpus), so Triton (k8s/triton.py) lands on the
T4 type the stack asks for, and the driver installer and DCGM on any GPU node. The stack's CPU workloads select
POOL_LABEL=cpu (infra/system.py passes it as TritonOnCluster's cpu_node_selector, whose default selects no label).
"""

from __future__ import annotations

# The taint GKE itself puts on GPU nodes added to a cluster that has non-GPU pools, so pods that ask for no GPU stay
# off them (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus "GKE automatically taints the GPU nodes":
# key nvidia.com/gpu, effect NoSchedule). We declare it on the pool so it holds whatever pool is added first.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
# The same effect, spelt as each API wants it: GKE's NodeTaint enum
# (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeTaint: NO_SCHEDULE) and Kubernetes'
# Taint/Toleration (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/: NoSchedule).
GPU_TAINT_EFFECT_GKE = "NO_SCHEDULE"
GPU_TAINT_EFFECT_K8S = "NoSchedule"

# The node label each pool carries (GKE node_config.labels become Kubernetes node labels,
# https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels), and its two values.
POOL_LABEL = "triton-gke/pool"
GPU_POOL = "gpu"
CPU_POOL = "cpu"
