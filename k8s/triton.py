"""Triton Inference Server on each cluster."""

# The identity Triton's pods run as; the model store binds it to its bucket reader by Workload Identity.
TRITON_NAMESPACE = "triton"
TRITON_SERVICE_ACCOUNT = "triton"
