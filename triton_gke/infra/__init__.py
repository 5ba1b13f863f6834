"""Google Cloud components: network, GKE clusters, and (later) the model store and global load balancer."""
