"""Triton Inference Server on one cluster: one pod per T4 node, serving the model bucket.

The pod reads gs://BUCKET/PREFIX as a Kubernetes service account that Workload Identity maps
to the bucket's reader. Admin APIs (model repository control, shared memory, logging, trace)
answer only requests that carry the admin key header, which inference clients never get; inference answers only
requests that carry the inference key (contracts/triton.py inference_restrictions), unless the caller opted out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as kubernetes

# Names, ports, health paths and the TensorRT cache path other rooms must agree on live in contracts/; the model store
# binds NAMESPACE/<the service account> to its bucket reader by Workload Identity (a stack passes its own
# name, policy/principals.py triton_service_account; TRITON_SERVICE_ACCOUNT is the standalone default).
from triton_gke.contracts.triton import (
    ADMIN_KEY_ENV,
    INFERENCE_KEY_ENV,
    INFERENCE_KEY_SLOTS,
    LIVE_PATH,
    PORTS,
    READY_PATH,
    ROLLING_MAX_SURGE,
    ROLLING_MAX_UNAVAILABLE,
    TRT_CACHE_DIR,
    triton_server_args,
)
from triton_gke.contracts.workloads import (
    DEFAULT_NAMESPACES,
    TRITON_APP,
    TRITON_COMPONENT,
    TRITON_NAMESPACE,
    TRITON_SERVICE_ACCOUNT,
    Namespaces,
    pod_labels,
)
from triton_gke.k8s.common import (
    GPU_NODES,
    http_probe,
    non_root_container_security,
    non_root_pod_security,
    restricted_namespace,
)
from triton_gke.settings.lifecycle import DEFAULTS as LIFECYCLE_DEFAULTS
from triton_gke.settings.lifecycle import LifecycleSettings

TRITON_UID = 1000  # the triton-server user of NVIDIA's image
# Pod-template annotation holding the model repository's digest: a model change is a template change, so a rollout.
MODEL_DIGEST_ANNOTATION = "triton-gke/model-repository-digest"
# Pod-template annotation holding a digest of the key Triton checks (the active slot's): a Deployment rolls out only
# when .spec.template changes ("A Deployment's rollout is triggered if and only if the Deployment's Pod template
# (that is, .spec.template) is changed",
# https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#updating-a-deployment), and a changed Secret
# changes no template: running pods would keep the old key from their start while restarted ones read the new one.
INFERENCE_KEY_DIGEST_ANNOTATION = "triton-gke/inference-key-digest"
KEY_DIGEST_HEX = 16  # 64 bits: tells two keys apart, and is no key material
STARTUP_PROBE_PERIOD_S = 10
# The Secret holding both inference keys (data keys: the slots, a and b).
INFERENCE_KEYS_SECRET = "triton-inference-keys"
# The pod condition GKE's NEG controller sets once the pod's endpoint passes the load balancer's health check
# (kubernetes/ingress-gce pkg/neg/types/shared/types.go NegReadinessGate). See TritonServing._readiness_gates.
NEG_READINESS_GATE = "cloud.google.com/load-balancer-neg-ready"
# The preStop `sleep` action: beta and on by default from Kubernetes 1.30, GA in 1.34 (KEP-3960,
# https://github.com/kubernetes/enhancements/issues/3960); before 1.30 the hook runs the image's `sleep` instead.
SLEEP_ACTION_MINOR = 30


def triton_address(protocol: str, namespaces: Namespaces = DEFAULT_NAMESPACES) -> str:
    """In-cluster address of Triton's ClusterIP Service for `protocol` (http or grpc)."""
    return f"{namespaces.triton_host()}:{PORTS[protocol]}"


def neg_names(prefix: str) -> dict[str, str]:
    """Port name (http, grpc) -> name of the zonal NEGs GKE creates for it in every zone (the Service annotation)."""
    return {port: f"{prefix}-{port}" for port in ("http", "grpc")}


