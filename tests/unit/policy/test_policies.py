"""The guardrail policy pack (policy/): every stack passes every policy; each policy refuses what it guards.

The validate functions run on the state the real program registers under the mock runtime, handed over
the way the engine hands it to a policy pack: inputs in camelCase inside pulumi-policy's own
unknown-checking proxies."""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi.runtime.rpc import UNKNOWN
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from tests.support.stacks import evaluate, stack_settings
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.policy.policies import (
    BUCKET,
    CLUSTER,
    FIREWALL,
    NODE_POOL,
    POLICIES,
    SERVICE,
    STACK_POLICIES,
    WEB_UI_PORTS,
    WEB_UIS,
    image_problem,
    is_triton,
    kubernetes_principal,
    principal_problem,
    restricted_apis,
    stack_of,
    web_ui_of,
)
from triton_gke.settings.errors import ConfigError

BY_NAME = {p.name: p for p in POLICIES}


STACK_BY_NAME = {p.name: p for p in STACK_POLICIES}


DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
# The pool of the members the tests below craft: the pack reads no project (docs/security.md, "Not checked: which
# pool a member names"), so any project's serves; a stack's own plan binds its stack file's (stack_pool).
POOL = "serviceAccount:my-gcp-project.svc.id.goog"


def stack_pool(stack: str) -> str:
    return f"serviceAccount:{stack_settings(stack)['gcp:project']}.svc.id.goog"


def _options(resource: PlannedResource) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=resource.parent_urn or None,
    )


def _props(resource: PlannedResource) -> Any:
    """Properties as pulumi-policy hands them over: deserialised, numbers as floats, unknown-checking proxies."""
    return unknown_checking_proxy(deserialize_properties(copy.deepcopy(resource.inputs)))


def validation_args(resource: PlannedResource, config: dict[str, Any] | None = None) -> ResourceValidationArgs:
    """What the engine hands a policy for this resource: its inputs, deserialised and proxied by pulumi-policy."""
    return ResourceValidationArgs(
        resource.type, _props(resource), resource.urn, resource.name, _options(resource), None, config
    )


def stack_violations(
    resources: list[PlannedResource], policy_name: str, config: dict[str, Any] | None = None
) -> list[str]:
    """What a stack policy reports on these resources, handed over as the engine hands a stack's resources: each with
    the resources it depends on (the SDK sends every resource whose outputs its inputs use, offline/runtime.py)."""
    handed = {
        r.urn: PolicyResource(r.type, _props(r), r.urn, r.name, _options(r), None, None, [], {}) for r in resources
    }
    for r in resources:
        handed[r.urn].dependencies = [handed[urn] for urn in r.dependencies if urn in handed]
    found: list[str] = []
    result = STACK_BY_NAME[policy_name].validate(
        StackValidationArgs(list(handed.values()), config), lambda message, urn=None: found.append(message)
    )
    assert result is None, "validate functions are synchronous"
    return found


def violations(resource: PlannedResource, policy_name: str, config: dict[str, Any] | None = None) -> list[str]:
    found: list[str] = []
    result = BY_NAME[policy_name].validate(
        validation_args(resource, config), lambda message, urn=None: found.append(message)
    )
    assert result is None, "validate functions are synchronous"
    return found


def all_violations(plan: Plan, config: dict[str, Any] | None = None) -> list[str]:
    return [
        f"{policy} on {r.type} {r.name}: {message}"
        for r in plan.resources
        for policy in BY_NAME
        for message in violations(r, policy, config)
    ] + [
        f"{policy}: {message}"
        for policy in STACK_BY_NAME
        for message in stack_violations(plan.resources, policy, config)
    ]


ADVISORY_POLICIES = {p.name for p in (*POLICIES, *STACK_POLICIES) if p.enforcement_level == EnforcementLevel.ADVISORY}


def mandatory_violations(plan: Plan, config: dict[str, Any] | None = None) -> list[str]:
    """all_violations less the advisory ones (printed by `pulumi up`, which goes on)."""
    return [v for v in all_violations(plan, config) if v.split(" ", 1)[0].rstrip(":") not in ADVISORY_POLICIES]


@pytest.fixture(scope="module")
def plans(dev_plan: Plan, prod_plan: Plan) -> dict[str, Plan]:
    return {"dev": dev_plan, "staging": evaluate("staging"), "prod": prod_plan}


# ---------------------------------------------------------------- the stacks as they are
@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_passes_every_policy(plans: dict[str, Plan], stack: str) -> None:
    plan = plans[stack]
    # Not a vacuous pass: the stack has what the policies inspect.
    for guarded in (CLUSTER, NODE_POOL, BUCKET, DEPLOYMENT, "kubernetes:apps/v1:DaemonSet"):
        assert plan.of_type(guarded), f"{stack} declares no {guarded}"
    found = all_violations(plan)
    # The shipped prod has no domain (a new stack cannot: its certificate needs DNS at the address its first `up`
    # makes), so its load balancer serves plain HTTP: advisory prod-lb-https says so, and nothing else is reported.
    advised = ["prod-lb-https"] if stack == "prod" else []
    assert [v.split(":", 1)[0] for v in found] == advised, found


def test_the_load_balancer_firewall_is_inspected_and_passes(plans: dict[str, Plan]) -> None:
    rules = plans["prod"].of_type(FIREWALL)
    assert len(rules) >= 3  # one per region for the load balancer's health checks
    assert all(violations(rule, "firewall-no-internet-ingress") == [] for rule in rules)


def test_web_uis_published_to_listed_ranges_pass() -> None:
    plan = evaluate("dev", webUiSourceRanges=["203.0.113.0/24"])
    balancers = [s for s in plan.of_type(SERVICE) if s.inputs["spec"]["type"] == "LoadBalancer"]
    # Grafana and the Locust UI get one each; Prometheus stays inside (its UI is reached through Grafana).
    assert {s.inputs["metadata"]["name"] for s in balancers} == {"grafana-web", "locust-web"}
    assert all_violations(plan) == []


