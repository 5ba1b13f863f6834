"""Compose the stack: read config once, then the network, the model store and one GKE cluster per region."""

import pulumi

from infra.cluster import GkeCluster, GkeClusterArgs
from infra.config import load_stack_settings
from infra.model_store import ModelStore, ModelStoreArgs
from infra.model_upload import ModelUpload, ModelUploadArgs, built_repository_digest
from infra.network import Network, NetworkArgs
from k8s.triton import TRITON_NAMESPACE, TRITON_SERVICE_ACCOUNT

settings = load_stack_settings()
model_repository_digest = built_repository_digest(settings.model_repo, settings.stack)

network = Network("triton", NetworkArgs(regions=settings.regions))

model_store = ModelStore(
    "models",
    ModelStoreArgs(
        project=settings.project,
        stack=settings.stack,
        location=settings.model_store.location,
        force_destroy=settings.model_store.force_destroy,
        kubernetes_namespace=TRITON_NAMESPACE,
        kubernetes_service_account=TRITON_SERVICE_ACCOUNT,
    ),
)
model_upload = ModelUpload(
    "models",
    ModelUploadArgs(bucket=model_store.bucket.name, prefix=settings.model_store.prefix, digest=model_repository_digest),
)

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
pulumi.export("modelRepository", model_store.bucket.name.apply(lambda b: f"gs://{b}/{settings.model_store.prefix}"))
pulumi.export("modelReader", model_store.reader.email)
