"""TritonOnCluster: Triton serving a GCS model repository on an EXISTING GKE cluster, optionally with its HPA,
monitoring (DCGM exporter, Prometheus, Grafana) and a Locust load test.

The commonest user is a team that has a GKE cluster with a T4 node pool: it passes the model repository and,
optionally, a kubeconfig (or its own kubernetes Provider in `opts.providers`). The stack's own program composes the
same component per region (infra/system.py), so the two users share one path.

Child resources are named `<role>-<name>` (triton-NAME, locust-NAME, monitoring-NAME, autoscaling-NAME): the names
the stack's resources had before this component existed, so `pulumi up` on an existing stack moves them in its state
(see `child_aliases`) instead of replacing them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as kubernetes
import pulumi_random as random

from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS, PORTS, inference_key_header, other_slot
from triton_gke.contracts.workloads import ADAPTER_NAME, TRITON_APP, Namespaces
from triton_gke.k8s import on_cluster_args as checks
from triton_gke.k8s.autoscaling import Autoscaling, AutoscalingArgs, serves_custom_metrics
from triton_gke.k8s.common import GPU_NODES, ArgsError, PodPlacement, unknown_field_problem
from triton_gke.k8s.loadtest import LoadTest, LoadTestArgs
from triton_gke.k8s.monitoring import Monitoring, MonitoringArgs
from triton_gke.k8s.triton import TritonServing, TritonServingArgs, triton_address
from triton_gke.model_repo.settings import TRITON_IMAGE_TAG
from triton_gke.observability.settings import SloSettings
from triton_gke.policy.principals import component_service_account
from triton_gke.settings.lifecycle import DEFAULTS as LIFECYCLE_DEFAULTS
from triton_gke.settings.lifecycle import STACK_KEYS as LIFECYCLE_KEYS
from triton_gke.settings.lifecycle import LifecycleSettings, disruption_problem, lifecycle_problem

# The component provider host names a component `<package>:index:<ClassName>` (pulumi/provider/experimental/
# component.py validate_resource_type accepts only the `index` module; analyzer.py: "all the Pulumi types have the
# typestring `<provider>:index:<type>`"): the in-process token is the same, so both paths give one URN.
TYPE_TOKEN = "triton-gke:index:TritonOnCluster"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver"
# The stack's defaults (Pulumi.yaml: tritonImageTag, gpuAcceleratorType, gpuMinNodes, gpuMaxNodes, ...):
# tests/unit/infra/test_public_components.py checks these equal the schema's defaults. The tag is the model
# repository's own default (one value: the build records it, and the image must match the build).
DEFAULT_IMAGE_TAG = TRITON_IMAGE_TAG
DEFAULT_ACCELERATOR = "nvidia-tesla-t4"
DEFAULT_MIN_REPLICAS, DEFAULT_MAX_REPLICAS = 1, 3
DEFAULT_STARTUP_MINUTES = 40
DEFAULT_QUEUE_TIME_TARGET_US = 30_000
DEFAULT_LOAD_TEST = LoadTestArgs(
    triton_address=triton_address("http"), model="original", rps_per_user=1, protocol="http", payload="fp32", workers=10
)
# GKE labels every GPU node with its accelerator type (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus,
# "cloud.google.com/gke-accelerator") and taints it nvidia.com/gpu (same page: "GKE automatically taints the GPU
# nodes"), so these defaults fit any GKE cluster with a T4 pool.
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"


class Toleration(TypedDict, total=False):
    """A taint the pods tolerate, spelt as Kubernetes' Toleration; every field optional."""

    # https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/ (checked by on_cluster_args.py).

    key: str
    """The taint's key; empty (with operator Exists) tolerates every taint."""
    operator: str
    """Exists (any value) or Equal (the taint's value must equal value); default Equal."""
    value: str
    """The taint's value (operator Equal only)."""
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute; empty: every effect."""


class NamespaceNames(TypedDict, total=False):
    """The namespaces the component creates, each a DNS-1123 label, all different, none of Kubernetes' own."""

    triton: str
    """Triton's Deployment, Services and service account; default triton."""
    load_test: str
    """Locust's master and workers (load_test); default load."""
    monitoring: str
    """Prometheus, Grafana and prometheus-adapter (monitoring); default monitoring."""
    gpu_metrics: str
    """NVIDIA's DCGM exporter, a privileged namespace (monitoring); default gpu-metrics."""