# ---------------------------------------------------------------- the real program, misconfigured
def test_web_uis_open_to_internet_halves_are_refused_before_the_policy_sees_them() -> None:
    # The two halves add up to 0.0.0.0/0: the stack config refuses them first (the policy is the
    # second line for hand-made changes, covered by the crafted violations above).
    with pytest.raises(
        ConfigError,
        match=r"triton-gke:webUiSourceRanges: '0.0.0.0/1', '128.0.0.0/1' is not valid; "
        r"their union '0.0.0.0/0' lets in 3,702,258,688 public IPv4 addresses, wider than /8",
    ):
        evaluate("dev", webUiSourceRanges=["0.0.0.0/1", "128.0.0.0/1"])


def test_prod_without_deletion_protection_is_refused() -> None:
    plan = evaluate("prod", deletionProtection=False, bucketForceDestroy=True)
    found = mandatory_violations(plan)
    clusters = [v for v in found if "deletionProtection: true" in v]
    buckets = [v for v in found if "forceDestroy" in v]
    assert len(clusters) == 3 and len(buckets) == 1 and len(found) == 4, found
    assert all(v.startswith("prod-deletion-protection") for v in found)


def test_prod_with_inference_auth_off_is_refused_in_one_line_per_triton_and_dev_is_not() -> None:
    found = mandatory_violations(evaluate("prod", inferenceAuth=False))
    assert len(found) == 3 and all(v.startswith("prod-inference-auth") for v in found), found
    assert all("--http-restricted-api, --grpc-restricted-protocol does not restrict inference" in v for v in found)
    assert all_violations(evaluate("dev", inferenceAuth=False)) == []


def test_which_stacks_count_as_production_is_configurable(plans: dict[str, Plan]) -> None:
    staging = plans["staging"]  # disposable by design: deletionProtection false, bucketForceDestroy true
    assert all_violations(staging) == []
    found = mandatory_violations(staging, {"prodStacks": ["staging", "prod"]})
    assert found and all(v.startswith("prod-deletion-protection") for v in found)
    assert stack_of(staging.of_type(CLUSTER)[0].urn) == "staging"


# ---------------------------------------------------------------- crafted violations, one table
def _first(plan: Plan, type_token: str, where: Callable[[PlannedResource], bool] = lambda r: True) -> PlannedResource:
    return next(r for r in plan.of_type(type_token) if where(r))


def _gpu_pool(plan: Plan) -> PlannedResource:
    return _first(plan, NODE_POOL, lambda r: bool(r.inputs["nodeConfig"].get("guestAccelerators")))


def _cpu_pool(plan: Plan) -> PlannedResource:
    return _first(plan, NODE_POOL, lambda r: not r.inputs["nodeConfig"].get("guestAccelerators"))


def _deployment(name: str) -> Callable[[Plan], PlannedResource]:
    return lambda plan: _first(plan, DEPLOYMENT, lambda r: r.inputs["metadata"]["name"] == name)


def _web_service(plan: Plan) -> PlannedResource:
    return _first(plan, SERVICE, lambda r: r.inputs["metadata"]["name"] == "grafana")


