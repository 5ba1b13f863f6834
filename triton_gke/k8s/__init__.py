"""Kubernetes components, each created with the pulumi_kubernetes Provider of one cluster."""