class TritonOnClusterArgs(TypedDict):
    """The inputs of TritonOnCluster."""

    model_repository: pulumi.Input[str]
    """gs://BUCKET/PREFIX holding a Triton model repository (one folder per model, each with its config.pbtxt)."""
    kubeconfig: NotRequired[pulumi.Input[str]]
    """A kubeconfig for the cluster; absent: the kubernetes provider passed in opts (providers=...) is used."""
    gpu_node_selector: NotRequired[pulumi.Input[Mapping[str, str]]]
    """The node labels the Triton pods select; default GKE's accelerator label for a T4 (nvidia-tesla-t4)."""
    gpu_toleration_key: NotRequired[pulumi.Input[str]]
    """The key of the GPU nodes' taint the Triton and DCGM exporter pods tolerate (any value, NoSchedule); default
    nvidia.com/gpu, the taint GKE puts on GPU nodes."""
    cpu_node_selector: NotRequired[Mapping[str, str]]
    """The node labels Locust, Prometheus, Grafana and prometheus-adapter select; default none (any node)."""
    cpu_tolerations: NotRequired[Sequence[Toleration]]
    """The taints Locust, Prometheus, Grafana and prometheus-adapter tolerate; default none."""
    min_replicas: NotRequired[int]
    """Triton pods at least (one per GPU node); the fixed count without autoscaling. Default 1."""
    max_replicas: NotRequired[int]
    """Triton pods at most, the HPA's bound; also sizes the rollout wait. Default 3 (or min_replicas if more)."""
    image_tag: NotRequired[str]
    """The tag of nvcr.io/nvidia/tritonserver; default: the toolkit's pinned Triton tag."""
    model_reader_service_account: NotRequired[pulumi.Input[str]]
    """The Google service account email the pods act as through Workload Identity to read the bucket; absent: none."""
    service_account_name: NotRequired[str]
    """The Kubernetes service account the Triton pods run as, in Triton's namespace (a DNS-1123 label); default one per
    instance, tritonserver-PROJECT-STACK-NAME-DIGEST (service_account_name output). Workload Identity names it
    PROJECT.svc.id.goog[NAMESPACE/NAME] in every cluster of the project: bind the reader to exactly that member."""
    autoscaling: NotRequired[bool]
    """An HPA on Triton's queue time (needs monitoring: its adapter serves the metric). Default false."""
    monitoring: NotRequired[bool]
    """DCGM exporter, Prometheus, Grafana in the cluster (needs load_test: Prometheus scrapes it). Default false."""
    load_test: NotRequired[bool]
    """A Locust master and workers that load Triton. Default false."""
    container_native_lb: NotRequired[bool]
    """A `cloud.google.com/neg` Service: GKE then creates zonal NEGs NAME-http and NAME-grpc in the project, for a load
    balancer of yours; their names are project-wide, so two clusters in one zone need two names. Default false."""
    gpus_per_pod: NotRequired[int]
    """GPUs each Triton pod takes (all of its node's): 1, 2 or 4, the T4 machine shapes. Default 1."""
    startup_minutes: NotRequired[int]
    """How long one pod may take from scheduling to Ready (model load, TensorRT builds). Default 40."""
    queue_time_target_us: NotRequired[int]
    """The average queue time per request (microseconds) the HPA holds each pod to. Default 30000."""
    admin_key: NotRequired[pulumi.Input[str]]
    """The key of Triton's admin APIs: 15-256 of A-Z a-z 0-9 - . _ ~ + /; absent: a random one (admin_key output)."""
    grafana_admin_password: NotRequired[pulumi.Input[str]]
    """Grafana's admin password, at least 15 characters (monitoring only); absent: a random one."""
    inference_auth: NotRequired[bool]
    """Inference (HTTP .../infer, gRPC ModelInfer) answers only requests carrying the key of inference_key_slot in its
    header (inference_key, inference_key_header outputs). Default true; false opens inference to every caller."""
    inference_key_slot: NotRequired[str]
    """Which of the two inference keys Triton checks: a (default) or b. Changing it rolls the pods one at a time; a
    client sending both keys (inference_key, inference_next_key) meanwhile never fails (docs/security.md)."""
    inference_key_a: NotRequired[pulumi.Input[str]]
    """Slot a's inference key: 15-256 of A-Z a-z 0-9 - . _ ~ + /; absent: a random one."""
    inference_key_b: NotRequired[pulumi.Input[str]]
    """Slot b's inference key: 15-256 of A-Z a-z 0-9 - . _ ~ + /; absent: a random one."""
    region: NotRequired[str]
    """The region label of this cluster's metrics and alerts (monitoring only); default the component's name."""
    namespaces: NotRequired[NamespaceNames]
    """The namespaces to create, by role; each role left out keeps its default (triton, load, monitoring,
    gpu-metrics). Two instances on one cluster need namespaces of their own, and only one may autoscale."""
    adapter_name: NotRequired[str]
    """The prefix of prometheus-adapter's cluster-wide RBAC objects (autoscaling only), a DNS-1123 label of at most 47
    characters; default prometheus-adapter. Its APIService, v1beta1.custom.metrics.k8s.io, is one per cluster."""


