"""Compose the stack: read config once, then one network and one GKE cluster per region."""

import pulumi

from infra.cluster import GkeCluster, GkeClusterArgs
from infra.config import load_stack_settings
from infra.network import Network, NetworkArgs

settings = load_stack_settings()

network = Network("triton", NetworkArgs(regions=settings.regions))

clusters = {
    region.name: GkeCluster(
        f"gke-{region.name}",
        GkeClusterArgs(
            project=settings.project,
            stack=settings.stack,
            region=region,
            settings=settings.cluster,
            cpu_pool=settings.cpu_pool,
            gpu_pool=settings.gpu_pool,
            network=network.vpc.id,
            subnet=network.subnets[region.name].id,
            subnet_plan=network.plans[region.name],
        ),
    )
    for region in settings.regions
}

pulumi.export("clusters", {region: c.cluster.name for region, c in clusters.items()})
pulumi.export("endpoints", {region: c.cluster.endpoint for region, c in clusters.items()})
pulumi.export("kubeconfigs", {region: c.kubeconfig for region, c in clusters.items()})
