"""Kubernetes components, each created with the pulumi_kubernetes Provider of one cluster."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `k8s` (the checkout's link), this is triton_gke.k8s itself
