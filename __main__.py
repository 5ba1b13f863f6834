"""Compose the stack: read config once; then the network, the model store, and per region a GKE cluster
with Triton serving the bucket and Locust to load it; optionally one global load balancer in front."""

import pulumi
import pulumi_random as random
from triton_gke.contracts.workloads import GRAFANA_PORT, LOCUST_WEB_PORT, PROMETHEUS_PORT
from triton_gke.infra.cluster import GkeCluster
from triton_gke.infra.cluster_args import gke_cluster_args
from triton_gke.infra.config import load_stack_settings
from triton_gke.infra.cost import stack_cost_summary
from triton_gke.infra.global_lb import GlobalLoadBalancer, GlobalLoadBalancerArgs, RegionBackend
from triton_gke.infra.model_store import ModelStore, ModelStoreArgs
from triton_gke.infra.model_upload import ModelUpload, ModelUploadArgs, built_repository_digest
from triton_gke.infra.negs import ZonalNegs, ZonalNegsArgs
from triton_gke.infra.network import Network, NetworkArgs
from triton_gke.infra.project_services import ProjectServices, ProjectServicesArgs
from triton_gke.k8s.autoscaling import ADAPTER_PORT, Autoscaling, AutoscalingArgs, serves_custom_metrics
from triton_gke.k8s.loadtest import LOCUST_NAMESPACE, LoadTest, LoadTestArgs
from triton_gke.k8s.monitoring import MONITORING_NAMESPACE, PROMETHEUS_URL, Monitoring, MonitoringArgs
from triton_gke.k8s.triton import (
    TRITON_NAMESPACE,
    TRITON_SERVICE_ACCOUNT,
    TritonServing,
    TritonServingArgs,
    neg_names,
    triton_address,
)
from triton_gke.settings.load_balancer import backend_rates, shares_of

settings = load_stack_settings()
# The HPA scales on a metric only the adapter of builtin monitoring mode serves; without it Triton runs fixed replicas.
# One Triton pod per GPU node: the replica bounds are the GPU pool's node range (at least one pod).
autoscale = serves_custom_metrics(settings.monitoring.mode)
min_replicas, max_replicas = max(1, settings.gpu_pool.min_nodes), settings.gpu_pool.max_nodes
model_repository_digest = built_repository_digest(settings.model_repo, settings.stack)

# The APIs first: every Google Cloud resource declared after this waits for the API it is created through.
project_services = ProjectServices("apis", ProjectServicesArgs(project=settings.project))
pulumi.runtime.register_stack_transformation(project_services.wait_for_apis)

network = Network("triton", NetworkArgs(regions=settings.regions))

# Sent only by operators, never by inference clients: it unlocks Triton's admin APIs.
triton_admin_key = random.RandomPassword("triton-admin-key", length=40, special=False)
grafana_admin_password = random.RandomPassword("grafana-admin-password", length=32, special=False)

clusters = {
    region.name: GkeCluster(
        f"gke-{region.name}",
        gke_cluster_args(
            project=settings.project,
            stack=settings.stack,
            region=region,
            cluster=settings.cluster,
            cpu_pool=settings.cpu_pool,
            gpu_pool=settings.gpu_pool,
            network=network.vpc.id,
            subnet=network.subnets[region.name].id,
            subnet_plan=network.plans[region.name],
            control_plane_ports=(ADAPTER_PORT,) if autoscale else (),
        ),
    )
    for region in settings.regions
}

model_store = ModelStore(
    "models",
    ModelStoreArgs(
        project=settings.project,
        stack=settings.stack,
        location=settings.model_store.location,
        force_destroy=settings.model_store.force_destroy,
        kubernetes_namespace=TRITON_NAMESPACE,
        kubernetes_service_account=TRITON_SERVICE_ACCOUNT,
        workload_identity_clusters=[c.cluster for c in clusters.values()],
    ),
)
model_upload = ModelUpload(
    "models",
    ModelUploadArgs(bucket=model_store.bucket.name, prefix=settings.model_store.prefix, digest=model_repository_digest),
)
# Per region, the lifecycle of the zonal NEGs GKE creates from Triton's NEG Service (infra/negs.py): stale ones are
# removed before that Service exists and leftovers after it is gone, before the cluster; `ready` waits for the
# Service, which is declared below (it waits for `cleanup`): a deferred Output hands it over.
zonal_negs: dict[str, ZonalNegs] = {}
serving: dict[str, TritonServing] = {}
for region in settings.regions:
    cluster = clusters[region.name]
    neg_service, resolve_neg_service = pulumi.deferred_output()
    zonal_negs[region.name] = ZonalNegs(
        f"negs-{region.name}",
        ZonalNegsArgs(
            project=settings.project,
            region=region.name,
            zones=region.zones,
            neg_names=tuple(neg_names(cluster.cluster_name).values()),
            cluster=cluster,
            neg_service=neg_service,
        ),
    )
    serving[region.name] = TritonServing(
        f"triton-{region.name}",
        TritonServingArgs(
            image=settings.serving.image,
            model_repository=model_upload.repository_url,
            reader_email=model_store.reader.email,
            admin_key=triton_admin_key.result,
            accelerator_type=settings.gpu_pool.accelerator_type,
            gpus_per_node=settings.gpu_pool.accelerator_count,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            neg_name_prefix=cluster.cluster_name,
            autoscale=autoscale,
            # Workload Identity tokens come from the IAM Credentials API: the pods wait for it as for the grants.
            bucket_access=[*model_store.read_access, *project_services.for_workloads],
            model_digest=model_repository_digest,
            startup_minutes=settings.serving.startup_minutes,
            neg_cleanup=[zonal_negs[region.name].cleanup],
        ),
        opts=pulumi.ResourceOptions(providers=[cluster.provider]),
    )
    resolve_neg_service(pulumi.Output.from_input(serving[region.name].neg_service))