@dataclass(frozen=True)
class ClusterWiring:
    """What a composing Python component hands TritonOnCluster beyond its Args: resources to wait for and the
    stack's typed choices, which a component provider (plain Inputs only) cannot carry. Defaults: a standalone use.
    """

    # IAM members, Workload Identity bindings, enabled APIs: Triton's Deployment waits for them.
    bucket_access: Sequence[pulumi.Resource] = ()
    # What Triton's NEG Service waits for (infra/negs.py ZonalNegs.cleanup).
    neg_cleanup: Sequence[pulumi.Resource] = ()
    neg_name_prefix: str | None = None
    # The NVIDIA driver branch of the GPU nodes (e.g. 535) where the composer knows it: a CUDA 13 image needs one
    # that runs it (model_repo/settings.py runs_on_driver). None: unknown, so CUDA 12 images only.
    driver_branch: int | None = None
    model_digest: str = ""
    load_test: LoadTestArgs = DEFAULT_LOAD_TEST
    # The monitoring choices (watched namespaces and the password are filled in here); None: builtin defaults.
    monitoring: MonitoringArgs | None = None
    # Where the direct children lived before (e.g. [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]); the engine
    # derives their descendants' aliases from these (https://www.pulumi.com/docs/iac/concepts/resources/options/aliases/:
    # "the engine combines a parent's aliases with each child's own name and type").
    child_aliases: Sequence[pulumi.Alias] = ()
    # The stack's lifecycle contract (settings/lifecycle.py): preStop, exit timeout, grace period, readiness gate,
    # disruption budget of the Triton pods; the global load balancer's health check and draining follow the same.
    lifecycle: LifecycleSettings = LIFECYCLE_DEFAULTS
    # The cluster's Kubernetes minor (33 for 1.33) where the composer knows it; it picks the preStop handler.
    kubernetes_minor: int | None = None
    # Where this Triton keeps the model versions live when its region was held (modelHoldRegions): the name of its
    # configs/NAME.pbtxt (model_repo/sync.py --hold), given to tritonserver as --model-config-name. None: config.pbtxt.
    model_config_name: str | None = None