@dataclass(frozen=True)
class TritonServingArgs:
    image: str
    model_repository: pulumi.Input[str]
    # The Google service account the pods act as through Workload Identity; None: no annotation (the cluster's
    # own way to reach the bucket, e.g. the nodes' service account).
    reader_email: pulumi.Input[str] | None
    admin_key: pulumi.Input[str]
    # Slot (a, b) -> the key inference requests must carry in that slot's header (inference_key_header); Triton checks
    # inference_key_slot's. Both live in one Secret, so a pod of either slot finds its key during a key change.
    # None: inference open to every caller (the stack's inferenceAuth false).
    inference_keys: Mapping[str, pulumi.Input[str]] | None
    accelerator_type: str
    gpus_per_node: int
    # Without an HPA, min_replicas is the fixed pod count; max_replicas sizes Pulumi's wait for a rollout that
    # replaces the pods one at a time (triton_timeouts).
    min_replicas: int
    max_replicas: int
    # Names of the zonal NEGs GKE creates for the global load balancer; None: no NEG Service, so GKE creates none
    # (standalone TritonOnCluster without container_native_lb).
    neg_name_prefix: str | None
    # Whether an HPA (k8s.autoscaling.Autoscaling, where k8s.autoscaling.serves_custom_metrics) owns the replica
    # count. Without a metric source an HPA never scales (FailedGetPodsMetric), so Triton then runs a fixed
    # min_replicas that Pulumi owns.
    autoscale: bool = True
    # What a pod needs before it can read the bucket (IAM members, Workload Identity binding): without them Triton
    # cannot list gs://BUCKET and, with --exit-on-error, crash-loops. The Deployment waits for them.
    bucket_access: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Digest of the model repository the sync uploaded; in the pod template, so a model change rolls every pod.
    model_digest: str = ""
    # tritonStartupMinutes: one pod from scheduling to Ready; the startup probe and Pulumi's waits derive from it.
    startup_minutes: int = 40
    # What the NEG Service waits for: the removal of NEGs an earlier cluster of the same name left (infra/negs.py,
    # ZonalNegs.cleanup), which, depending on the cluster, is so also deleted after this Service and before the cluster.
    neg_cleanup: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Where the pods run: None selects GKE's accelerator label for `accelerator_type` and tolerates the GPU taint
    # (contracts/placement.py); a cluster with other GPU node labels or taints names its own.
    node_selector: pulumi.Input[Mapping[str, str]] | None = None
    toleration_key: pulumi.Input[str] | None = None
    # How a pod leaves the load balancer: preStop wait, exit timeout, grace period, readiness gate, disruption budget.
    lifecycle: LifecycleSettings = LIFECYCLE_DEFAULTS
    # The cluster's Kubernetes minor (33 for 1.33) where known: it picks the preStop handler (pre_stop_handler).
    kubernetes_minor: int | None = None
    # tritonserver --model-config-name: the region holds its model versions (contracts/triton.py triton_server_args).
    model_config_name: str | None = None
    # The name of the Kubernetes service account the pods run as, in `namespace`: the principal
    # PROJECT.svc.id.goog[NAMESPACE/NAME] a Workload Identity binding names. A stack passes its own
    # (policy/principals.py triton_service_account), so stacks in one project do not share it.
    service_account: str = TRITON_SERVICE_ACCOUNT
    # The namespace the component creates and runs Triton in.
    namespace: str = TRITON_NAMESPACE
    # Which slot's key Triton checks (inferenceKeySlot); changing it rolls the pods one at a time.
    inference_key_slot: str = INFERENCE_KEY_SLOTS[0]


def startup_probe_failures(startup_minutes: int) -> int:
    """failureThreshold of the startup probe so that it allows `startup_minutes` (period STARTUP_PROBE_PERIOD_S)."""
    return startup_minutes * 60 // STARTUP_PROBE_PERIOD_S


def pre_stop_handler(seconds: int, kubernetes_minor: int | None) -> kubernetes.core.v1.LifecycleHandlerArgs:
    """The preStop wait: the kubelet's own `sleep` action (no binary needed in the image) from Kubernetes 1.30, where
    it is on by default (KEP-3960); on older clusters the image's `sleep` (NVIDIA's Triton images are Ubuntu-based,
    https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html). Unknown minor: the sleep action."""
    if kubernetes_minor is not None and kubernetes_minor < SLEEP_ACTION_MINOR:
        return kubernetes.core.v1.LifecycleHandlerArgs(
            exec_=kubernetes.core.v1.ExecActionArgs(command=["sleep", str(seconds)])
        )
    return kubernetes.core.v1.LifecycleHandlerArgs(sleep=kubernetes.core.v1.SleepActionArgs(seconds=seconds))


