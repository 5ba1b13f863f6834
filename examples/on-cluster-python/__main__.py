"""Triton serving on an existing GKE cluster with a T4 pool: one TritonOnCluster, two ways to reach the cluster.

pulumi config set modelRepository gs://BUCKET/PREFIX                # required
pulumi config set --secret kubeconfig "$(cat cluster.kubeconfig)"   # optional; unset: the current kube context
pulumi up

(The YAML example, examples/on-cluster-yaml, needs kubeconfig set: Pulumi YAML cannot leave a property out.)
"""

import pulumi
import pulumi_kubernetes as kubernetes

from triton_gke import TritonOnCluster

config = pulumi.Config()
kubeconfig = config.get_secret("kubeconfig") if config.get("kubeconfig") else None
# Without a kubeconfig the component's children use the kubernetes provider given here (the ambient context).
opts = None if kubeconfig else pulumi.ResourceOptions(providers=[kubernetes.Provider("cluster")])

triton = TritonOnCluster(
    "triton",
    {
        "model_repository": config.require("modelRepository"),
        **({"kubeconfig": kubeconfig} if kubeconfig else {}),
        "min_replicas": 1,
        "max_replicas": 2,
    },
    opts=opts,
)

pulumi.export("namespace", triton.namespace)
pulumi.export("http_endpoint", triton.http_endpoint)
pulumi.export("grpc_endpoint", triton.grpc_endpoint)