class TritonOnCluster(pulumi.ComponentResource):
    """Triton serving a GCS model repository on an existing GKE cluster, with optional HPA, monitoring and Locust."""

    namespace: pulumi.Output[str]
    """The namespace Triton runs in."""
    http_endpoint: pulumi.Output[str]
    """Triton's HTTP/REST endpoint inside the cluster (http://HOST:PORT)."""
    grpc_endpoint: pulumi.Output[str]
    """Triton's gRPC endpoint inside the cluster (HOST:PORT, as gRPC clients take it)."""
    admin_key: pulumi.Output[str]
    """The key of Triton's admin APIs (secret)."""
    service_account_name: pulumi.Output[str]
    """The Kubernetes service account the Triton pods run as, in `namespace`: the Workload Identity member to bind is
    serviceAccount:PROJECT.svc.id.goog[NAMESPACE/SERVICE_ACCOUNT_NAME]."""
    inference_key: pulumi.Output[str]
    """The key inference requests carry in inference_key_header (secret); empty with inference_auth false."""
    inference_key_header: pulumi.Output[str]
    """The HTTP header and gRPC metadata key of inference_key; empty with inference_auth false."""
    inference_next_key: pulumi.Output[str]
    """The other slot's key, which a key change moves to (secret); empty with inference_auth false."""
    inference_next_key_header: pulumi.Output[str]
    """The header of inference_next_key; empty with inference_auth false."""

    def __init__(
        self,
        name: str,
        args: TritonOnClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        wiring: ClusterWiring | None = None,
    ) -> None:
        wiring = wiring or ClusterWiring()
        # Before any child: a refusal leaves nothing half-declared.
        mode = wiring.monitoring.mode if wiring.monitoring else "builtin"
        check_args(name, args, driver_branch=wiring.driver_branch, monitoring_mode=mode)
        a = _with_defaults(args, name)
        check_lifecycle(name, wiring.lifecycle, a["min_replicas"])
        claim_cluster_names(name, a, opts)
        super().__init__(TYPE_TOKEN, name, None, opts)
        child = self._child_options(name, a)
        self._cpu_placement = cpu_placement(a)
        self._namespaces = Namespaces(**a["namespaces"])
        self.admin_key = pulumi.Output.secret(self._key(name, a, "admin_key", f"triton-admin-key-{name}"))
        self._inference_keys = self._inference_key_set(name, a)
        self._inference_outputs(a)
        self._serving = TritonServing(
            f"triton-{name}", self._serving_args(name, a, wiring), opts=self._with_aliases(child, wiring)
        )
        names = self._namespaces
        namespaces: dict[str, pulumi.Input[str]] = {names.triton: self._serving.namespace.metadata.name}
        self._load_test = self._locust(name, a, wiring, child)
        if self._load_test is not None:
            namespaces[names.load_test] = self._load_test.namespace.metadata.name
        self._monitoring = self._monitor(name, a, wiring, namespaces, child)
        self._autoscaling = self._autoscaler(name, a, wiring, child)
        self.namespace = pulumi.Output.from_input(self._serving.namespace.metadata.name)
        self.http_endpoint = self.namespace.apply(lambda ns: f"http://{_host(ns)}:{PORTS['http']}")
        self.grpc_endpoint = self.namespace.apply(lambda ns: f"{_host(ns)}:{PORTS['grpc']}")
        self.service_account_name = pulumi.Output.from_input(a["service_account_name"])
        self.register_outputs(
            {
                "namespace": self.namespace,
                "http_endpoint": self.http_endpoint,
                "grpc_endpoint": self.grpc_endpoint,
                "admin_key": self.admin_key,
                "service_account_name": self.service_account_name,
                "inference_key": self.inference_key,
                "inference_key_header": self.inference_key_header,
                "inference_next_key": self.inference_next_key,
                "inference_next_key_header": self.inference_next_key_header,
            }
        )

    @property
    def serving(self) -> TritonServing:
        """The Triton Deployment and Services (the global load balancer reads its NEG Service and names)."""
        return self._serving

    @property
    def load_test(self) -> LoadTest | None:
        return self._load_test

    @property
    def monitoring(self) -> Monitoring | None:
        return self._monitoring

    @property
    def autoscaling(self) -> Autoscaling | None:
        return self._autoscaling

    def _child_options(self, name: str, a: dict[str, Any]) -> pulumi.ResourceOptions:
        # Without a kubeconfig the children inherit the provider the caller put in opts (providers=...): a child
        # takes its parent's provider for the package (https://www.pulumi.com/docs/iac/concepts/resources/options/providers/).
        if "kubeconfig" not in a:
            return pulumi.ResourceOptions(parent=self)
        provider = kubernetes.Provider(
            f"k8s-{name}", kubeconfig=a["kubeconfig"], opts=pulumi.ResourceOptions(parent=self)
        )
        return pulumi.ResourceOptions(parent=self, providers=[provider])

    def _key(self, name: str, a: dict[str, Any], key: str, resource_name: str) -> pulumi.Input[str]:
        """The key given in field `key` (an Output checked once known: checked_key), else a generated one."""
        given = a.get(key)
        return self._secret(None if given is None else checked_key(name, key, given), resource_name)

    def _secret(self, given: pulumi.Input[str] | None, resource_name: str) -> pulumi.Input[str]:
        if given is not None:
            return given
        return random.RandomPassword(
            resource_name, length=40, special=False, opts=pulumi.ResourceOptions(parent=self)
        ).result

    def _inference_key_set(self, name: str, a: dict[str, Any]) -> dict[str, pulumi.Output[str]] | None:
        """Slot -> its key (secret), given or generated; None with inference_auth false (no key, no resource)."""
        if not a["inference_auth"]:
            return None
        return {
            slot: pulumi.Output.secret(self._key(name, a, field, f"triton-inference-key-{slot}-{name}"))
            for slot, field in checks.INFERENCE_KEY_FIELDS.items()
        }

    def _inference_outputs(self, a: dict[str, Any]) -> None:
        keys, slot = self._inference_keys, a["inference_key_slot"]
        if keys is None:
            self.inference_key = self.inference_next_key = pulumi.Output.secret("")
            self.inference_key_header = self.inference_next_key_header = pulumi.Output.from_input("")
            return
        self.inference_key, self.inference_next_key = keys[slot], keys[other_slot(slot)]
        self.inference_key_header = pulumi.Output.from_input(inference_key_header(slot))
        self.inference_next_key_header = pulumi.Output.from_input(inference_key_header(other_slot(slot)))

    def _serving_args(self, name: str, a: dict[str, Any], wiring: ClusterWiring) -> TritonServingArgs:
        return TritonServingArgs(
            image=f"{TRITON_IMAGE}:{a['image_tag']}",
            model_repository=a["model_repository"],
            reader_email=a.get("model_reader_service_account"),
            admin_key=self.admin_key,
            inference_keys=self._inference_keys,
            inference_key_slot=a["inference_key_slot"],
            accelerator_type=DEFAULT_ACCELERATOR,
            gpus_per_node=a["gpus_per_pod"],
            min_replicas=a["min_replicas"],
            max_replicas=a["max_replicas"],
            neg_name_prefix=(wiring.neg_name_prefix or name) if a["container_native_lb"] else None,
            autoscale=a["autoscaling"],
            bucket_access=tuple(wiring.bucket_access),
            model_digest=wiring.model_digest,
            startup_minutes=a["startup_minutes"],
            neg_cleanup=tuple(wiring.neg_cleanup),
            node_selector=a.get("gpu_node_selector"),
            toleration_key=a.get("gpu_toleration_key"),
            lifecycle=wiring.lifecycle,
            kubernetes_minor=wiring.kubernetes_minor,
            model_config_name=wiring.model_config_name,
            service_account=a["service_account_name"],
            namespace=self._namespaces.triton,
        )

    def _with_aliases(self, child: pulumi.ResourceOptions, wiring: ClusterWiring) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=list(wiring.child_aliases)))

    def _locust(
        self, name: str, a: dict[str, Any], wiring: ClusterWiring, child: pulumi.ResourceOptions
    ) -> LoadTest | None:
        if not a["load_test"]:
            return None
        load = wiring.load_test
        args = dataclasses.replace(
            load,
            placement=self._cpu_placement,
            namespace=self._namespaces.load_test,
            triton_address=triton_address(load.protocol, self._namespaces),
            # Both slots' keys, each in its header: Locust's requests pass whichever slot a pod checks, so a key
            # change (inference_key_slot) fails none of them.
            inference_headers={}
            if self._inference_keys is None
            else {inference_key_header(slot): key for slot, key in self._inference_keys.items()},
        )
        return LoadTest(f"locust-{name}", args, opts=self._with_aliases(child, wiring))

    def _monitor(
        self,
        name: str,
        a: dict[str, Any],
        wiring: ClusterWiring,
        namespaces: dict[str, pulumi.Input[str]],
        child: pulumi.ResourceOptions,
    ) -> Monitoring | None:
        if not a["monitoring"]:
            return None
        password = self._secret(a.get("grafana_admin_password"), f"grafana-admin-password-{name}")
        template = wiring.monitoring or MonitoringArgs(
            region=a.get("region", name),
            stack=pulumi.get_stack(),
            slo=SloSettings(),
            mode="builtin",
            retention="15d",
            storage_gb=20,
            grafana_admin_password="",
            watched_namespaces={},
        )
        args = dataclasses.replace(
            template,
            grafana_admin_password=password,
            watched_namespaces=namespaces,
            placement=self._cpu_placement,
            gpu_tolerations=dcgm_tolerations(a.get("gpu_toleration_key")),
            namespaces=self._namespaces,
        )
        return Monitoring(f"monitoring-{name}", args, opts=self._with_aliases(child, wiring))

    def _autoscaler(
        self, name: str, a: dict[str, Any], wiring: ClusterWiring, child: pulumi.ResourceOptions
    ) -> Autoscaling | None:
        if not a["autoscaling"] or self._monitoring is None or self._monitoring.namespace is None:
            return None
        serving, monitoring = self._serving, self._monitoring
        return Autoscaling(
            f"autoscaling-{name}",
            AutoscalingArgs(
                deployment=serving.deployment.metadata.name,
                namespace=serving.namespace.metadata.name,
                min_replicas=a["min_replicas"],
                max_replicas=a["max_replicas"],
                queue_time_target_us=a["queue_time_target_us"],
                prometheus_url=self._namespaces.prometheus_url(),
                adapter_namespace=self._namespaces.monitoring,
                adapter_name=a["adapter_name"],
                adapter_namespace_output=monitoring.namespace.metadata.name,
                # The names the HPA and the adapter's objects had inside TritonServing and Monitoring before the
                # Autoscaling component existed; those parents as aliases, so stacks that old move them too.
                hpa_name_prefix=f"triton-{name}",
                hpa_aliases=[pulumi.Alias(parent=serving)],
                adapter_name_prefix=f"monitoring-{name}",
                adapter_aliases=[pulumi.Alias(parent=monitoring)],
                placement=self._cpu_placement,
            ),
            opts=self._with_aliases(child, wiring),
        )


