"""Google Cloud components: network, GKE clusters, and (later) the model store and global load balancer."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `infra` (the checkout's link), this is triton_gke.infra itself
