"""TritonGkeSystem: the whole multi-region system from ONE typed settings object (settings.StackSettings).

The project's own program (__main__.py) is a thin user of it: read the settings once, declare the system, export
its outputs. Per region, the GKE cluster (infra/cluster.py), its zonal NEGs' lifecycle (infra/negs.py) and Triton
with its HPA, monitoring and Locust (k8s/on_cluster.py TritonOnCluster); shared: the APIs, the VPC, the model bucket
and its upload, the two generated secrets and, optionally, one global load balancer.

Children keep the names they had as the program's top-level resources (apis, triton, models, gke-REGION, ...), so
`child_aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]` moves an existing stack's resources under this
component in its state instead of replacing them: "wrapping resources in a component: { parent: <root-stack> } on
each child" (https://www.pulumi.com/docs/iac/operations/stack-management/refactoring-with-aliases/); descendants need
none, the engine "combines a parent's aliases with each child's own name and type"
(https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/). Two systems in one stack would collide on
these names and on the physical names (clusters, bucket) that derive from the stack: one system per stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_random as random

from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS, PORTS, inference_key_header, other_slot
from triton_gke.contracts.workloads import GRAFANA_PORT, LOCUST_WEB_PORT, PROMETHEUS_PORT
from triton_gke.infra.cluster_args import gke_cluster_args
from triton_gke.infra.engine_writer import EngineWriter, EngineWriterArgs, engine_build_args
from triton_gke.infra.global_lb import GlobalLoadBalancer, GlobalLoadBalancerArgs, RegionBackend
from triton_gke.infra.model_store import ModelStore, ModelStoreArgs
from triton_gke.infra.model_upload import (
    VENV_PYTHON,
    ModelPin,
    ModelPinArgs,
    ModelUpload,
    ModelUploadArgs,
    built_repository_digest,
)
from triton_gke.infra.network import Network, NetworkArgs
from triton_gke.infra.project_services import ProjectServices, ProjectServicesArgs, api_of
from triton_gke.infra.region import TritonGkeRegion, TritonGkeRegionArgs
from triton_gke.k8s.autoscaling import ADAPTER_PORT, serves_custom_metrics
from triton_gke.k8s.common import CPU_NODES, ArgsError
from triton_gke.k8s.loadtest import LOCUST_NAMESPACE, LoadTestArgs
from triton_gke.k8s.monitoring import MONITORING_NAMESPACE, MonitoringArgs
from triton_gke.k8s.on_cluster import GKE_ACCELERATOR_LABEL, ClusterWiring, TritonOnClusterArgs
from triton_gke.k8s.triton import TRITON_APP, TRITON_NAMESPACE, triton_address
from triton_gke.policy.principals import engine_service_account, triton_service_account
from triton_gke.settings.cost import stack_cost_summary
from triton_gke.settings.load_balancer import backend_rates, shares_of
from triton_gke.settings.values import StackSettings

TYPE_TOKEN = "triton-gke:index:TritonGkeSystem"


class TritonGkeSystemArgs(TypedDict):
    """The inputs of TritonGkeSystem: the stack's checked settings and where the Commands find Python."""

    settings: StackSettings
    """Every setting of the system, checked (triton_gke.settings.load_stack_settings, or infra.config under Pulumi)."""
    python: NotRequired[str]
    """The Python that runs the model sync and the NEG cleanup; default `.venv/bin/python` (this repository's venv,
    relative to the project folder). A program that installed triton-gke passes its own, e.g. sys.executable."""
    model_repository_dir: NotRequired[str]
    """The built model repository the sync uploads; default build/model_repository of the project folder, the folder
    `pulumi up` runs the program in, where `triton-gke model-repo --stack STACK` writes it (infra/model_upload.py)."""