@dataclass(frozen=True)
class _Claim:
    """What one TritonOnCluster of this program creates on its cluster under names another must not take."""

    name: str
    cluster: Any  # the kubeconfig given, else the kubernetes provider in opts, else None: the ambient one
    namespaces: frozenset[str]
    autoscaling: bool
    monitoring: bool


# Per program: the engine's monitor is one per `pulumi up` (and one per run of the mock runtime in the tests).
_CLAIMS: weakref.WeakKeyDictionary[Any, list[_Claim]] = weakref.WeakKeyDictionary()


def claim_cluster_names(name: str, a: Mapping[str, Any], opts: pulumi.ResourceOptions | None) -> None:
    """Refuse, in one ArgsError line, a second TritonOnCluster of this program on the same cluster (same kubeconfig or
    kubernetes provider) that would create a namespace the first creates, or a second custom metrics adapter (its
    APIService, v1beta1.custom.metrics.k8s.io, is one per cluster: pulumi-kubernetes 4.29 and later fail creating an
    object that exists unless the provider sets upsertExistingObjects, pulumi/pulumi-kubernetes#2926, and with upsert
    the second adapter would take over the first's HPA); and two names whose children's names meet
    (`NAME` and `NAME-gpu`, both monitored: monitoring-NAME-gpu-ns is the first's GPU-metrics namespace and the
    second's monitoring namespace, one URN). A program the engine runs without a monitor (none) is not checked."""
    monitor = pulumi.runtime.settings.get_monitor()
    if monitor is None:
        return
    claim = _Claim(name, _cluster_of(a, opts), frozenset(_created_namespaces(a)), a["autoscaling"], a["monitoring"])
    where = f"TritonOnCluster {name!r}"
    try:
        claims = _CLAIMS.setdefault(monitor, [])
    except TypeError:  # a monitor that cannot be weakly referenced: nothing to compare with
        return
    for other in claims:
        meet = f"{other.name}-gpu" == name or other.name == f"{name}-gpu"
        if meet and claim.monitoring and other.monitoring:
            raise ArgsError(where, f"name: {name!r} and {other.name!r}, both monitored, give two children one name")
        if not _same_cluster(claim.cluster, other.cluster):
            continue
        shared = sorted(claim.namespaces & other.namespaces)
        if shared:
            raise ArgsError(
                where,
                f"namespaces: {shared[0]!r} is also created by TritonOnCluster {other.name!r} on the same cluster;"
                " give each instance namespaces of its own",
            )
        if claim.autoscaling and other.autoscaling:
            raise ArgsError(
                where,
                f"autoscaling: TritonOnCluster {other.name!r} already serves custom.metrics.k8s.io on the same cluster;"
                " a cluster has one custom metrics adapter, so leave autoscaling off here",
            )
    claims.append(claim)