def _pod(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["template"]["spec"]


def _replace_flag(flag: str, *new: str) -> Callable[[dict[str, Any]], None]:
    """An edit of the first container's args: every `flag` argument replaced by `new` (none: removed)."""

    def edit(inputs: dict[str, Any]) -> None:
        container = _pod(inputs)["containers"][0]
        kept = [a for a in container["args"] if not a.startswith(flag)]
        assert len(kept) < len(container["args"]), f"no {flag} to replace"
        container["args"] = kept + list(new)

    return edit


def _edits(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(inputs: dict[str, Any]) -> None:
        for one in edits:
            one(inputs)

    return edit


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets (or, with None, removes) a dotted path of the inputs."""

    def edit(inputs: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = inputs
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value

    return edit


# (policy, stack, resource to start from, edit, fragment of the expected message)
CRAFTED: dict[str, tuple[str, str, Callable[[Plan], PlannedResource], Callable[[dict], None], str]] = {
    "gpu pool without taint": (
        "gpu-node-pools-tainted",
        "dev",
        _gpu_pool,
        _set("nodeConfig.taints", []),
        "no 'nvidia.com/gpu' NO_SCHEDULE",
    ),
    "gpu pool with a PreferNoSchedule taint": (
        "gpu-node-pools-tainted",
        "dev",
        _gpu_pool,
        _set("nodeConfig.taints.0.effect", "PREFER_NO_SCHEDULE"),
        "NO_SCHEDULE taint",
    ),
    "accelerator-optimised machine without taint": (
        "gpu-node-pools-tainted",
        "dev",
        _cpu_pool,
        _set("nodeConfig.machineType", "g2-standard-8"),
        "has GPUs",
    ),
    "cluster without Workload Identity": (
        "gke-workload-identity",
        "prod",
        lambda p: _first(p, CLUSTER),
        _set("workloadIdentityConfig", None),
        "no workloadIdentityConfig.workloadPool",
    ),
    "node pool on the node's metadata": (
        "gke-workload-identity",
        "dev",
        _cpu_pool,
        _set("nodeConfig.workloadMetadataConfig.mode", "GCE_METADATA"),
        "'GCE_METADATA'; expected 'GKE_METADATA'",
    ),
    "node pool without a metadata mode": (
        "gke-workload-identity",
        "dev",
        _gpu_pool,
        _set("nodeConfig.workloadMetadataConfig", None),
        "mode None",
    ),
    "node pool on the default compute account": (
        "gke-no-default-service-account",
        "dev",
        _gpu_pool,
        _set("nodeConfig.serviceAccount", "123456789012-compute@developer.gserviceaccount.com"),
        "'123456789012-compute@developer.gserviceaccount.com'",
    ),
    "node pool without a service account": (
        "gke-no-default-service-account",
        "dev",
        _cpu_pool,
        _set("nodeConfig.serviceAccount", None),
        "none (the default compute service account)",
    ),
    "cluster default pool without a service account": (
        "gke-no-default-service-account",
        "prod",
        lambda p: _first(p, CLUSTER),
        _set("nodeConfig", None),
        "default node pool runs as service account none",
    ),
    "node pool without secure boot": (
        "gke-shielded-nodes-secure-boot",
        "dev",
        _gpu_pool,
        _set("nodeConfig.shieldedInstanceConfig.enableSecureBoot", False),
        "enableSecureBoot: true",
    ),
    "cluster without shielded nodes": (
        "gke-shielded-nodes-secure-boot",
        "dev",
        lambda p: _first(p, CLUSTER),
        _set("enableShieldedNodes", False),
        "enableShieldedNodes: false",
    ),
    "bucket with object ACLs": (
        "bucket-locked-down",
        "dev",
        lambda p: _first(p, BUCKET),
        _set("uniformBucketLevelAccess", False),
        "uniformBucketLevelAccess: true",
    ),
    "bucket without public access prevention": (
        "bucket-locked-down",
        "prod",
        lambda p: _first(p, BUCKET),
        _set("publicAccessPrevention", "inherited"),
        "publicAccessPrevention 'inherited'",
    ),
    "firewall open to the internet": (
        "firewall-no-internet-ingress",
        "prod",
        lambda p: _first(p, FIREWALL),
        _set("sourceRanges", ["35.191.0.0/16", "0.0.0.0/0"]),
        "ingress from 0.0.0.0/0",
    ),
    "firewall open to the IPv6 internet": (
        "firewall-no-internet-ingress",
        "prod",
        lambda p: _first(p, FIREWALL),
        _set("sourceRanges", ["::/0"]),
        "::/0",
    ),
    "firewall without any source": (
        "firewall-no-internet-ingress",
        "staging",
        lambda p: _first(p, FIREWALL),
        _set("sourceRanges", None),
        "0.0.0.0/0 (no source given)",
    ),
    "grafana load balancer without ranges": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _set("spec.type", "LoadBalancer"),
        "for grafana (by its selector or ports) with no loadBalancerSourceRanges",
    ),
    "grafana load balancer open to all": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(_set("spec.type", "LoadBalancer"), _set("spec.loadBalancerSourceRanges", ["0.0.0.0/0"])),
        "loadBalancerSourceRanges 0.0.0.0/0: their union '0.0.0.0/0' lets in",
    ),
    "grafana load balancer open through the internet's halves": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(_set("spec.type", "LoadBalancer"), _set("spec.loadBalancerSourceRanges", ["0.0.0.0/1", "128.0.0.0/1"])),
        "their union '0.0.0.0/0' lets in 3,702,258,688 public IPv4 addresses, wider than /8",
    ),
    "grafana load balancer open through every /8": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(
            _set("spec.type", "LoadBalancer"),
            _set("spec.loadBalancerSourceRanges", [f"{i}.0.0.0/8" for i in range(256)]),
        ),
        "their union '0.0.0.0/0' lets in",
    ),
    "grafana load balancer open through IPv4-mapped IPv6": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(_set("spec.type", "LoadBalancer"), _set("spec.loadBalancerSourceRanges", ["::ffff:0.0.0.0/96"])),
        "(IPv6 ranges that embed IPv4 counted as IPv4)",
    ),
    "renamed grafana service on its port number": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(
            _set("metadata.name", "dashboards"),
            _set("spec.selector", {"tier": "frontend"}),
            _set("spec.type", "LoadBalancer"),
            _set("spec.loadBalancerSourceRanges", ["0.0.0.0/0"]),
        ),
        "for grafana (by its selector or ports)",
    ),
    "prod cluster without deletion protection": (
        "prod-deletion-protection",
        "prod",
        lambda p: _first(p, CLUSTER),
        _set("deletionProtection", False),
        "stack 'prod' is a production stack",
    ),
    "prod triton serving inference without a key": (
        "prod-inference-auth",
        "prod",
        _deployment("triton"),
        lambda inputs: _pod(inputs)["containers"][0].update(
            args=[
                a for a in _pod(inputs)["containers"][0]["args"] if not a.startswith("--http-restricted-api=inference")
            ]
        ),
        "stack 'prod' is a production stack: tritonserver container 'tritonserver' serves inference without a key "
        "(--http-restricted-api does not restrict inference); set triton-gke:inferenceAuth true",
    ),
    "image without tag": (
        "images-pinned",
        "dev",
        _deployment("locust-master"),
        _set("spec.template.spec.containers.0.image", "locustio/locust"),
        "'locustio/locust' has no tag",
    ),
    "init container on latest": (
        "images-pinned",
        "dev",
        _deployment("locust-worker"),
        _set("spec.template.spec.initContainers.0.image", "locustio/locust:latest"),
        "'install-tritonclient' image 'locustio/locust:latest' uses the tag latest",
    ),
    "image from a registry with a port, no tag": (
        "images-pinned",
        "dev",
        _deployment("triton"),
        _set("spec.template.spec.containers.0.image", "registry.local:5000/nvidia/tritonserver"),
        "has no tag",
    ),
    "triton from a renamed image, started by a shell, without gRPC restrictions": (
        "triton-admin-apis-restricted",
        "dev",
        _deployment("triton"),
        lambda inputs: _pod(inputs)["containers"][0].update(
            image="europe-docker.pkg.dev/acme/serving/inference:7",
            command=["/bin/sh", "-c"],
            args=[
                "cd /models && exec /opt/tritonserver/bin/tritonserver "
                + shlex.join(
                    a
                    for a in _pod(inputs)["containers"][0]["args"]
                    if a != "tritonserver" and not a.startswith("--grpc-restricted-protocol")
                )
            ],
        ),
        "tritonserver container 'tritonserver': --grpc-restricted-protocol does not put logging, model-repository",
    ),
    "triton without gRPC restrictions": (
        "triton-admin-apis-restricted",
        "dev",
        _deployment("triton"),
        _replace_flag("--grpc-restricted-protocol"),
        "--grpc-restricted-protocol does not put logging, model-repository, shared-memory, trace",
    ),
    "triton restricting only the repository API": (
        "triton-admin-apis-restricted",
        "prod",
        _deployment("triton"),
        _replace_flag("--http-restricted-api", "--http-restricted-api=model-repository:triton-admin-key=k"),
        "--http-restricted-api does not put logging, shared-memory, trace",
    ),
    "triton restriction with an empty key": (
        "triton-admin-apis-restricted",
        "dev",
        _deployment("triton"),
        _replace_flag(
            "--http-restricted-api",
            "--http-restricted-api=model-repository,shared-memory,logging,trace:triton-admin-key=",
        ),
        "--http-restricted-api does not put logging, model-repository, shared-memory, trace",
    ),
    # Issue 32: every cluster of a project maps NAMESPACE/KSA to one principal: dev's pods could act as prod's reader.
    "bucket reader bound to the shared triton/triton": (
        "workload-identity-per-stack",
        "prod",
        lambda p: _first(p, SA_IAM),
        _set("member", f"{POOL}[triton/triton]"),
        "IAMMember 'models-workload-identity' grants roles/iam.workloadIdentityUser to "
        "'serviceAccount:my-gcp-project.svc.id.goog[triton/triton]', which is the shared triton/triton",
    ),
    "staging's reader bound to prod's principal": (
        "workload-identity-per-stack",
        "staging",
        lambda p: _first(p, SA_IAM),
        _set("member", f"{POOL}[triton/triton-prod]"),
        "which is triton/triton-prod, not one of the service accounts of stack 'staging'",
    ),
    "reader bound to a whole namespace by principal set": (
        "workload-identity-per-stack",
        "dev",
        lambda p: _first(p, SA_IAM),
        _set(
            "member",
            "principalSet://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/"
            "my-gcp-project.svc.id.goog/namespace/triton",
        ),
        "which is every service account of namespace 'triton', not one of the service accounts of stack 'dev'",
    ),
    # Issue 44: the Kubernetes side; a pod of dev's running as triton/triton-prod gets prod's bucket reader.
    "dev's Triton running as prod's principal": (
        "kubernetes-principal-per-stack",
        "dev",
        _deployment("triton"),
        _set("spec.template.spec.serviceAccountName", "triton-prod"),
        "runs its pods as service account 'triton-prod' in triton: that is triton/triton-prod, the Workload Identity "
        "principal of stack 'prod'",
    ),
}


@pytest.mark.parametrize("case", CRAFTED, ids=list(CRAFTED))
def test_crafted_violation_is_refused_with_its_message(plans: dict[str, Plan], case: str) -> None:
    policy, stack, pick, edit, fragment = CRAFTED[case]
    original = pick(plans[stack])
    assert violations(original, policy) == [], "the unedited resource must pass"
    crafted = copy.deepcopy(original)
    edit(crafted.inputs)
    found = violations(crafted, policy)
    assert len(found) == 1 and fragment in found[0], found


def test_every_policy_has_a_crafted_violation() -> None:
    assert {policy for policy, *_ in CRAFTED.values()} == set(BY_NAME)


# ---------------------------------------------------------------- details of the parsers
def test_each_stack_binds_its_own_triton_principal(plans: dict[str, Plan]) -> None:
    for stack, plan in plans.items():
        (binding,) = plan.of_type(SA_IAM)
        assert binding.inputs["member"] == f"{stack_pool(stack)}[triton/triton-{stack}]"
        assert violations(binding, "workload-identity-per-stack") == []


@pytest.mark.parametrize(
    ("member", "stack", "allowed"),
    [
        (f"{POOL}[triton/triton-dev]", "dev", True),
        (f"{POOL}[triton-dev/triton]", "dev", False),  # not an account the stack runs: only the exact two are its own
        (f"{POOL}[triton-engines/engine-builder-dev]", "dev", True),  # the engine-build Job's
        (f"{POOL}[triton-engines/engine-builder-prod]", "dev", False),
        (f"{POOL}[triton-engines/triton-dev]", "dev", False),
        (f"{POOL}[triton/triton-dev]", "prod", False),
        (f"{POOL}[triton/triton]", "triton", False),
        (f"{POOL}[team/models]", "dev", False),
        (
            "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p.svc.id.goog/subject/ns/"
            "triton/sa/triton-prod",
            "prod",
            True,
        ),  # fmt: skip
        (
            "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p.svc.id.goog/subject/ns/"
            "triton/sa/triton",
            "prod",
            False,
        ),  # fmt: skip
        ("serviceAccount:reader@p.iam.gserviceaccount.com", "dev", True),  # not a Kubernetes principal
        ("group:ops@example.com", "dev", True),
    ],
)
def test_which_kubernetes_principals_name_the_stack(member: str, stack: str, allowed: bool) -> None:
    assert (principal_problem(member, stack) is None) == allowed


def test_a_binding_of_many_members_names_each_one_that_is_not_the_stacks(plans: dict[str, Plan]) -> None:
    binding = copy.deepcopy(_first(plans["dev"], SA_IAM))
    binding.type = "gcp:serviceaccount/iAMBinding:IAMBinding"
    member = binding.inputs.pop("member")
    binding.inputs["members"] = [member, f"{POOL}[triton/triton]", f"{POOL}[triton/triton-prod]"]
    found = violations(binding, "workload-identity-per-stack")
    assert len(found) == 2 and all(f.startswith("IAMBinding 'models-workload-identity' grants") for f in found)
    assert kubernetes_principal(f"{POOL}[a/b]") == ("a", "b") and kubernetes_principal("user:x@example.com") is None


# ---------------------------------------------------------------- workload-identity-per-stack: the red team's bypasses
WI = "workload-identity-per-stack"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
# The principal identifiers of https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity (table of
# principal identifiers) on the test project's pool.
POOL_PATH = "iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/my-gcp-project.svc.id.goog"
CLUSTER_SET = (
    f"principalSet://{POOL_PATH}/kubernetes.cluster/https://container.googleapis.com/v1/projects/my-gcp-project/"
    "locations/us-central1/clusters/prod-us-central1"
)
WHOLE_POOL = f"principalSet://{POOL_PATH}/*"


def _own_new_syntax(stack: str) -> str:
    return f"principal://{POOL_PATH}/subject/ns/triton/sa/triton-{stack}"


def _sole(found: list[str], resource: str, member: str) -> str:
    """The one violation, a single sentence naming the resource and the member."""
    assert len(found) == 1, found
    (message,) = found
    assert f"{resource!r} grants " in message and f"{member!r}" in message, message
    # one sentence: RESOURCE grants ROLE to MEMBER, which WHY (before: "... to MEMBER is the shared ..., the same")
    assert ". " not in message.replace(member, "MEMBER") and message.count(f"{member!r}, which ") == 1, message
    return message


def _as(resource: PlannedResource, type_token: str, **inputs: Any) -> PlannedResource:
    """The resource made into another IAM resource type with these inputs instead of its member (and members)."""
    mutated = copy.deepcopy(resource)
    mutated.type = type_token
    mutated.urn = mutated.urn.rsplit("::", 2)[0] + f"::{type_token}::{mutated.name}"
    for key in ("member", "members", "policyData"):
        mutated.inputs.pop(key, None)
    mutated.inputs |= inputs
    return mutated


def _sa_binding(plan: Plan) -> PlannedResource:
    return _first(plan, SA_IAM)


@pytest.mark.parametrize(
    ("member", "fragment"),
    [
        (CLUSTER_SET, "is a set of pods of the workload pool"),
        (WHOLE_POOL, "is a set of pods of the workload pool"),
        (f"principalSet://{POOL_PATH}/namespace/triton-dev", "every service account of namespace 'triton-dev'"),
        (f"principalSet://{POOL_PATH}/namespace/team", "every service account of namespace 'team'"),
        (f"principalSet://{POOL_PATH}/attribute.kubernetes_namespace/triton", "set of pods"),
        (_own_new_syntax("prod"), "is triton/triton-prod, not one of the service accounts of stack 'dev'"),
        (f"principal://{POOL_PATH}/subject/ns/triton/sa/triton", "the shared triton/triton"),
        (_own_new_syntax("dev") + "/extra", "a spelling this policy cannot read"),
        (f"{POOL}[triton/triton-dev]x", "a spelling this policy cannot read"),
        (f"{POOL.upper()}[triton/triton-dev]", "a spelling this policy cannot read"),
    ],
)
def test_the_readers_binding_to_a_set_of_pods_or_another_principal_is_refused(
    plans: dict[str, Plan], member: str, fragment: str
) -> None:
    crafted = copy.deepcopy(_sa_binding(plans["dev"]))
    crafted.inputs["member"] = member
    message = _sole(violations(crafted, WI), "models-workload-identity", member)
    assert message.startswith("IAMMember 'models-workload-identity' grants roles/iam.workloadIdentityUser to ")
    assert fragment in message and "could act as this service account" in message, message


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_stacks_own_principals_pass_in_both_syntaxes(plans: dict[str, Plan], stack: str) -> None:
    binding = copy.deepcopy(_sa_binding(plans[stack]))
    for member in (
        f"{POOL}[triton/triton-{stack}]",
        _own_new_syntax(stack),
        f"{POOL}[triton-engines/engine-builder-{stack}]",
        f"principal://{POOL_PATH}/subject/ns/triton-engines/sa/engine-builder-{stack}",
    ):
        binding.inputs["member"] = member
        assert violations(binding, WI) == [], member


def test_the_engine_writers_binding_passes_and_is_the_engine_jobs_principal(engine_plan: Callable[..., Plan]) -> None:
    plan = engine_plan("dev")
    members = {b.name: b.inputs["member"] for b in plan.of_type(SA_IAM)}
    assert members["engines-workload-identity"] == f"{stack_pool('dev')}[triton-engines/engine-builder-dev]", members
    assert all_violations(plan) == []
    # the same binding in another stack's plan names another stack's Job
    (writer,) = [b for b in plan.of_type(SA_IAM) if b.name == "engines-workload-identity"]
    other = copy.deepcopy(writer)
    other.urn = other.urn.replace("urn:pulumi:dev::", "urn:pulumi:staging::")
    _sole(violations(other, WI), "engines-workload-identity", writer.inputs["member"])


def _policy_data(*bindings: tuple[str, list[str]]) -> str:
    return json.dumps({"bindings": [{"role": role, "members": members} for role, members in bindings]})


def _grant_inputs(kind: str, role: str, member: str) -> dict[str, Any]:
    """The inputs of an IAM Member, Binding or Policy resource that grants `role` to `member`."""
    if kind == "Policy":
        return {"policyData": _policy_data((role, [member]))}
    return {"role": role} | ({"member": member} if kind == "Member" else {"members": [member]})


def test_a_service_account_policy_or_binding_is_read_member_by_member(plans: dict[str, Plan]) -> None:
    reader = _sa_binding(plans["dev"])
    own = f"{POOL}[triton/triton-dev]"
    policy = _as(
        reader,
        "gcp:serviceaccount/iAMPolicy:IAMPolicy",
        policyData=_policy_data(
            ("roles/iam.workloadIdentityUser", [own, CLUSTER_SET]), ("roles/iam.serviceAccountUser", ["user:a@b.c"])
        ),
    )
    _sole(violations(policy, WI), "models-workload-identity", CLUSTER_SET)
    assert violations(_as(policy, policy.type, policyData=_policy_data((WORKLOAD_IDENTITY_USER, [own]))), WI) == []
    # another role on the account (serviceAccountTokenCreator mints its tokens) to another stack's pods
    token = _as(policy, policy.type, policyData=_policy_data(("roles/iam.serviceAccountTokenCreator", [WHOLE_POOL])))
    assert "grants roles/iam.serviceAccountTokenCreator to" in _sole(violations(token, WI), reader.name, WHOLE_POOL)
    unreadable = _as(policy, policy.type, policyData=f"not json {WHOLE_POOL}")
    assert len(violations(unreadable, WI)) == 1

    binding = _as(
        reader, "gcp:serviceaccount/iAMBinding:IAMBinding", members=[own, f"{POOL}[triton/triton-prod]", WHOLE_POOL]
    )
    found = violations(binding, WI)
    assert len(found) == 2 and all(m.startswith("IAMBinding 'models-workload-identity' grants") for m in found)


@pytest.mark.parametrize("kind", ["Member", "Binding", "Policy"])
@pytest.mark.parametrize("member", [f"{POOL}[triton/triton-dev]", _own_new_syntax("dev"), WHOLE_POOL])
def test_workload_identity_user_on_the_project_is_refused_even_for_the_stacks_own(
    plans: dict[str, Plan], kind: str, member: str
) -> None:
    """On the project the role lets the member act as every service account in it, prod's reader included."""
    grant = _first(plans["dev"], "gcp:projects/iAMMember:IAMMember")
    assert violations(grant, WI) == []
    crafted = _as(grant, f"gcp:projects/iAM{kind}:IAM{kind}", **_grant_inputs(kind, WORKLOAD_IDENTITY_USER, member))
    message = _sole(violations(crafted, WI), grant.name, member)
    assert message.startswith(f"IAM{kind} {grant.name!r} grants {WORKLOAD_IDENTITY_USER} on the whole project")
    assert "act as every service account in it" in message


@pytest.mark.parametrize("kind", ["Member", "Binding", "Policy"])
def test_bucket_grants_to_pods_other_than_the_stacks_own_are_refused(plans: dict[str, Plan], kind: str) -> None:
    grant = _first(plans["prod"], "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert violations(grant, WI) == []
    role = "roles/storage.objectViewer"
    for member, allowed in [
        (f"{POOL}[triton/triton-prod]", True),
        (_own_new_syntax("prod"), True),
        ("serviceAccount:reader@my-gcp-project.iam.gserviceaccount.com", True),
        (CLUSTER_SET, False),
        (WHOLE_POOL, False),
        (f"{POOL}[triton/triton-dev]", False),
        (f"principalSet://{POOL_PATH}/namespace/triton", False),
    ]:
        crafted = _as(grant, f"gcp:storage/bucketIAM{kind}:BucketIAM{kind}", **_grant_inputs(kind, role, member))
        found = violations(crafted, WI)
        if allowed:
            assert found == [], (member, found)
        else:
            message = _sole(found, grant.name, member)
            assert message.startswith(f"BucketIAM{kind} {grant.name!r} grants {role} to {member!r}, which ")


def test_grants_still_unknown_at_preview_are_left_for_up(plans: dict[str, Plan]) -> None:
    grant = copy.deepcopy(_first(plans["dev"], "gcp:projects/iAMMember:IAMMember"))
    grant.inputs["member"] = UNKNOWN  # what the engine hands over for an Output not yet resolved
    assert violations(grant, WI) == []


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("nvcr.io/nvidia/tritonserver:25.06-py3", None),
        ("registry.k8s.io/pause:3.10", None),
        ("localhost:5000/img@sha256:" + "a" * 64, None),
        ("img:latest@sha256:" + "0" * 64, None),
        ("localhost:5000/img", "has no tag (means latest)"),
        ("img:latest", "uses the tag latest"),
        ("img@sha256:short", "has a malformed digest"),
        ("img:1.0@md5:abc", "has a malformed digest"),
        ("gcr.io/google.com/cloudsdktool/google-cloud-cli:stable", "uses the tag stable, a channel that moves"),
        ("gcr.io/google.com/cloudsdktool/google-cloud-cli:594.0.0-stable", None),
    ],
)
def test_image_references(image: str, problem: str | None) -> None:
    found = image_problem(image)
    assert found is None if problem is None else found is not None and found.startswith(problem), found


@given(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True))
def test_a_tag_is_a_release_exactly_when_it_holds_a_number(tag: str) -> None:
    """latest, stable, alpine, edge, mainline...: names that move; 3.10, v0.12.0, 594.0.0-stable, 25.06-py3: releases.
    The node's preloaded image (imagePullPolicy Never: cos-nvidia-installer:fixed) is never pulled, so any tag."""
    problem = image_problem(f"registry.example/team/img:{tag}")
    assert (problem is None) == (any(c.isdigit() for c in tag) and tag != "latest")
    if tag != "latest":
        assert image_problem(f"img:{tag}", pulled=False) is None