def triton_timeouts(startup_minutes: int, max_replicas: int) -> tuple[pulumi.CustomTimeouts, pulumi.CustomTimeouts]:
    """(Deployment, Services) custom timeouts from the startup budget.

    pulumi-kubernetes waits 10 minutes by default for a Deployment to be available and for a Service's endpoints to
    be ready, then fails the update and skips everything that depends on them, the load balancer included
    (https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deployment/,
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/core/v1/service/). On create every pod starts at
    once: one budget. A rolling update (maxSurge 0, maxUnavailable 1) replaces pods one after another: one budget
    per pod, up to max_replicas.
    """
    budget = f"{startup_minutes}m"
    rollout = f"{startup_minutes * max_replicas}m"
    return pulumi.CustomTimeouts(create=budget, update=rollout), pulumi.CustomTimeouts(create=budget, update=budget)


class TritonServing(pulumi.ComponentResource):
    namespace: kubernetes.core.v1.Namespace
    deployment: kubernetes.apps.v1.Deployment
    service: kubernetes.core.v1.Service
    neg_service: kubernetes.core.v1.Service | None

    def __init__(self, name: str, args: TritonServingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:k8s:TritonServing", name, None, opts)
        self._name = name
        self._args = args
        self.namespace = restricted_namespace(f"{name}-ns", args.namespace, self)
        ns = self.namespace.metadata.name
        child = pulumi.ResourceOptions(parent=self)
        service_account = kubernetes.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                name=args.service_account,
                namespace=ns,
                annotations=None
                if args.reader_email is None
                else {"iam.gke.io/gcp-service-account": args.reader_email},
            ),
            automount_service_account_token=False,
            opts=child,
        )
        admin_secret = kubernetes.core.v1.Secret(
            f"{name}-admin-key",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name="triton-admin-key", namespace=ns),
            string_data={"key": args.admin_key},
            opts=child,
        )
        inference_secret = self._inference_secret(ns)
        deployment_timeouts, self._service_timeouts = triton_timeouts(args.startup_minutes, args.max_replicas)
        self.deployment = kubernetes.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name=TRITON_APP, namespace=ns, labels=self.labels),
            spec=kubernetes.apps.v1.DeploymentSpecArgs(
                replicas=None if args.autoscale else args.min_replicas,
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=self.labels),
                template=self._pod_template(service_account, admin_secret, inference_secret),
                strategy=ROLLING_ONE_AT_A_TIME,
            ),
            # With an HPA, it alone owns spec.replicas (its minReplicas sets the count): Pulumi never sends the field.
            # With server-side apply a sent replicas conflicts with kube-controller-manager's scale subresource or
            # resets the count mid-rollout (pulumi/pulumi-kubernetes#2491), and ignore_changes would still send the old
            # value from state. Kubernetes: "Migrating Deployments and StatefulSets to horizontal autoscaling"
            # (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/, kubernetes/website#29739).
            # Without an HPA (operator monitoring mode) Pulumi owns a fixed count.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.bucket_access),
                custom_timeouts=deployment_timeouts,
            ),
        )
        self._disruption_budget(ns)
        self.service = self._service(ns, TRITON_APP, annotations={})
        # The `cloud.google.com/neg` annotation makes GKE's NEG controller create standalone zonal NEGs with these
        # names in the project, whether or not a load balancer uses them
        # (https://cloud.google.com/kubernetes-engine/docs/how-to/standalone-neg): only when asked.
        self.neg_service = (
            None
            if args.neg_name_prefix is None
            else self._service(
                ns,
                f"{TRITON_APP}-neg",
                annotations={"cloud.google.com/neg": self.neg_annotation},
                depends_on=args.neg_cleanup,
            )
        )
        self.register_outputs({"namespace": ns, "service": self.service.metadata.name})

    @property
    def _toleration(self) -> kubernetes.core.v1.TolerationArgs:
        default = GPU_NODES.toleration
        if self._args.toleration_key is None:
            return default
        return kubernetes.core.v1.TolerationArgs(
            key=self._args.toleration_key, operator=default.operator, effect=default.effect
        )

    @property
    def labels(self) -> dict[str, str]:
        return pod_labels(TRITON_APP, TRITON_COMPONENT)

    @property
    def neg_names(self) -> dict[str, str]:
        """Port name -> NEG name; empty without a NEG Service."""
        prefix = self._args.neg_name_prefix
        return {} if prefix is None else neg_names(prefix)

    @property
    def neg_annotation(self) -> str:
        ports = {str(PORTS[port]): {"name": neg} for port, neg in self.neg_names.items()}
        return json.dumps({"exposed_ports": ports}, sort_keys=True)

    def _inference_secret(self, ns: pulumi.Input[str]) -> kubernetes.core.v1.Secret | None:
        keys = self._args.inference_keys
        if keys is None:
            return None
        return kubernetes.core.v1.Secret(
            f"{self._name}-inference-keys",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name=INFERENCE_KEYS_SECRET, namespace=ns),
            string_data=dict(keys),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _pod_template(
        self,
        service_account: kubernetes.core.v1.ServiceAccount,
        admin_secret: kubernetes.core.v1.Secret,
        inference_secret: kubernetes.core.v1.Secret | None,
    ):
        a = self._args
        return kubernetes.core.v1.PodTemplateSpecArgs(
            metadata=kubernetes.meta.v1.ObjectMetaArgs(labels=self.labels, annotations=self._template_annotations),
            spec=kubernetes.core.v1.PodSpecArgs(
                service_account_name=service_account.metadata.name,
                automount_service_account_token=False,
                node_selector=a.node_selector or {"cloud.google.com/gke-accelerator": a.accelerator_type},
                tolerations=[self._toleration],
                # One pod per GPU node: it takes every GPU of the node, and never shares a node with another.
                affinity=_one_pod_per_node(self.labels),
                topology_spread_constraints=[_spread_over_zones(self.labels)],
                security_context=non_root_pod_security(TRITON_UID),
                # From deletion to SIGKILL, preStop included: preStop + exit timeout + margin (settings/lifecycle.py).
                termination_grace_period_seconds=a.lifecycle.termination_grace_s,
                readiness_gates=self._readiness_gates,
                containers=[self._container(admin_secret, inference_secret)],
                volumes=[
                    # TensorRT engines are built at model load (minutes on a T4) and kept for the pod's life.
                    kubernetes.core.v1.VolumeArgs(
                        name="trt-cache", empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs(size_limit="20Gi")
                    ),
                    kubernetes.core.v1.VolumeArgs(
                        name="dshm",
                        empty_dir=kubernetes.core.v1.EmptyDirVolumeSourceArgs(medium="Memory", size_limit="1Gi"),
                    ),
                ],
            ),
        )

    @property
    def _template_annotations(self) -> dict[str, pulumi.Input[str]]:
        """The model digest, and with inference keys the active key's digest: replacing either rolls every pod."""
        a = self._args
        annotations: dict[str, pulumi.Input[str]] = {MODEL_DIGEST_ANNOTATION: a.model_digest}
        if a.inference_keys is not None:
            active = a.inference_keys[a.inference_key_slot]
            annotations[INFERENCE_KEY_DIGEST_ANNOTATION] = active_key_digest(a.admin_key, active)
        return annotations

    def _container(
        self, admin_secret: kubernetes.core.v1.Secret, inference_secret: kubernetes.core.v1.Secret | None
    ) -> kubernetes.core.v1.ContainerArgs:
        a = self._args
        # Kubernetes expands $(VAR) in args from the container's env ("Define a command and arguments": "$(VAR)"
        # references an environment variable, https://kubernetes.io/docs/tasks/inject-data-application/
        # define-command-argument-container/#use-environment-variables-to-define-arguments): the keys stay in Secrets.
        inference_key = None if inference_secret is None else f"$({INFERENCE_KEY_ENV})"
        env = [_secret_env(ADMIN_KEY_ENV, admin_secret, "key")]
        if inference_secret is not None:
            env.append(_secret_env(INFERENCE_KEY_ENV, inference_secret, a.inference_key_slot))
        return kubernetes.core.v1.ContainerArgs(
            name="tritonserver",
            image=a.image,
            args=pulumi.Output.from_input(a.model_repository).apply(
                lambda repository: triton_server_args(
                    repository,
                    exit_timeout_s=a.lifecycle.exit_timeout_s,
                    model_config_name=a.model_config_name,
                    inference_key=inference_key,
                    inference_key_slot=a.inference_key_slot,
                )
            ),
            env=env,
            ports=[kubernetes.core.v1.ContainerPortArgs(name=n, container_port=p) for n, p in PORTS.items()],
            resources=kubernetes.core.v1.ResourceRequirementsArgs(
                requests={"cpu": "2500m", "memory": "8Gi"},
                limits={"memory": "12Gi", "nvidia.com/gpu": str(a.gpus_per_node)},
            ),
            security_context=non_root_container_security(),
            volume_mounts=[
                kubernetes.core.v1.VolumeMountArgs(name="trt-cache", mount_path=TRT_CACHE_DIR),
                kubernetes.core.v1.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
            ],
            # Loading (and TensorRT engine building) may take many minutes: only then do the other probes start.
            startup_probe=http_probe(
                READY_PATH,
                "http",
                period=STARTUP_PROBE_PERIOD_S,
                failures=startup_probe_failures(a.startup_minutes),
                timeout=3,
            ),
            readiness_probe=http_probe(READY_PATH, "http", period=5, failures=3, timeout=3),
            liveness_probe=http_probe(LIVE_PATH, "http", period=10, failures=3, timeout=3),
            # Keep serving until the load balancer has stopped sending (NEG detach, health check, programming): only
            # then SIGTERM, on which Triton refuses new connections (triton-inference-server/server#6230).
            lifecycle=kubernetes.core.v1.LifecycleArgs(
                pre_stop=pre_stop_handler(a.lifecycle.pre_stop_s, a.kubernetes_minor)
            ),
        )

    @property
    def _readiness_gates(self) -> list[kubernetes.core.v1.PodReadinessGateArgs] | None:
        """The NEG readiness gate on pods behind the standalone NEGs: a rollout then waits for each new pod to pass
        the load balancer's health check before removing an old one.

        GKE turns the gate on by itself only for container-native load balancing through Ingress ("Pod readiness",
        https://cloud.google.com/kubernetes-engine/docs/concepts/container-native-load-balancing). For the standalone
        NEGs of the `exposed_ports` annotation the NEG controller does reflect the condition
        (kubernetes/ingress-gce pkg/neg/controller.go mergeStandaloneNEGsPortInfo builds their PortInfo with
        readinessGate true), but only for pods whose spec lists the gate (pkg/neg/readiness/utils.go needToProcess),
        and nothing in ingress-gce adds it, so it is declared here. A NEG not yet attached to a health-checked backend
        service marks it true at once (pkg/neg/readiness/reflector.go getExpectedNegCondition), so a first `up` does
        not wait for the load balancer; a pod still unhealthy 10 minutes after creation is marked true too
        (reflector.go unreadyTimeout). Without NEGs nothing would ever set it: no gate.
        """
        a = self._args
        if a.neg_name_prefix is None or not a.lifecycle.neg_readiness_gate:
            return None
        return [kubernetes.core.v1.PodReadinessGateArgs(condition_type=NEG_READINESS_GATE)]

    def _disruption_budget(self, ns: pulumi.Input[str]) -> None:
        # Pods a node drain may take down at a time (tritonMaxUnavailable; 1: as a rollout, ROLLING_ONE_AT_A_TIME).
        kubernetes.policy.v1.PodDisruptionBudget(
            f"{self._name}-pdb",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(name=TRITON_APP, namespace=ns),
            spec=kubernetes.policy.v1.PodDisruptionBudgetSpecArgs(
                max_unavailable=self._args.lifecycle.pdb_max_unavailable,
                selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=self.labels),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _service(
        self,
        ns: pulumi.Input[str],
        name: str,
        annotations: dict[str, str],
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> kubernetes.core.v1.Service:
        return kubernetes.core.v1.Service(
            f"{self._name}-{name}-svc",
            metadata=kubernetes.meta.v1.ObjectMetaArgs(
                name=name, namespace=ns, labels=self.labels, annotations=annotations
            ),
            spec=kubernetes.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=self.labels,
                ports=[
                    kubernetes.core.v1.ServicePortArgs(name=n, port=p, target_port=n, app_protocol=_app_protocol(n))
                    for n, p in PORTS.items()
                    if n != "metrics" or name == TRITON_APP
                ],
            ),
            # Ready endpoints need a Ready Triton pod: wait as long as one may take to start.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=list(depends_on), custom_timeouts=self._service_timeouts
            ),
        )


