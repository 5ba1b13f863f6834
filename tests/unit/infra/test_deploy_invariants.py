"""Deploy invariants: behaviour of the real Google Cloud, GKE, Kubernetes and Pulumi APIs that the mock runtime
cannot refuse, checked on the plan of every stack.

The mocks accept anything, so a program that races an API or outwaits the engine still "plans". Each test below
encodes ONE rule the real APIs enforce, with its source in the docstring, and is evaluated on the plan of every
stack in STACKS (dev, staging, prod; the stack refuses operator monitoring mode, settings/monitoring.py). Reverting
the fix a rule guards makes that rule fail.

How to add a rule: one test function `test_<what the real API does>(plan)`; the docstring says what the real API
does, what goes wrong otherwise and cites the source (docs URL or public issue); use the graph helpers below
(`waits_for`, `triton`, `of_kind`...) rather than re-deriving the graph. `plan` is parametrized over STACKS and
module-scoped (each stack is evaluated once for the whole module). A rule that applies to some stacks only says
so in its body (e.g. `if not plan.of_type(BACKEND): pytest.skip(...)`), never by listing stack names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from tests.support.stacks import evaluate
from triton_gke.infra import project_services
from triton_gke.offline.runtime import Plan, PlannedResource

# name -> (stack file, overrides): every shipped stack.
STACKS: dict[str, tuple[str, dict[str, Any]]] = {
    "dev": ("dev", {}),
    "staging": ("staging", {}),
    "prod": ("prod", {}),
}

CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
GCP_SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
BACKEND = "gcp:compute/backendService:BackendService"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
TRITON_SERVING = "triton-gke:k8s:TritonServing"


@pytest.fixture(scope="module", params=list(STACKS))
def plan(request: pytest.FixtureRequest) -> Plan:
    stack, overrides = STACKS[request.param]
    return evaluate(stack, **overrides)


# ---- graph helpers ------------------------------------------------------------------------------------------------


def waits_for(plan: Plan, resource: PlannedResource) -> set[str]:
    """URNs `resource` transitively depends on: the engine creates it after all of them and deletes it before any.

    Pulumi orders creation by dependencies (explicit dependsOn and those implied by Outputs used as inputs) and
    deletes in the reverse order: https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/
    """
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            found = plan.by_urn(urn)
            todo.extend(found.dependencies if found else [])
    return seen


def under(plan: Plan, component_type: str) -> Iterator[tuple[PlannedResource, PlannedResource]]:
    """(component, custom resource) for every custom resource inside a component of `component_type`."""
    for resource in plan.resources:
        owner = next((a for a in plan.ancestors(resource) if a.type == component_type), None)
        if owner is not None and resource.custom:
            yield owner, resource


def of_kind(plan: Plan, component_type: str, type_token: str) -> list[tuple[PlannedResource, PlannedResource]]:
    return [(owner, r) for owner, r in under(plan, component_type) if r.type == type_token]


def triton_deployments(plan: Plan) -> list[PlannedResource]:
    deployments = [r for _, r in of_kind(plan, TRITON_SERVING, DEPLOYMENT)]
    assert deployments, "every stack serves Triton"
    return deployments


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, str):
        yield value


def references(resource: PlannedResource, needle: str) -> bool:
    return any(needle in text for text in strings_in(resource.inputs))


# ---- rules --------------------------------------------------------------------------------------------------------


def test_load_balancer_backends_wait_for_the_services_whose_negs_they_use(plan):
    """GKE's NEG controller creates a Service's zonal NEGs asynchronously and deletes them with the Service, and a
    NEG in use by a backend service cannot be deleted. So each backend must be created after, and deleted before,
    the Service that owns its NEGs. https://cloud.google.com/kubernetes-engine/docs/how-to/standalone-neg
    """
    backends = plan.of_type(BACKEND)
    if not backends:
        pytest.skip("no global load balancer in this stack")
    neg_services = {
        neg: service for _, service in of_kind(plan, TRITON_SERVING, SERVICE) for neg in _neg_names(service)
    }
    for backend in backends:
        used = [neg for neg in neg_services if references(backend, f"networkEndpointGroups/{neg}")]
        assert used, f"{backend.name} uses no Triton NEG"
        for neg in used:
            assert neg_services[neg].urn in waits_for(plan, backend), f"{backend.name} does not wait for {neg}"


def _neg_names(service: PlannedResource) -> list[str]:
    annotation = service.inputs["metadata"].get("annotations", {}).get("cloud.google.com/neg")
    if not annotation:
        return []
    return [port["name"] for port in json.loads(annotation)["exposed_ports"].values()]


def test_destroy_deletes_whatever_references_a_bucket_or_service_account_first(plan):
    """`pulumi destroy` deletes in reverse dependency order
    (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/): anything that names a bucket or a
    Google service account in its inputs (IAM members, node pools, firewall rules, Triton's Kubernetes service
    account and pods) must depend on it; otherwise nothing stops the engine from deleting the bucket or account
    while its users still exist (Pulumi runs independent deletes in parallel). Dependencies are read from the same
    graph `make plan --json` prints.
    """
    targets = [(b, b.inputs["name"]) for b in plan.of_type(BUCKET)]
    targets += [(a, a.inputs["accountId"] + "@") for a in plan.of_type(GCP_SERVICE_ACCOUNT)]
    assert targets
    for target, needle in targets:
        referrers = [r for r in plan.resources if r.custom and r is not target and references(r, needle)]
        assert referrers, f"nothing references {target.name}"
        for referrer in referrers:
            assert target.urn in waits_for(plan, referrer), (
                f"{referrer.name} references {target.name} but does not depend on it"
            )


# ---- issue 12: first `pulumi up` and every later change ------------------------------------------------------------


def test_workload_identity_binding_waits_for_every_cluster(plan):
    """GKE creates the project's Workload Identity pool (PROJECT.svc.id.goog) with the first cluster that enables
    it; until then IAM refuses a binding to the pool with "Identity Pool does not exist"
    (terraform-google-modules/terraform-google-kubernetes-engine#916, the module ties the two together since #301).
    So the binding must wait for the clusters, or the first `pulumi up` on a fresh project fails.
    """
    bindings = [b for b in plan.of_type(SA_IAM) if b.inputs["role"] == "roles/iam.workloadIdentityUser"]
    assert bindings
    for binding in bindings:
        assert ".svc.id.goog[" in binding.inputs["member"]
        waited = waits_for(plan, binding)
        missing = [c.inputs["name"] for c in plan.of_type(CLUSTER) if c.urn not in waited]
        assert not missing, f"{binding.name} does not wait for clusters {missing}"


def test_triton_waits_until_it_may_read_the_bucket(plan):
    """Triton runs with --exit-on-error: started before its Google service account may read the bucket (the bucket
    IAM members) or before its Kubernetes service account may act as that account (the Workload Identity binding),
    it cannot list gs://BUCKET, exits and crash-loops, and `pulumi up` waits on it until it times out
    (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity). Its Deployment must wait for both.
    """
    access = plan.of_type(BUCKET_IAM) + [
        b for b in plan.of_type(SA_IAM) if b.inputs["role"] == "roles/iam.workloadIdentityUser"
    ]
    assert len(access) >= 3, "objectViewer, legacyBucketReader and the Workload Identity binding"
    for deployment in triton_deployments(plan):
        waited = waits_for(plan, deployment)
        missing = [a.name for a in access if a.urn not in waited]
        assert not missing, f"{deployment.name} does not wait for {missing}"


def _minutes(duration: str) -> float:
    """A Pulumi custom timeout ('40m', '2h', '90s') in minutes."""
    units = {"s": 1 / 60, "m": 1, "h": 60}
    assert duration and duration[-1] in units, f"unexpected duration {duration!r}"
    return float(duration[:-1]) * units[duration[-1]]


def _startup_window_minutes(deployment: PlannedResource) -> float:
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    probe = container["startupProbe"]
    return (probe.get("initialDelaySeconds", 0) + probe["periodSeconds"] * probe["failureThreshold"]) / 60


# pulumi-kubernetes' own wait for a Deployment or a Service without customTimeouts.
DEFAULT_AWAIT_MINUTES = 10


def test_pulumi_waits_as_long_as_kubernetes_lets_triton_start(plan):
    """pulumi-kubernetes waits 10 minutes for a Deployment to become available and for a Service's endpoints to be
    ready, then fails and skips everything that depends on them (the load balancer's backends wait for the NEG
    Service) (https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deployment/,
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/core/v1/service/). A fresh T4 node's driver
    install, the ~10 GB image pull and TensorRT engine builds take longer, which Triton's startup probe allows. So
    the Deployment and its Services wait at least as long as that probe on create, and the Deployment's update
    waits for one such start per pod it may have to replace.
    """
    for owner, deployment in of_kind(plan, TRITON_SERVING, DEPLOYMENT):
        window = _startup_window_minutes(deployment)
        assert window > DEFAULT_AWAIT_MINUTES, "the startup budget exceeds pulumi-kubernetes' default wait"
        timeouts = deployment.custom_timeouts
        assert _minutes(timeouts.get("create", "")) >= window, f"{deployment.name}: create {timeouts}"
        assert _minutes(timeouts.get("update", "")) >= window * _max_pods(plan, deployment)
        services = [s for o, s in of_kind(plan, TRITON_SERVING, SERVICE) if o is owner]
        assert services
        for service in services:
            for operation in ("create", "update"):
                waited = _minutes(service.custom_timeouts.get(operation, ""))
                assert waited >= window, f"{service.name}: {operation} {service.custom_timeouts}"


def _hpas_of(plan: Plan, deployment: PlannedResource) -> list[PlannedResource]:
    """The HPAs that scale `deployment`: on its cluster, in its namespace, naming it as their target (wherever in
    the component tree they are declared)."""
    namespace = deployment.inputs["metadata"].get("namespace")
    return [
        h
        for h in _same_cluster(plan, deployment, HPA, namespace)
        if h.inputs["spec"]["scaleTargetRef"]["kind"] == "Deployment"
        and h.inputs["spec"]["scaleTargetRef"]["name"] == deployment.inputs["metadata"]["name"]
    ]


def _max_pods(plan: Plan, deployment: PlannedResource) -> int:
    """The most Triton pods this Deployment may run: the HPA's maximum, or the fixed replicas without an HPA."""
    mine = _hpas_of(plan, deployment)
    return int(mine[0].inputs["spec"]["maxReplicas"] if mine else deployment.inputs["spec"]["replicas"])


def _min_pods(plan: Plan, deployment: PlannedResource) -> int:
    """The fewest Triton pods this Deployment runs: the HPA's minimum, or the fixed replicas without an HPA."""
    mine = _hpas_of(plan, deployment)
    return int(mine[0].inputs["spec"]["minReplicas"] if mine else deployment.inputs["spec"]["replicas"])


def _gpu_max_nodes(plan: Plan, owner: PlannedResource) -> int:
    """The region's GPU pool maximum: the node autoscaler never adds more."""
    region = owner.name.removeprefix("triton-")
    pools = [
        p
        for p in plan.of_type("gcp:container/nodePool:NodePool")
        if p.inputs["nodeConfig"].get("guestAccelerators") and p.parent and p.parent.name == f"gke-{region}"
    ]
    assert len(pools) == 1, f"one GPU pool in {region}"
    return int(pools[0].inputs["autoscaling"]["totalMaxNodeCount"])


def _int_or_percent(value: Any, replicas: int, round_up: bool, default: str = "25%") -> int:
    """maxSurge rounds a percentage up, maxUnavailable rounds it down (Deployment API reference,
    https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/deployment-v1/)."""
    value = default if value is None else value
    if isinstance(value, str) and value.endswith("%"):
        share = replicas * int(value[:-1])
        return -(-share // 100) if round_up else share // 100
    return int(value)


def rollout_waves(replicas: int, nodes: int, max_surge: int, max_unavailable: int) -> int | None:
    """Simulate a template change under the Deployment controller's rolling-update rules; return how many pod
    starts happen one after another (each takes up to the startup budget), or None if the rollout never completes.

    Rules (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#rolling-update-deployment): the new
    ReplicaSet grows while all pods <= replicas + maxSurge; old pods are removed while available pods stay >=
    replicas - maxUnavailable (new pods not yet ready count as unavailable). Triton's anti-affinity puts one pod on
    a GPU node, and the node autoscaler adds nodes only up to `nodes`: a pod without a free node stays Pending.
    """
    old, new_ready, new_pending, waves = replicas, 0, 0, 0
    while not (old == 0 and new_ready == replicas):
        before = (old, new_ready, new_pending)
        new_pending += max(
            0, min(replicas + max_surge - (old + new_ready + new_pending), replicas - new_ready - new_pending)
        )
        old -= max(0, min(old, old + new_ready + new_pending - (replicas - max_unavailable) - new_pending))
        started = min(new_pending, nodes - old - new_ready)
        if started > 0:
            new_pending, new_ready, waves = new_pending - started, new_ready + started, waves + 1
        if (old, new_ready, new_pending) == before:
            return None
    return waves


def test_a_template_change_rolls_out_within_gpu_max_nodes(plan):
    """A template change (new image, new models, new settings) must complete even when the pool is at gpuMaxNodes:
    one Triton pod fills a GPU node, so a surge pod would need a node the autoscaler may not add (dev has
    gpuMaxNodes 1). Simulated with the controller's rules (rollout_waves) at every pod count the HPA may reach, and
    the sequential starts it needs fit in the Deployment's update timeout.
    """
    for owner, deployment in of_kind(plan, TRITON_SERVING, DEPLOYMENT):
        strategy = deployment.inputs["spec"].get("strategy", {})
        rolling = strategy.get("rollingUpdate", {})
        nodes = _gpu_max_nodes(plan, owner)
        budget = _startup_window_minutes(deployment)
        update = _minutes(deployment.custom_timeouts.get("update", f"{DEFAULT_AWAIT_MINUTES}m"))
        for replicas in range(_min_pods(plan, deployment), _max_pods(plan, deployment) + 1):
            surge = _int_or_percent(rolling.get("maxSurge"), replicas, round_up=True)
            unavailable = _int_or_percent(rolling.get("maxUnavailable"), replicas, round_up=False)
            waves = rollout_waves(replicas, nodes, surge, unavailable)
            assert waves is not None, f"{deployment.name}: {replicas} pods on {nodes} GPU nodes never roll"
            assert waves * budget <= update, f"{deployment.name}: {waves} starts of {budget} min exceed {update} min"


def test_every_model_change_rolls_every_triton_pod(plan):
    """With model control mode NONE, Triton loads the repository at start and ignores later changes
    (https://docs.nvidia.com/deeplearning/triton-inference-server/archives/triton-inference-server-2540/user-guide/docs/user_guide/model_management.html).
    So the repository's digest (the upload's trigger) is in the pod template: each model change rolls every pod
    onto the new models, never a fleet where only restarted pods serve them.
    """
    (sync,) = [c for c in plan.of_type("command:local:Command") if c.name == "models-sync"]
    digest = sync.inputs["triggers"][0]
    for deployment in triton_deployments(plan):
        template = deployment.inputs["spec"]["template"]
        assert template["metadata"]["annotations"]["triton-gke/model-repository-digest"] == digest
        (container,) = template["spec"]["containers"]
        assert "--model-control-mode=none" in container["args"], "poll mode would reload under the running pods"


def test_protected_stacks_refuse_to_delete_their_clusters_and_bucket(plan):
    """GKE's deletion protection fails only when the cluster's own delete runs, after `pulumi destroy` removed what
    ran on it; Pulumi's protect fails the destroy in its preview, before any delete
    (https://www.pulumi.com/docs/iac/concepts/resources/options/protect/, pulumi/pulumi#8158). Clusters with
    deletion protection, and buckets that keep their models (no force-destroy), are protected; disposable ones not.
    """
    for cluster in plan.of_type(CLUSTER):
        assert cluster.protect == cluster.inputs["deletionProtection"], cluster.name
    for bucket in plan.of_type(BUCKET):
        assert bucket.protect == (not bucket.inputs["forceDestroy"]), bucket.name
    if plan.stack == "prod":
        assert all(r.protect for r in plan.of_type(CLUSTER) + plan.of_type(BUCKET))


# ---- GKE edge rules (issue 12 items 2, 6, 7, 8) --------------------------------------------------------------------

CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
API_SERVICE = "kubernetes:apiregistration.k8s.io/v1:APIService"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
FIREWALL = "gcp:compute/firewall:Firewall"
SECURITY_POLICY = "gcp:compute/securityPolicy:SecurityPolicy"
# Ports a private cluster's control plane may open to nodes without a firewall rule of ours.
CONTROL_PLANE_OPEN_PORTS = (443, 10250)


def _pod_workloads(plan: Plan) -> list[PlannedResource]:
    kinds = ("kubernetes:apps/v1:DaemonSet", DEPLOYMENT, "kubernetes:apps/v1:StatefulSet")
    return [r for kind in kinds for r in plan.of_type(kind)]


def _same_cluster(plan: Plan, resource: PlannedResource, type_token: str, namespace: str | None = None):
    return [
        r
        for r in plan.of_type(type_token)
        if r.provider_urn == resource.provider_urn
        and (namespace is None or r.inputs["metadata"].get("namespace") == namespace)
    ]


def test_system_critical_pods_outside_kube_system_have_a_quota_for_their_priority_class(plan):
    """GKE ships a ResourceQuota in kube-system scoped to the system-*-critical PriorityClasses; the ResourceQuota
    admission plugin then admits pods of those classes only in namespaces with a quota matching the class
    (https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default;
    on GKE: fluxcd/flux2#3879, NVIDIA/aicr#921). Without it every pod is refused and pulumi-kubernetes waits 10
    minutes for the DaemonSet, in every region. The workload must also wait for the quota.
    """
    critical = [
        w
        for w in _pod_workloads(plan)
        if w.inputs["spec"]["template"]["spec"].get("priorityClassName") in CRITICAL_PRIORITY_CLASSES
        and w.inputs["metadata"].get("namespace") != "kube-system"
    ]
    assert critical, "the DCGM exporter runs system-node-critical in every stack"
    for workload in critical:
        priority_class = workload.inputs["spec"]["template"]["spec"]["priorityClassName"]
        quotas = [
            q
            for q in _same_cluster(plan, workload, RESOURCE_QUOTA, workload.inputs["metadata"]["namespace"])
            if any(
                e["scopeName"] == "PriorityClass" and e["operator"] == "In" and priority_class in e["values"]
                for e in q.inputs["spec"].get("scopeSelector", {}).get("matchExpressions", [])
            )
        ]
        assert quotas, f"{workload.name}: no ResourceQuota for {priority_class} in its namespace"
        assert any(q.urn in waits_for(plan, workload) for q in quotas), f"{workload.name} does not wait for its quota"


def _service_target_port(plan: Plan, api_service: PlannedResource) -> int:
    """The container port an APIService's Service sends to (what the control plane connects to)."""
    ref = api_service.inputs["spec"]["service"]
    (service,) = [
        s
        for s in _same_cluster(plan, api_service, SERVICE, ref["namespace"])
        if s.inputs["metadata"]["name"] == ref["name"]
    ]
    (port,) = [p for p in service.inputs["spec"]["ports"] if p["port"] == ref.get("port", 443)]
    target = port.get("targetPort", port["port"])
    if isinstance(target, int | float):
        return int(target)
    selector = service.inputs["spec"]["selector"]
    for workload in _same_cluster(plan, service, DEPLOYMENT, ref["namespace"]):
        template = workload.inputs["spec"]["template"]
        if selector.items() <= template["metadata"]["labels"].items():
            for container in template["spec"]["containers"]:
                for container_port in container.get("ports", []):
                    if container_port.get("name") == target:
                        return int(container_port["containerPort"])
    raise AssertionError(f"{api_service.name}: no pod port named {target}")


def test_the_control_plane_can_reach_every_apiservice_backend(plan):
    """A private GKE cluster's control plane reaches nodes only on 443 and 10250 unless a firewall rule opens more
    (https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#add_firewall_rules); an APIService
    whose pods listen elsewhere (prometheus-adapter: 6443) fails discovery, the HPA never scales and discovery
    errors slow kubectl and namespace deletion (kubernetes-sigs/prometheus-adapter#534). So each such port needs
    an ingress rule from that cluster's masterIpv4CidrBlock to its nodes.
    """
    for api_service in plan.of_type(API_SERVICE):
        port = _service_target_port(plan, api_service)
        if port in CONTROL_PLANE_OPEN_PORTS:
            continue
        component = plan.by_urn(api_service.provider_urn).parent
        (cluster,) = [r for r in plan.of_type(CLUSTER) if r.parent is component]
        private = cluster.inputs["privateClusterConfig"]
        assert private["enablePrivateNodes"]
        nodes = cluster.inputs["nodeConfig"]["serviceAccount"]
        opened = [
            f
            for f in plan.of_type(FIREWALL)
            if f.inputs["direction"] == "INGRESS"
            and f.inputs["network"] == cluster.inputs["network"]
            and private["masterIpv4CidrBlock"] in f.inputs["sourceRanges"]
            and nodes in f.inputs.get("targetServiceAccounts", [])
            and any(a["protocol"] == "tcp" and str(port) in a.get("ports", []) for a in f.inputs["allows"])
        ]
        assert opened, f"{cluster.inputs['name']}: control plane cannot reach {api_service.name} on {port}"


def test_every_hpa_metric_has_a_source_on_its_cluster(plan):
    """An HPA on a Pods or Object metric reads custom.metrics.k8s.io (External: external.metrics.k8s.io); with no
    APIService serving that group the HPA reports FailedGetPodsMetric and never scales
    (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#support-for-metrics-apis).
    """
    groups = {"Pods": "custom.metrics.k8s.io", "Object": "custom.metrics.k8s.io", "External": "external.metrics.k8s.io"}
    for hpa in plan.of_type(HPA):
        served = {a.inputs["spec"]["group"] for a in _same_cluster(plan, hpa, API_SERVICE)}
        for metric in hpa.inputs["spec"].get("metrics", []):
            needed = groups.get(metric["type"])
            assert needed is None or needed in served, f"{hpa.name}: nothing serves {needed} on its cluster"


def test_public_backends_throttle_every_client_they_admit(plan):
    """An external Application Load Balancer is open to the internet; without Cloud Armor one client can push the
    HPA and the node autoscaler to gpuMaxNodes in every region. Every backend service must carry a policy in which
    each request that is not denied meets a per-client throttle first: Cloud Armor applies the highest-priority
    matching rule (https://cloud.google.com/armor/docs/create-security-policy-rules) and throttles per key, here
    the client IP (https://cloud.google.com/armor/docs/rate-limiting-overview).
    """
    backends = plan.of_type(BACKEND)
    if not backends:
        pytest.skip("no global load balancer in this stack")
    policies = {f"{p.name}-id": p for p in plan.of_type(SECURITY_POLICY)}
    for backend in backends:
        policy = policies.get(backend.inputs.get("securityPolicy"))
        assert policy is not None, f"{backend.name} has no Cloud Armor policy"
        assert policy.urn in backend.dependencies
        for rule in sorted(policy.inputs["rules"], key=lambda r: r["priority"]):
            action = rule["action"]
            assert action.startswith("deny") or action in ("throttle", "rate_based_ban"), (
                f"{policy.name}: rule {rule['priority']} lets clients through unthrottled"
            )
            if not action.startswith("deny"):
                assert rule["rateLimitOptions"]["enforceOnKey"] == "IP"
            if "*" in rule["match"]["config"]["srcIpRanges"]:
                break


# ---- issue 12, second review: later changes, fresh projects, HPA ownership, destroy order ----------------------------

PROJECT_SERVICE = "gcp:projects/service:Service"
# The API each pulumi-gcp module's resources are created through, read from the API each resource's REST reference
# lives under (e.g. https://cloud.google.com/compute/docs/reference/rest/v1/sslCertificates,
# https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters,
# https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts,
# https://cloud.google.com/resource-manager/reference/rest/v1/projects/setIamPolicy). Kept here, apart from the
# program's own table, so a wrong entry there fails.
API_OF_MODULE = {
    "compute": "compute.googleapis.com",
    "container": "container.googleapis.com",
    "storage": "storage.googleapis.com",
    "serviceaccount": "iam.googleapis.com",
    "projects": "cloudresourcemanager.googleapis.com",
}


def _services(plan: Plan) -> dict[str, PlannedResource]:
    return {s.inputs["service"]: s for s in plan.of_type(PROJECT_SERVICE)}


def test_every_google_cloud_resource_waits_for_its_api(plan):
    """On a project where an API is off, every call to it fails ("... API has not been used in project ... or it is
    disabled", terraform-google-modules/terraform-google-project-factory#715, hashicorp/terraform-provider-google#6101),
    so the first `pulumi up` on a fresh project fails half-way unless the stack enables each API it uses and every
    resource waits for the enablement of its own API (https://www.pulumi.com/registry/packages/gcp/api-docs/projects/service/).
    A resource of a module missing from API_OF_MODULE fails here: look up its API and add it.
    """
    services = _services(plan)
    resources = [r for r in plan.resources if r.custom and r.type.startswith("gcp:") and r.type != PROJECT_SERVICE]
    assert resources
    for resource in resources:
        module = resource.type.split(":")[1].split("/")[0]
        assert module in API_OF_MODULE, f"{resource.type}: which API creates it? add it to API_OF_MODULE"
        api = API_OF_MODULE[module]
        assert api in services, f"{resource.name} needs {api}, which the stack never enables"
        assert services[api].urn in waits_for(plan, resource), f"{resource.name} does not wait for {api}"


def test_apis_stay_enabled_after_destroy_and_pods_wait_for_workload_identity_tokens(plan):
    """Disabling an API on destroy switches it off for the whole project, under every other user of it; the provider
    advises disableOnDestroy only where the configuration owns the project
    (https://www.pulumi.com/registry/packages/gcp/api-docs/projects/service/,
    hashicorp/terraform-provider-google#18058).
    Triton acts as its Google service account through the IAM Service Account Credentials API
    (https://cloud.google.com/iam/docs/create-short-lived-credentials-direct#before-you-begin), so that API is enabled
    and Triton's pods wait for it like for the bucket grants.
    """
    services = _services(plan)
    assert services and all(s.inputs["disableOnDestroy"] is False for s in services.values())
    credentials = services.get("iamcredentials.googleapis.com")
    assert credentials is not None, "Workload Identity needs the IAM Service Account Credentials API"
    for deployment in triton_deployments(plan):
        assert credentials.urn in waits_for(plan, deployment), f"{deployment.name} does not wait for iamcredentials"


def test_an_autoscaled_deployment_leaves_its_replica_count_to_the_hpa(plan):
    """With an HPA, a Deployment that also sets spec.replicas has that count re-applied on every `pulumi up`: under
    server-side apply it conflicts with kube-controller-manager's scale subresource (pulumi/pulumi-kubernetes#2491) or
    resets a scaled-out count mid-rollout. Kubernetes advises removing spec.replicas where an HPA is enabled
    ("Migrating Deployments and StatefulSets to horizontal autoscaling",
    https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/, kubernetes/website#29739); the HPA's
    minReplicas sets the count. A Deployment without an HPA keeps its own fixed count.
    """
    scaled = set()
    for hpa in plan.of_type(HPA):
        target = hpa.inputs["spec"]["scaleTargetRef"]
        namespace = hpa.inputs["metadata"].get("namespace")
        (deployment,) = [
            d
            for d in _same_cluster(plan, hpa, DEPLOYMENT, namespace)
            if target["kind"] == "Deployment" and d.inputs["metadata"]["name"] == target["name"]
        ]
        assert "replicas" not in deployment.inputs["spec"], f"{deployment.name} sets replicas under {hpa.name}"
        assert hpa.inputs["spec"]["minReplicas"] >= 1
        scaled.add(deployment.urn)
    for deployment in triton_deployments(plan):
        if deployment.urn not in scaled:
            assert int(deployment.inputs["spec"]["replicas"]) >= 1, f"{deployment.name}: no HPA and no replicas"


def test_an_apiservice_waits_for_the_service_and_pods_that_serve_it(plan):
    """An APIService whose backend is gone fails discovery, and while discovery fails the namespace controller cannot
    finish deleting any namespace (kubernetes/kubernetes#75788, #60807). `pulumi destroy` deletes in reverse
    dependency order (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/), so the APIService must
    depend on its Service and on the Deployment whose pods that Service selects: then it goes first.
    """
    for api_service in plan.of_type(API_SERVICE):
        ref = api_service.inputs["spec"]["service"]
        (service,) = [
            s
            for s in _same_cluster(plan, api_service, SERVICE, ref["namespace"])
            if s.inputs["metadata"]["name"] == ref["name"]
        ]
        selector = service.inputs["spec"]["selector"]
        backends = [
            d
            for d in _same_cluster(plan, service, DEPLOYMENT, ref["namespace"])
            if selector.items() <= d.inputs["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert backends, f"{api_service.name}: no Deployment behind {ref['name']}"
        waited = waits_for(plan, api_service)
        for needed in [service, *backends]:
            assert needed.urn in waited, f"{api_service.name} does not wait for {needed.name}"


def test_a_new_domain_gets_a_certificate_of_a_new_name():
    """A Google-managed certificate cannot change its domains: Pulumi replaces it, creating the new one first. Under
    the old name that create fails with 409 alreadyExists, and deleting first fails while the HTTPS proxy uses it
    (resourceInUseByAnotherResource: hashicorp/terraform-provider-google#15966, #6147;
    terraform-google-modules/terraform-google-lb-http#207). So different domains give different names, each a valid
    Compute Engine name (RFC 1035, at most 63 characters).
    """
    names = set()
    for domain in ("infer.example.com", "inference.example.org"):
        (cert,) = evaluate("prod", domain=domain).of_type("gcp:compute/managedSslCertificate:ManagedSslCertificate")
        assert cert.inputs["managed"]["domains"] == [domain]
        assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", cert.inputs["name"]), cert.inputs["name"]
        names.add(cert.inputs["name"])
    assert len(names) == 2, f"both domains name their certificate {names}"


def _missing_api_dependencies(plan: Plan) -> list[str]:
    services = _services(plan)
    gcp = [r for r in plan.resources if r.custom and r.type.startswith("gcp:") and r.type != PROJECT_SERVICE]
    return [
        r.name for r in gcp if services[API_OF_MODULE[r.type.split(":")[1].split("/")[0]]].urn not in waits_for(plan, r)
    ]


def test_without_the_api_transform_resources_no_longer_wait_for_their_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """The invariant above is the transform's doing: with it answering nothing, the dependencies are gone."""
    monkeypatch.setattr(project_services.ProjectServices, "wait_for_apis", lambda self, args: None)
    assert _missing_api_dependencies(evaluate("dev"))


def test_as_an_engine_side_transform_the_api_rule_would_be_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why infra/system.py runs the rule in-process: the engine runs a component's `transforms` on its descendants
    but keeps a transformed dependsOn only for a resource whose own options declare a transform
    (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8 pkg/resource/deploy/source_eval.go, `if
    len(req.Transforms) > 0`), which offline/runtime.py run_transforms reproduces."""
    real_merge = pulumi.ResourceOptions.merge

    def engine_side(opts: Any, other: Any) -> pulumi.ResourceOptions:
        """TritonGkeSystem's options with its in-process rule moved to the `transforms` option."""
        merged = real_merge(opts, other)
        rules = [t for t in merged.transformations or [] if getattr(t, "__name__", "") == "_in_process"]
        if rules:
            merged.transforms, merged.transformations = [rules[0].__self__._wait_for_apis], None
        return merged

    monkeypatch.setattr(pulumi.ResourceOptions, "merge", staticmethod(engine_side))
    assert _missing_api_dependencies(evaluate("dev"))