def test_restricted_api_flags_in_both_spellings() -> None:
    tokens = [
        "tritonserver",
        "--grpc-restricted-protocol",
        "trace,logging:h=k",
        "--grpc-restricted-protocol=shared-memory:h=k",
    ]
    assert restricted_apis(tokens, "--grpc-restricted-protocol") == {"trace", "logging", "shared-memory"}
    assert restricted_apis(["--grpc-restricted-protocol=trace:h="], "--grpc-restricted-protocol") == set()


# ---------------------------------------------------------------- web UIs and Triton found by behaviour
# Words that cannot spell grafana, prometheus, locust or tritonserver (no a, e, l, o, r, s, t, u in the alphabet).
NEUTRAL = st.text(alphabet="bdijkvwxyz0123456789", min_size=1, max_size=10)


NEUTRAL_PORT = st.integers(1, 65535).filter(lambda n: n not in WEB_UI_PORTS)


# A port name is an IANA_SVC_NAME: at least one letter, so "8089" is a number, never a name (RFC 6335 5.1,
# https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#ports).
PORT_NAME = NEUTRAL.map(lambda w: f"k{w}")


WIDE, NARROW = ["0.0.0.0/1", "128.0.0.0/1"], ["203.0.113.0/24"]


def _planned(type_token: str, name: str, inputs: dict[str, Any]) -> PlannedResource:
    urn = f"urn:pulumi:dev::triton-gke::{type_token}::{name}"
    return PlannedResource(type_token, name, urn, True, "", "", [], inputs)