# contracts/triton.py: why one pod at a time (the local rollout replays the same numbers).
ROLLING_ONE_AT_A_TIME = kubernetes.apps.v1.DeploymentStrategyArgs(
    type="RollingUpdate",
    rolling_update=kubernetes.apps.v1.RollingUpdateDeploymentArgs(
        max_surge=ROLLING_MAX_SURGE, max_unavailable=ROLLING_MAX_UNAVAILABLE
    ),
)


def key_digest(admin_key: str, active_key: str) -> str:
    """The first KEY_DIGEST_HEX hex digits of HMAC-SHA256(admin key, active inference key).

    Keyed, not a plain hash: the annotation is readable by whoever may read Deployments (Kubernetes' `view` role
    reads them but no Secret), and a plain digest of a key a user chose would let such a reader test guesses
    offline; without the admin key the value tells nothing of the inference key. The admin key feeds it too, so
    replacing the admin key also rolls the pods (every pod then checks the same admin key)."""
    digest = hmac.new(admin_key.encode(), active_key.encode(), hashlib.sha256).hexdigest()
    return digest[:KEY_DIGEST_HEX]


def active_key_digest(admin_key: pulumi.Input[str], active_key: pulumi.Input[str]) -> pulumi.Output[str]:
    """key_digest of the two keys, deliberately NOT a Pulumi secret. The SDK lifts an input object holding a secret
    Output into one secret value, so a secret annotation makes the Deployment's whole pod template secret: under the
    mock runtime every label, argument and the model digest read [secret], and preview and `plan --against` would show
    no change of the Deployment at all (checked: tests/unit/k8s/test_inference_auth.py). The digest is keyed with the
    admin key (key_digest), so the plain value tells nothing of either key; the keys themselves stay secrets, in the
    Secret only."""
    both = pulumi.Output.all(admin_key, active_key)
    return pulumi.Output.unsecret(both.apply(lambda keys: key_digest(keys[0], keys[1])))