class TritonGkeSystem(pulumi.ComponentResource):
    """Triton on GKE in every region of `settings`: clusters, serving, monitoring, load tests and the global LB."""

    # Plain dicts (of Outputs where a value is the cloud's), as the stack exported them before this component:
    # `pulumi stack output` and the tests read them the same way.
    clusters: dict[str, pulumi.Output[str]]
    """Region -> the GKE cluster's name."""
    endpoints: dict[str, pulumi.Output[str]]
    """Region -> the cluster's control-plane endpoint."""
    kubeconfigs: dict[str, pulumi.Output[str]]
    """Region -> a kubeconfig for the cluster (secret)."""
    access: dict[str, dict[str, str]]
    """Region -> the commands that reach the cluster, Locust, Grafana and Prometheus."""
    model_repository: pulumi.Output[str]
    """gs://BUCKET/PREFIX, once the sync uploaded the models."""
    triton_admin_key: pulumi.Output[str]
    """The key of Triton's admin APIs (secret)."""
    grafana_admin_password: pulumi.Output[str]
    """Grafana's admin password (secret)."""
    estimated_cost: dict[str, Any]
    """The estimated cost per region and in total, at the pools' minimum and maximum sizes."""

    def __init__(
        self,
        name: str,
        args: TritonGkeSystemArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        child_aliases: Sequence[pulumi.Alias] = (),
    ) -> None:
        settings = _checked(name, args)
        self._apis: ProjectServices | None = None
        # Every `gcp:` resource below waits for the API it is created through (ProjectServices.wait_for_apis, a
        # ResourceTransformArgs -> ResourceTransformResult transform). It runs IN THIS PROCESS, through the
        # `transformations` option, and not as the engine-side `transforms` option, for two reasons read in
        # pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8 pkg/resource/deploy/source_eval.go RegisterResource:
        # 1. the engine runs a component's transforms on its descendants, but rebuilds a resource's dependencies from
        #    the transformed dependsOn only `if len(req.Transforms) > 0`, i.e. only when the resource's own options
        #    declare a transform; a dependsOn added by an ancestor's (or a stack) transform is dropped, and no resource
        #    of this system declares its own (offline/runtime.py run_transforms does the same, and
        #    tests/unit/infra/test_deploy_invariants.py shows the dependencies vanish with `transforms=`);
        # 2. an engine-side transform runs after the SDK has sent the registration, and the SDK sends it as soon as
        #    the dependencies IT knows exist: the API enablement could no longer delay the create, which is the point.
        # In-process, the dependency is in the request itself and the SDK waits for the service first. The
        # `transformations` option applies to this component and all its descendants
        # (https://www.pulumi.com/docs/iac/concepts/options/transformations/).
        own = pulumi.ResourceOptions(transformations=[self._in_process])
        super().__init__(TYPE_TOKEN, name, None, pulumi.ResourceOptions.merge(opts, own))
        self._moved = pulumi.ResourceOptions(parent=self, aliases=list(child_aliases))
        self._settings = settings
        self._python = args.get("python", VENV_PYTHON)
        given = args.get("model_repository_dir")
        self._model_dir = Path(given) if given else None  # None: the project's build/model_repository
        self._declare(settings, child_aliases)
        self.register_outputs(self._outputs())

    def _in_process(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        """_wait_for_apis run by the SDK before it sends the registration (see __init__ for why)."""
        custom = isinstance(args.resource, pulumi.CustomResource)
        result = self._wait_for_apis(pulumi.ResourceTransformArgs(custom, args.type_, args.name, args.props, args.opts))
        return None if result is None else pulumi.ResourceTransformationResult(result.props, result.opts)

    def _wait_for_apis(self, args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if api_of(args.type_) is None:  # not a gcp: resource, or the API services themselves
            return None
        if self._apis is None:
            raise RuntimeError(f"{args.name}: a Google Cloud resource declared before the APIs")
        return self._apis.wait_for_apis(args)

    def _declare(self, settings: StackSettings, child_aliases: Sequence[pulumi.Alias]) -> None:
        # The APIs first: every Google Cloud resource declared after them waits for the API it is created through.
        self._apis = ProjectServices("apis", ProjectServicesArgs(project=settings.project), opts=self._moved)
        self._network = Network("triton", NetworkArgs(regions=settings.regions), opts=self._moved)
        # Sent only by operators, never by inference clients: it unlocks Triton's admin APIs.
        self._admin_key = random.RandomPassword("triton-admin-key", length=40, special=False, opts=self._moved)
        self._grafana = random.RandomPassword("grafana-admin-password", length=32, special=False, opts=self._moved)
        # Every inference request carries one of these (inferenceAuth): one per slot, shared by every region, since
        # the global load balancer sends a client to any of them. Letters and digits only (special=False), 40 of them.
        self._inference_keys = (
            {
                slot: random.RandomPassword(f"triton-inference-key-{slot}", length=40, special=False, opts=self._moved)
                for slot in INFERENCE_KEY_SLOTS
            }
            if settings.serving.inference_auth
            else {}
        )
        digest = built_repository_digest(settings.model_repo, settings.stack, self._model_dir)
        # The bucket's Workload Identity binding waits for the clusters (GKE creates the identity pool with the first),
        # which the regions declare after it: a deferred Output hands them over.
        clusters, resolve_clusters = pulumi.deferred_output()
        self._store = self._model_store(settings, clusters)
        builds_engines = settings.serving.build_engines and any(v.uses_tensorrt for v in settings.model_repo.variants)
        self._upload = ModelUpload(
            "models",
            ModelUploadArgs(
                bucket=self._store.bucket.name,
                prefix=settings.model_store.prefix,
                digest=digest,
                local_dir=self._model_dir,
                python=self._python,
                # With engine-build Jobs, new versions are pinned only after every Job built their plans (ModelPin).
                stage=builds_engines,
                holds=settings.model_store.hold_regions,
            ),
            opts=self._moved,
        )
        # What Triton serves from: the upload's URL, or with Jobs the pin's, which the regions' Jobs come before.
        resolve_served = None
        self._served_repository = self._upload.repository_url
        if builds_engines:
            self._served_repository, resolve_served = pulumi.deferred_output()
        # The engine-build Jobs and their identity (infra/engine_writer.py: reads the bucket, creates .plan objects
        # only), where the stack asks for them (tritonBuildEngines).
        self._engine_writer = (
            EngineWriter(
                "engines",
                EngineWriterArgs(
                    project=settings.project,
                    stack=settings.stack,
                    bucket=self._store.bucket.name,
                    prefix=settings.model_store.prefix,
                    kubernetes_service_account=engine_service_account(settings.stack),
                    workload_identity_clusters=clusters,
                ),
                opts=self._moved,
            )
            # No TensorRT variant, no Job: no writer either (least privilege).
            if builds_engines
            else None
        )
        try:
            self._regions = {
                region.name: TritonGkeRegion(
                    region.name,
                    self._region_args(settings, region, digest),
                    opts=pulumi.ResourceOptions(parent=self),
                    child_aliases=child_aliases,
                    engines=engine_build_args(
                        settings,
                        self._upload.repository_url,
                        self._engine_writer,
                        digest,
                        self._apis.for_workloads,
                        self._model_dir,
                    )
                    if self._engine_writer
                    else None,
                )
                for region in settings.regions
            }
        except Exception:
            # A region refused its args: the binding above still waits for the clusters, and the SDK waits for every
            # registration before it reports the program's error, so without this the run would hang, not fail.
            resolve_clusters(pulumi.Output.from_input([]))
            if resolve_served is not None:
                resolve_served(self._upload.repository_url)
            raise
        resolve_clusters(pulumi.Output.from_input([r.cluster.cluster for r in self._regions.values()]))
        if resolve_served is not None:
            pin = ModelPin(
                "models-pin",
                ModelPinArgs(
                    upload=self._upload,
                    bucket=self._store.bucket.name,
                    prefix=settings.model_store.prefix,
                    digest=digest,
                    after=[r.engines.job for r in self._regions.values() if r.engines is not None],
                    python=self._python,
                    holds=settings.model_store.hold_regions,
                ),
                opts=self._moved,
            )
            resolve_served(pin.repository_url)
        self._lb = self._load_balancer(settings) if settings.load_balancer.enabled else None

    def _model_store(self, settings: StackSettings, clusters: pulumi.Output[list[pulumi.Resource]]) -> ModelStore:
        return ModelStore(
            "models",
            ModelStoreArgs(
                project=settings.project,
                stack=settings.stack,
                location=settings.model_store.location,
                force_destroy=settings.model_store.force_destroy,
                kubernetes_namespace=TRITON_NAMESPACE,
                # Per stack: stacks that share a project must not share the principal (see triton_service_account).
                kubernetes_service_account=triton_service_account(settings.stack),
                workload_identity_clusters=clusters,
            ),
            opts=self._moved,
        )

    def _region_args(self, settings: StackSettings, region: Any, digest: str) -> TritonGkeRegionArgs:
        # The HPA scales on a metric only the adapter of builtin monitoring mode serves; without it Triton runs fixed
        # replicas. One Triton pod per GPU node: the replica bounds are the GPU pool's node range (at least one pod).
        autoscale = serves_custom_metrics(settings.monitoring.mode)
        apis = self._apis
        assert apis is not None  # declared first (_declare)
        return TritonGkeRegionArgs(
            project=settings.project,
            cluster=gke_cluster_args(
                project=settings.project,
                stack=settings.stack,
                region=region,
                cluster=settings.cluster,
                cpu_pool=settings.cpu_pool,
                gpu_pool=settings.gpu_pool,
                network=self._network.vpc.id,
                subnet=self._network.subnets[region.name].id,
                subnet_plan=self._network.plans[region.name],
                control_plane_ports=(ADAPTER_PORT,) if autoscale else (),
                # The GPU pool's timeouts cover recreating its nodes, each waiting for Triton (infra/cluster.py).
                triton_startup_minutes=settings.serving.startup_minutes,
                triton_termination_grace_s=settings.lifecycle.termination_grace_s,
            ),
            serving=TritonOnClusterArgs(
                model_repository=self._served_repository,
                model_reader_service_account=self._store.reader.email,
                service_account_name=triton_service_account(settings.stack),  # the principal the binding names
                image_tag=settings.image_tag(region.name),  # regionOverrides, else the stack's
                min_replicas=settings.gpu_pool.min_triton_pods,
                max_replicas=settings.gpu_pool.max_nodes,
                gpu_node_selector={GKE_ACCELERATOR_LABEL: settings.gpu_pool.accelerator_type},
                # Its own CPU pool by the label infra/cluster.py gives it (the component defaults to any node).
                cpu_node_selector=CPU_NODES.node_selector,
                gpus_per_pod=settings.gpu_pool.accelerator_count,
                startup_minutes=settings.serving.startup_minutes,
                queue_time_target_us=settings.queue_time_target_us(region.name),
                autoscaling=autoscale,
                monitoring=True,
                load_test=True,
                admin_key=self._admin_key.result,
                grafana_admin_password=self._grafana.result,
                inference_auth=settings.serving.inference_auth,
                inference_key_slot=settings.serving.inference_key_slot,
                **{f"inference_key_{slot}": key.result for slot, key in self._inference_keys.items()},
            ),
            wiring=ClusterWiring(
                # Workload Identity tokens come from the IAM Credentials API: the pods wait for it as for the grants.
                bucket_access=[*self._store.read_access, *apis.for_workloads],
                model_digest=digest,
                load_test=_load_test(settings),
                monitoring=_monitoring(settings, region.name),
                lifecycle=settings.lifecycle,
                # A held region's Triton reads configs/REGION.pbtxt, which the sync's --hold REGION writes.
                model_config_name=region.name if region.name in settings.model_store.hold_regions else None,
            ),
            python=self._python,
        )

    def _load_balancer(self, settings: StackSettings) -> GlobalLoadBalancer:
        lb = settings.load_balancer
        return GlobalLoadBalancer(
            "global",
            GlobalLoadBalancerArgs(
                project=settings.project,
                stack=settings.stack,
                network=self._network.vpc.id,
                regions=tuple(
                    RegionBackend(
                        region=name,
                        zones=tuple(region_settings.zones),
                        neg_names=self._regions[name].triton.serving.neg_names,
                        negs_ready=self._regions[name].negs.ready,
                        node_service_account=self._regions[name].cluster.node_service_account.email,
                        capacity_scaler=settings.capacity_scaler(name),  # regionOverrides: a rollout's drain
                    )
                    for region_settings in settings.regions
                    for name in (region_settings.name,)
                ),
                max_rate_per_pod=backend_rates(lb.max_rate_per_pod, shares_of(lb.http_share_percent)),
                domain=lb.domain,
                rate_limit_per_minute=lb.rate_limit_per_minute,
                source_ranges=lb.source_ranges,
                lifecycle=settings.lifecycle,
            ),
            opts=self._moved,
        )

    def _outputs(self) -> dict[str, Any]:
        settings = self._settings
        clusters = {name: r.cluster for name, r in self._regions.items()}
        self.clusters = {name: c.cluster.name for name, c in clusters.items()}
        self.endpoints = {name: c.cluster.endpoint for name, c in clusters.items()}
        self.kubeconfigs = {name: c.kubeconfig for name, c in clusters.items()}
        self.access = {name: _access(settings, name, c.cluster_name) for name, c in clusters.items()}
        self.model_repository = self._served_repository
        self.triton_admin_key = self._admin_key.result
        self.grafana_admin_password = self._grafana.result
        self.inference_outputs = self._inference_outputs(settings)
        self.estimated_cost = stack_cost_summary(settings)
        outputs: dict[str, Any] = {
            "clusters": self.clusters,
            "endpoints": self.endpoints,
            "kubeconfigs": self.kubeconfigs,
            "access": self.access,
            "modelRepository": self.model_repository,
            "tritonAdminKey": self.triton_admin_key,
            "grafanaAdminPassword": self.grafana_admin_password,
            "estimatedCost": self.estimated_cost,
        }
        return outputs | self.inference_outputs | self.load_balancer_outputs

    def _inference_outputs(self, settings: StackSettings) -> dict[str, pulumi.Input[str]]:
        """inferenceKey (secret) and inferenceKeyHeader: what a client sends; inferenceNextKey (secret) and
        inferenceNextKeyHeader: what it adds before a key change (docs/security.md). None with inferenceAuth false."""
        if not self._inference_keys:
            return {}
        slot = settings.serving.inference_key_slot
        nxt = other_slot(slot)
        return {
            "inferenceKey": pulumi.Output.secret(self._inference_keys[slot].result),
            "inferenceKeyHeader": inference_key_header(slot),
            "inferenceNextKey": pulumi.Output.secret(self._inference_keys[nxt].result),
            "inferenceNextKeyHeader": inference_key_header(nxt),
        }

    @property
    def load_balancer_outputs(self) -> dict[str, pulumi.Input[str]]:
        """lbAddress, httpEndpoint and (with a domain) grpcEndpoint where the global load balancer is on; else none."""
        if self._lb is None:
            return {}
        domain = self._settings.load_balancer.domain
        address = self._lb.address.address
        outputs: dict[str, pulumi.Input[str]] = {
            "lbAddress": address,
            "httpEndpoint": f"https://{domain}/v2/models/MODEL/infer"
            if domain
            else pulumi.Output.concat("http://", address, "/v2/models/MODEL/infer"),
        }
        return outputs | ({"grpcEndpoint": f"{domain}:443"} if domain else {})


def _checked(name: str, args: TritonGkeSystemArgs) -> StackSettings:
    """The settings, or one ArgsError line naming the field, before any child is declared."""
    where = f"TritonGkeSystem {name!r}"
    if not isinstance(args, dict):
        raise ArgsError(where, f"args: expected a TritonGkeSystemArgs mapping, got {type(args).__name__}")
    unknown = sorted(set(args) - set(TritonGkeSystemArgs.__annotations__))
    if unknown:
        raise ArgsError(
            where, f"{unknown[0]}: unknown field; expected settings and optionally python, model_repository_dir"
        )
    settings = args.get("settings")
    if not isinstance(settings, StackSettings):
        raise ArgsError(where, "settings: expected StackSettings (triton_gke.settings.load_stack_settings)")
    python = args.get("python", VENV_PYTHON)
    if not isinstance(python, str) or not python.strip():
        raise ArgsError(where, f"python: {python!r} is not valid; expected the path of a Python interpreter")
    folder = args.get("model_repository_dir", "build/model_repository")
    if not isinstance(folder, str) or not folder.strip():
        raise ArgsError(where, f"model_repository_dir: {folder!r} is not valid; expected the built repository's path")
    return settings


def _load_test(settings: StackSettings) -> LoadTestArgs:
    load = settings.load_test
    return LoadTestArgs(
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
    )


def _monitoring(settings: StackSettings, region: str) -> MonitoringArgs:
    m = settings.monitoring
    return MonitoringArgs(
        region=region,
        stack=settings.stack,
        slo=m.slo,
        mode=m.mode,
        retention=m.retention,
        storage_gb=m.storage_gb,
        grafana_admin_password="",  # TritonOnCluster puts in the password of its Args
        watched_namespaces={},  # and the namespaces it creates
        web_ui_source_ranges=settings.web_ui_source_ranges,
    )


def _access(settings: StackSettings, region: str, cluster_name: str) -> dict[str, str]:
    """How an operator reaches the region's cluster, Triton, Locust and (builtin monitoring) Grafana and Prometheus."""
    http = PORTS["http"]
    access = {
        "credentials": f"gcloud container clusters get-credentials {cluster_name} "
        f"--region {region} --project {settings.project}",
        # The region's own Triton, past the load balancer: what `triton-gke smoke` checks after an `up`.
        "triton": f"kubectl -n {TRITON_NAMESPACE} port-forward svc/{TRITON_APP} {http}:{http}  "
        f"# then: triton-gke smoke http://localhost:{http}",
        "locust": f"kubectl -n {LOCUST_NAMESPACE} port-forward svc/locust-master "
        f"{LOCUST_WEB_PORT}:{LOCUST_WEB_PORT}  # then http://localhost:{LOCUST_WEB_PORT}",
    }
    if settings.monitoring.mode != "builtin":
        return access
    return access | {
        "grafana": f"kubectl -n {MONITORING_NAMESPACE} port-forward svc/grafana {GRAFANA_PORT}:{GRAFANA_PORT}"
        f"  # then http://localhost:{GRAFANA_PORT}, "
        "user admin, password: pulumi stack output grafanaAdminPassword --show-secrets",
        "prometheus": f"kubectl -n {MONITORING_NAMESPACE} port-forward svc/prometheus "
        f"{PROMETHEUS_PORT}:{PROMETHEUS_PORT}",
    }