def _service(name: str, labels: dict, selector: dict, ports: list[dict], ranges: list[str], ns: str = "x") -> Any:
    metadata = {"name": name, "namespace": ns, "labels": labels}
    spec = {"type": "LoadBalancer", "selector": selector, "ports": ports, "loadBalancerSourceRanges": ranges}
    return _planned(SERVICE, name, {"metadata": metadata, "spec": spec})


@st.composite
def exposed_services(draw: st.DrawFn) -> tuple[PlannedResource, str | None]:
    """A LoadBalancer Service with a random name and labels (a UI's name among them, to be ignored), and
    perhaps one UI cue in what it exposes: a selector key or value, a port or targetPort number, a port name."""
    ui = draw(st.none() | st.sampled_from(WEB_UIS))
    selector = draw(st.dictionaries(NEUTRAL, NEUTRAL, min_size=1, max_size=3))
    ports = [{"port": draw(NEUTRAL_PORT), "targetPort": draw(NEUTRAL_PORT | PORT_NAME), "name": draw(PORT_NAME)}]
    if ui:
        number = next(n for n, u in WEB_UI_PORTS.items() if u == ui)
        cue = draw(st.sampled_from(["selector key", "selector value", "port", "target", "target text", "name"]))
        if cue == "selector key":
            selector[f"app.kubernetes.io/{ui}"] = draw(NEUTRAL)
        elif cue == "selector value":
            selector[draw(NEUTRAL)] = f"{draw(NEUTRAL)}-{ui}"
        elif cue in ("port", "target", "target text"):
            field = "port" if cue == "port" else "targetPort"
            ports.append({"port": draw(NEUTRAL_PORT), field: str(number) if cue == "target text" else number})
        else:
            ports.append({"port": draw(NEUTRAL_PORT), "name": f"http-{ui}", "targetPort": draw(PORT_NAME)})
    name = draw(NEUTRAL | st.sampled_from(WEB_UIS))
    labels = {"app": draw(NEUTRAL | st.sampled_from(WEB_UIS))}
    return _service(name, labels, selector, draw(st.permutations(ports)), WIDE), ui