def _secret_env(name: str, secret: kubernetes.core.v1.Secret, key: str) -> kubernetes.core.v1.EnvVarArgs:
    return kubernetes.core.v1.EnvVarArgs(
        name=name,
        value_from=kubernetes.core.v1.EnvVarSourceArgs(
            secret_key_ref=kubernetes.core.v1.SecretKeySelectorArgs(name=secret.metadata.name, key=key)
        ),
    )


def _app_protocol(port_name: str) -> str:
    return "kubernetes.io/h2c" if port_name == "grpc" else "http"


def _spread_over_zones(labels: dict[str, str]) -> kubernetes.core.v1.TopologySpreadConstraintArgs:
    """Triton's pods as even over the region's zones as the GPU nodes allow: a GPU VM stops for host maintenance
    (docs/upgrades.md), a zone may fail, and the others keep serving. "ScheduleAnyway tells the scheduler to still
    schedule it while prioritizing nodes that minimize the skew" (https://kubernetes.io/docs/concepts/scheduling-
    eviction/topology-spread-constraints/): a zone out of T4s never leaves a pod pending that another zone could run.
    """
    return kubernetes.core.v1.TopologySpreadConstraintArgs(
        max_skew=1,
        topology_key="topology.kubernetes.io/zone",
        when_unsatisfiable="ScheduleAnyway",
        label_selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
    )


def _one_pod_per_node(labels: dict[str, str]) -> kubernetes.core.v1.AffinityArgs:
    return kubernetes.core.v1.AffinityArgs(
        pod_anti_affinity=kubernetes.core.v1.PodAntiAffinityArgs(
            required_during_scheduling_ignored_during_execution=[
                kubernetes.core.v1.PodAffinityTermArgs(
                    label_selector=kubernetes.meta.v1.LabelSelectorArgs(match_labels=labels),
                    topology_key="kubernetes.io/hostname",
                )
            ]
        )
    )