def _created_namespaces(a: Mapping[str, Any]) -> list[str]:
    names = Namespaces(**a["namespaces"])
    created = [names.triton]
    created += [names.load_test] if a["load_test"] else []
    return created + ([names.monitoring, names.gpu_metrics] if a["monitoring"] else [])


def _cluster_of(a: Mapping[str, Any], opts: pulumi.ResourceOptions | None) -> Any:
    if "kubeconfig" in a:
        return a["kubeconfig"]
    given = (opts.providers if opts else None) or {}
    providers = given.values() if isinstance(given, Mapping) else given
    found = [p for p in providers if getattr(p, "package", None) == "kubernetes"]
    return found[0] if found else (opts.provider if opts and opts.provider else None)


def _same_cluster(first: Any, second: Any) -> bool:
    """Two kubeconfig texts alike, or the same provider object (or both the ambient one); an Output: itself only."""
    if isinstance(first, str) and isinstance(second, str):
        return first == second
    return first is second


def cpu_placement(a: Mapping[str, Any]) -> PodPlacement:
    """Where Locust, Prometheus, Grafana and prometheus-adapter run: the Args' CPU node selector and tolerations."""
    tolerations = tuple(
        kubernetes.core.v1.TolerationArgs(**{field: t[field] for field in checks.TOLERATION_FIELDS if t.get(field)})
        for t in a["cpu_tolerations"]
    )
    return PodPlacement(dict(a["cpu_node_selector"]), tolerations)