@settings(max_examples=60, deadline=None)
@given(exposed_services())
def test_web_uis_are_found_by_what_a_service_exposes_not_its_name(case) -> None:
    service, ui = case
    assert web_ui_of(_props(service)) == ui
    found = violations(service, "web-ui-not-public")
    assert len(found) == (1 if ui else 0), found
    assert all(f"for {ui} (by its selector or ports)" in message for message in found)


UI_IMAGES = {"grafana": "grafana/grafana:11.6.0", "prometheus": "prometheus/prometheus:v3.5.0", "locust": "locust:2.47"}


@st.composite
def selected_workloads(draw: st.DrawFn) -> tuple[list[PlannedResource], str | None]:
    """A Deployment with random names and labels behind a LoadBalancer Service with a neutral selector and ports.

    Its pods run a UI image (under any registry), or a neutral image whose named port the Service targets,
    numbered 3000/9090/8089 or not; the Service sits in the Deployment's namespace or another one.
    """
    labels = draw(st.dictionaries(NEUTRAL, NEUTRAL, min_size=1, max_size=4))
    selector = dict(draw(st.lists(st.sampled_from(sorted(labels.items())), min_size=1, unique=True)))
    port_name = draw(PORT_NAME)
    ui_image = draw(st.none() | st.sampled_from(WEB_UIS))
    number = draw(st.sampled_from(sorted(WEB_UI_PORTS)) | NEUTRAL_PORT)
    registry = draw(st.sampled_from(["", "docker.io/", "mirror.example:5000/team/"]))
    image = f"{registry}{UI_IMAGES[ui_image]}" if ui_image else f"{registry}{draw(NEUTRAL)}:{draw(NEUTRAL)}"
    container = {"name": draw(NEUTRAL), "image": image, "ports": [{"name": port_name, "containerPort": number}]}
    namespace, elsewhere = draw(NEUTRAL), draw(st.booleans())
    template = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
    deployment = _planned(
        DEPLOYMENT,
        draw(NEUTRAL),
        {"metadata": {"name": draw(NEUTRAL), "namespace": namespace}, "spec": {"template": template}},
    )
    ports = [{"port": draw(NEUTRAL_PORT), "targetPort": port_name, "name": draw(PORT_NAME)}]
    ranges = draw(st.sampled_from([WIDE, NARROW]))
    service = _service(draw(NEUTRAL), {}, selector, ports, ranges, ns=namespace + "x" if elsewhere else namespace)
    ui = ui_image or WEB_UI_PORTS.get(number)
    return [deployment, service], ui if ui and not elsewhere and ranges is WIDE else None


