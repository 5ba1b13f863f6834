"""The Grafana dashboards as JSON, written by `triton-gke dashboards` (observability/dashboards.py) and
deployed by k8s/monitoring: data, no code; a package only so that `import dashboards` is this same module."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `dashboards` (the checkout's link), this is triton_gke.dashboards itself