def gpu_toleration(key: pulumi.Input[str] | None) -> kubernetes.core.v1.TolerationArgs:
    """The GPU taint the Triton and DCGM exporter pods tolerate: `key` (default GKE's nvidia.com/gpu), any value,
    NoSchedule (k8s/triton.py TritonServing._toleration spells the same for Triton)."""
    default = GPU_NODES.toleration
    if key is None:
        return default
    return kubernetes.core.v1.TolerationArgs(key=key, operator=default.operator, effect=default.effect)


def dcgm_tolerations(key: pulumi.Input[str] | None) -> tuple[kubernetes.core.v1.TolerationArgs, ...]:
    """The DCGM exporter's tolerations: GKE's own nvidia.com/gpu always, and the Args' key besides. GKE taints GPU nodes
    nvidia.com/gpu where the cluster has non-GPU pools and adds the toleration only to pods that request GPUs
    (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus); Triton requests one, the exporter none, so a custom
    key must add to GKE's taint, not replace it, or the exporter never reaches a GPU node (red team of issue 33)."""
    default = GPU_NODES.toleration
    return (default,) if key is None or key == default.key else (default, gpu_toleration(key))


def _host(namespace: str) -> str:
    return f"{TRITON_APP}.{namespace}.svc.cluster.local"


# ---- the Args checks: one line naming the field, before any child is declared ---------------------------------


def _with_defaults(args: Mapping[str, Any], name: str) -> dict[str, Any]:
    defaults = {
        "min_replicas": DEFAULT_MIN_REPLICAS,
        "max_replicas": DEFAULT_MAX_REPLICAS,
        "image_tag": DEFAULT_IMAGE_TAG,
        "autoscaling": False,
        "monitoring": False,
        "load_test": False,
        "container_native_lb": False,
        "gpus_per_pod": 1,
        "startup_minutes": DEFAULT_STARTUP_MINUTES,
        "queue_time_target_us": DEFAULT_QUEUE_TIME_TARGET_US,
        # One per instance (policy/principals.py component_service_account): a shared default would be one Workload
        # Identity principal for every user's pods in the project. The component provider host runs the component
        # under the caller's project and stack (pulumi/provider/server.py _construct: reset_options(project=
        # request.project, stack=request.stack)), so hosted and in-process instances get the same name.
        "service_account_name": component_service_account(pulumi.get_project(), pulumi.get_stack(), name),
        "cpu_node_selector": {},
        "cpu_tolerations": (),
        "namespaces": {},
        "adapter_name": ADAPTER_NAME,
        "inference_auth": True,
        "inference_key_slot": INFERENCE_KEY_SLOTS[0],
    }
    given = {k: v for k, v in args.items() if v is not None}
    # A min_replicas above the default bound raises the default max_replicas with it (an explicit one is checked).
    if checks.is_int(given.get("min_replicas")) and "max_replicas" not in given:
        defaults["max_replicas"] = max(DEFAULT_MAX_REPLICAS, given["min_replicas"])
    return defaults | given