@settings(max_examples=50, deadline=None)
@given(selected_workloads())
def test_web_uis_behind_neutral_selectors_are_found_through_the_pods_they_select(case) -> None:
    resources, ui = case
    deployment, service = resources
    assert violations(service, "web-ui-not-public") == [], "the Service alone looks neutral"
    found = stack_violations(resources, "web-ui-not-public-by-workload")
    assert len(found) == (1 if ui else 0), found
    assert all(f"for {ui} (Service {service.inputs['metadata']['name']} selects Deployment" in m for m in found)


def test_a_relabelled_grafana_behind_a_neutral_service_is_refused() -> None:
    plan = evaluate("dev", webUiSourceRanges=["203.0.113.0/24"])
    grafana = copy.deepcopy(_deployment("grafana")(plan))
    service = copy.deepcopy(_first(plan, SERVICE, lambda r: r.inputs["metadata"]["name"] == "grafana-web"))
    assert stack_violations([grafana, service], "web-ui-not-public-by-workload") == []
    grafana.inputs["spec"]["template"]["metadata"]["labels"] = {"tier": "x1"}
    grafana.inputs["spec"]["selector"] = {"matchLabels": {"tier": "x1"}}
    service.inputs["spec"].update(selector={"tier": "x1"}, ports=[{"name": "h", "port": 80, "targetPort": "web"}])
    service.inputs["spec"]["loadBalancerSourceRanges"] = ["::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"]
    assert violations(service, "web-ui-not-public") == []
    [message] = stack_violations([grafana, service], "web-ui-not-public-by-workload")
    assert "for grafana (Service grafana-web selects Deployment grafana)" in message
    assert "their union '0.0.0.0/0' (IPv6 ranges that embed IPv4 counted as IPv4)" in message