load = settings.load_test
load_tests = {
    region: LoadTest(
        f"locust-{region}",
        LoadTestArgs(
            triton_address=triton_address(load.protocol),
            model=load.model,
            rps_per_user=load.rps_per_user,
            protocol=load.protocol,
            payload=load.payload,
            workers=load.workers,
            web_ui_source_ranges=settings.web_ui_source_ranges,
            rate=load.rate,
            rate_steps=load.rate_steps,
            arrival=load.arrival,
        ),
        opts=pulumi.ResourceOptions(providers=[cluster.provider]),
    )
    for region, cluster in clusters.items()
}

for region, cluster in clusters.items():
    monitoring = Monitoring(
        f"monitoring-{region}",
        MonitoringArgs(
            region=region,
            stack=settings.stack,
            slo=settings.monitoring.slo,
            mode=settings.monitoring.mode,
            retention=settings.monitoring.retention,
            storage_gb=settings.monitoring.storage_gb,
            grafana_admin_password=grafana_admin_password.result,
            watched_namespaces={
                TRITON_NAMESPACE: serving[region].namespace.metadata.name,
                LOCUST_NAMESPACE: load_tests[region].namespace.metadata.name,
            },
            web_ui_source_ranges=settings.web_ui_source_ranges,
        ),
        opts=pulumi.ResourceOptions(providers=[cluster.provider]),
    )
    if autoscale:  # builtin mode: Monitoring made the namespace the adapter runs in
        Autoscaling(
            f"autoscaling-{region}",
            AutoscalingArgs(
                deployment=serving[region].deployment.metadata.name,
                namespace=serving[region].namespace.metadata.name,
                min_replicas=min_replicas,
                max_replicas=max_replicas,
                queue_time_target_us=settings.serving.queue_time_target_us,
                prometheus_url=PROMETHEUS_URL,
                adapter_namespace=MONITORING_NAMESPACE,
                adapter_namespace_output=monitoring.namespace.metadata.name,
                # The names these objects had in TritonServing (the HPA) and Monitoring (the adapter), and those
                # parents as aliases: existing stacks move them in their state instead of replacing them
                # (https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/).
                hpa_name_prefix=f"triton-{region}",
                hpa_aliases=[pulumi.Alias(parent=serving[region])],
                adapter_name_prefix=f"monitoring-{region}",
                adapter_aliases=[pulumi.Alias(parent=monitoring)],
            ),
            opts=pulumi.ResourceOptions(providers=[cluster.provider]),
        )

if settings.load_balancer.enabled:
    lb = GlobalLoadBalancer(
        "global",
        GlobalLoadBalancerArgs(
            project=settings.project,
            stack=settings.stack,
            network=network.vpc.id,
            regions=tuple(
                RegionBackend(
                    region=region.name,
                    zones=region.zones,
                    neg_names=serving[region.name].neg_names,
                    negs_ready=zonal_negs[region.name].ready,
                    node_service_account=clusters[region.name].node_service_account.email,
                )
                for region in settings.regions
            ),
            max_rate_per_pod=backend_rates(
                settings.load_balancer.max_rate_per_pod, shares_of(settings.load_balancer.http_share_percent)
            ),
            domain=settings.load_balancer.domain,
            rate_limit_per_minute=settings.load_balancer.rate_limit_per_minute,
            source_ranges=settings.load_balancer.source_ranges,
        ),
    )
    domain = settings.load_balancer.domain
    pulumi.export("lbAddress", lb.address.address)
    pulumi.export(
        "httpEndpoint",
        f"https://{domain}/v2/models/MODEL/infer"
        if domain
        else pulumi.Output.concat("http://", lb.address.address, "/v2/models/MODEL/infer"),
    )
    if domain:
        pulumi.export("grpcEndpoint", f"{domain}:443")

pulumi.export("clusters", {region: c.cluster.name for region, c in clusters.items()})
pulumi.export("endpoints", {region: c.cluster.endpoint for region, c in clusters.items()})
pulumi.export("kubeconfigs", {region: c.kubeconfig for region, c in clusters.items()})
pulumi.export(
    "access",
    {
        region: {
            "credentials": f"gcloud container clusters get-credentials {c.cluster_name} "
            f"--region {region} --project {settings.project}",
            "locust": f"kubectl -n {LOCUST_NAMESPACE} port-forward svc/locust-master "
            f"{LOCUST_WEB_PORT}:{LOCUST_WEB_PORT}  # then http://localhost:{LOCUST_WEB_PORT}",
        }
        | (
            {
                "grafana": f"kubectl -n {MONITORING_NAMESPACE} port-forward svc/grafana {GRAFANA_PORT}:{GRAFANA_PORT}"
                f"  # then http://localhost:{GRAFANA_PORT}, "
                "user admin, password: pulumi stack output grafanaAdminPassword --show-secrets",
                "prometheus": f"kubectl -n {MONITORING_NAMESPACE} port-forward svc/prometheus "
                f"{PROMETHEUS_PORT}:{PROMETHEUS_PORT}",
            }
            if settings.monitoring.mode == "builtin"
            else {}
        )
        for region, c in clusters.items()
    },
)
pulumi.export("modelRepository", model_upload.repository_url)
pulumi.export("tritonAdminKey", triton_admin_key.result)
pulumi.export("grafanaAdminPassword", grafana_admin_password.result)
pulumi.export("estimatedCost", stack_cost_summary(settings))