def check_args(name: str, args: Any, *, driver_branch: int | None = None, monitoring_mode: str = "builtin") -> None:
    """Refuse bad TritonOnClusterArgs (and a bad component name) with one ArgsError line naming the field.

    driver_branch: the NVIDIA driver branch of the GPU nodes where the composer knows it (TritonGkeRegion does),
    which lets a CUDA 13 image through when that driver runs it.
    """
    where = f"TritonOnCluster {name!r}"
    if not isinstance(args, Mapping):
        raise ArgsError(where, f"args: expected a TritonOnClusterArgs mapping, got {type(args).__name__}")
    for problem in _problems(name, args, driver_branch, monitoring_mode):
        raise ArgsError(where, problem)


class KeyValueError(pulumi.RunError):
    """ArgsError's one line, for a key checked once its Output is known. Not an ArgsError: that is a ValueError too,
    and the SDK turns a ValueError raised while it serializes an input into a new two-line ValueError naming the
    Output ("While processing input: ... ValueError has risen: ...", pulumi/runtime/rpc.py serialize_properties),
    which is no RunError and so ends in a traceback."""

    def __init__(self, component: str, problem: str) -> None:
        self.component = component
        self.problem = problem
        super().__init__(f"{component}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.component, self.problem)


def checked_key(name: str, key: str, given: pulumi.Input[str]) -> pulumi.Input[str]:
    """A key given as an Output (config.require_secret, another resource's output), checked by the rule a plain one
    meets (check_args) once its value is known: a bad one raises ArgsError's line, as a KeyValueError (a
    pulumi.RunError), from inside the apply. The SDK keeps the first exception of a resource registration and
    re-raises that exception itself at the program's end (pulumi/runtime/rpc_manager.py do_rpc:
    `self.unhandled_exception = exn`; runtime/stack.py wait_for_rpcs:
    `raise rpc_manager.unhandled_exception.with_traceback(...)`), and the language host prints a RunError as its
    message alone (ArgsError's docstring). A value known at preview (a config secret) fails the preview; one computed
    from a resource not yet created is checked only when `up` knows it, after what does not need the key."""
    if not isinstance(given, pulumi.Output):
        return given  # checked with the other Args, before any child (check_args)
    where = f"TritonOnCluster {name!r}"

    def check(value: Any) -> Any:
        problem = checks.known_key_problem(value, key)
        if problem:
            _quiet_copies_of(KeyValueError)
            raise KeyValueError(where, problem)
        return value

    return given.apply(check)


def _quiet_copies_of(kind: type[BaseException]) -> None:
    """Keep the event loop from printing the refusal again, with a traceback, for every Output built on the refused
    key. The program ends with the refusal itself (checked_key); the Outputs derived from it fail with the same
    exception, and those nothing awaited any more are reported by asyncio when collected ("Future exception was never
    retrieved", through the loop's exception handler: https://docs.python.org/3/library/asyncio-eventloop.html
    #error-handling-api). Only exceptions of `kind` are dropped; anything else reaches the handler as before."""
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    if getattr(previous, "quiets", None) is kind:
        return

    def handler(running: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), kind):
            return
        if previous is None:
            running.default_exception_handler(context)
        else:
            previous(running, context)

    handler.quiets = kind  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def check_lifecycle(name: str, lifecycle: LifecycleSettings, min_replicas: int) -> None:
    """The lifecycle contract a Python composer wires in (ClusterWiring.lifecycle) holds the stack's rules
    (settings/lifecycle.py), which a stack's settings pass before they get here: the ranges and order of the waits,
    with the SLO the component does not know taken as its shortest (1 s), and a disruption budget that leaves one of
    min_replicas serving. One ArgsError line naming the field and its stack key."""
    problem = lifecycle_problem(lifecycle, slo_latency_ms=1) or disruption_problem(lifecycle, min_replicas)
    if problem:
        key, reason = problem
        field = next(f for f, k in LIFECYCLE_KEYS.items() if k == key)
        value = getattr(lifecycle, field)
        raise ArgsError(f"TritonOnCluster {name!r}", f"wiring.lifecycle.{field} ({key}) {value!r}: {reason}")


def _problems(name: str, args: Mapping[str, Any], driver_branch: int | None, monitoring_mode: str) -> list[str]:
    known = TritonOnClusterArgs.__annotations__
    unknown = unknown_field_problem(args, known)
    if unknown:
        return [unknown]
    a = _with_defaults(args, name)
    field_checks = checks.field_checks(serves_custom_metrics(monitoring_mode), driver_branch)
    found = [checks.name_problem(name), *(field_checks[key](a.get(key), a) for key in known)]
    return [p for p in found if p]