TRITON_CALLS = {
    "command": lambda: {"command": ["tritonserver"], "args": ["--model-repository=/m"]},
    "full path": lambda: {"command": ["/opt/tritonserver/bin/tritonserver", "--model-repository=/m"]},
    "image entrypoint": lambda: {"args": ["tritonserver", "--model-repository=/m"]},
    "shell": lambda: {"command": ["sh", "-c"], "args": ["cd /w && exec tritonserver --model-repository=/m"]},
}


@settings(max_examples=60, deadline=None)
@given(
    registry=st.sampled_from(["", "nvcr.io/nvidia/", "europe-docker.pkg.dev/acme/serving/"]),
    name=NEUTRAL,
    tag=NEUTRAL,
    call=st.none() | st.sampled_from(sorted(TRITON_CALLS)),
    from_ngc=st.booleans(),
    command=st.none() | st.lists(NEUTRAL, min_size=1, max_size=3),
    args=st.lists(NEUTRAL.map(lambda w: f"--{w}") | st.just("--model-repository=/models/tritonserver"), max_size=4),
)
def test_tritonserver_is_found_by_what_a_container_runs(registry, name, tag, call, from_ngc, command, args) -> None:
    image = f"nvcr.io/nvidia/tritonserver:{tag}-py3" if from_ngc else f"{registry}{name}:{tag}"
    container: dict[str, Any] = {"name": name, "image": image, "args": args}
    if command:
        container["command"] = command
    if call:
        container.update(TRITON_CALLS[call]())
    # NGC's image runs its args through its entrypoint, so without a command it counts as Triton whatever it runs.
    expected = call is not None or (from_ngc and "command" not in container)
    assert is_triton(container) == expected


# ---------------------------------------------------------------- prod-lb-https (red team 44, finding 3)
HTTPS_PROXY = "gcp:compute/targetHttpsProxy:TargetHttpsProxy"


def test_prod_without_a_domain_is_advised_once_and_with_one_not_at_all(plans: dict[str, Plan]) -> None:
    """Shipped prod: one target HTTP proxy serving the backends, so requests and their key go as plain HTTP (advisory:
    policies.py says why it cannot be mandatory). With a domain the proxy on port 80 serves only the redirect."""
    (line,) = stack_violations(plans["prod"].resources, "prod-lb-https")
    assert "\n" not in line and line.startswith("stack 'prod' is a production stack: target HTTP proxy ")
    assert "inference key they carry cross the internet unencrypted; set triton-gke:domain" in line
    secured = evaluate("prod", domain="infer.example.com")
    assert secured.of_type(HTTPS_PROXY) and secured.of_type("gcp:compute/targetHttpProxy:TargetHttpProxy")
    assert stack_violations(secured.resources, "prod-lb-https") == []
    assert [v for v in all_violations(secured) if v.startswith("prod-lb-https")] == []
    assert STACK_BY_NAME["prod-lb-https"].enforcement_level == EnforcementLevel.ADVISORY


def test_only_production_stacks_are_judged(plans: dict[str, Plan]) -> None:
    staging = plans["staging"].resources  # the load balancer, no domain, not production by default
    assert stack_violations(staging, "prod-lb-https") == []
    (line,) = stack_violations(staging, "prod-lb-https", {"prodStacks": ["staging"]})
    assert line.startswith("stack 'staging' is a production stack")


def _url_map_of_http_proxy(plan: Plan) -> PlannedResource:
    (proxy,) = plan.of_type("gcp:compute/targetHttpProxy:TargetHttpProxy")
    (url_map,) = [r for r in plan.of_type("gcp:compute/uRLMap:URLMap") if r.urn in proxy.dependencies]
    return url_map


@given(
    https_redirect=st.sampled_from([True, False, None]),
    host_rules=st.booleans(),
    path_matchers=st.booleans(),
    default_service=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_the_port_80_map_passes_only_when_it_does_nothing_but_redirect(
    plans: dict[str, Plan], https_redirect: bool | None, host_rules: bool, path_matchers: bool, default_service: bool
) -> None:
    """Generated edits of the redirect map on port 80 of a prod with a domain: any route to a backend, or a redirect
    that is not to HTTPS, is serving plain HTTP again."""
    secured = _secured_prod()
    resources = copy.deepcopy(secured.resources)
    (url_map,) = [r for r in resources if r.urn == _url_map_of_http_proxy(secured).urn]
    if https_redirect is None:
        url_map.inputs.pop("defaultUrlRedirect", None)
    else:
        url_map.inputs["defaultUrlRedirect"]["httpsRedirect"] = https_redirect
    if host_rules:
        url_map.inputs["hostRules"] = [{"hosts": ["*"], "pathMatcher": "m"}]
    if path_matchers:
        url_map.inputs["pathMatchers"] = [{"name": "m", "defaultService": "backend-id"}]
    if default_service:
        url_map.inputs["defaultService"] = "backend-id"
    redirects_only = https_redirect is True and not (host_rules or path_matchers or default_service)
    assert (stack_violations(resources, "prod-lb-https") == []) == redirects_only


_SECURED: list[Plan] = []


def _secured_prod() -> Plan:
    if not _SECURED:
        _SECURED.append(evaluate("prod", domain="infer.example.com"))
    return _SECURED[0]


def test_the_readme_documents_every_policy_with_its_level() -> None:
    """policy/README.md's table is what a user reads before enabling the pack: every policy, at the level it enforces
    (prod-inference-auth was missing, and a blank line cut prod-lb-https's row out of the table)."""
    import re

    from tests.support.checkout import PROJECT_DIR

    text = (PROJECT_DIR / "triton_gke" / "policy" / "README.md").read_text(encoding="utf-8")
    table = text[text.index("\n| `") : text.index("\n\n", text.index("\n| `"))]
    documented = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (advisory|mandatory) \|", table, re.M))
    served = {p.name: p.enforcement_level.value for p in (*POLICIES, *STACK_POLICIES)}
    assert documented == served
