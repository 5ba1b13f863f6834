"""The guardrail policy pack (policy/): every stack passes every policy; each policy refuses what it guards.

The validate functions run on the state the real program registers under the mock runtime, handed over
the way the engine hands it to a policy pack: inputs in camelCase inside pulumi-policy's own
unknown-checking proxies."""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy
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

from tests.conftest import evaluate

BY_NAME = {p.name: p for p in POLICIES}


STACK_BY_NAME = {p.name: p for p in STACK_POLICIES}


DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
POOL = "serviceAccount:my-gcp-project.svc.id.goog"


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


def stack_violations(resources: list[PlannedResource], policy_name: str) -> list[str]:
    """What a stack policy reports on these resources, handed over as the engine hands a stack's resources."""
    handed = [PolicyResource(r.type, _props(r), r.urn, r.name, _options(r), None, None, [], {}) for r in resources]
    found: list[str] = []
    result = STACK_BY_NAME[policy_name].validate(
        StackValidationArgs(handed), lambda message, urn=None: found.append(message)
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
    ] + [f"{policy}: {message}" for policy in STACK_BY_NAME for message in stack_violations(plan.resources, policy)]


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
    assert all_violations(plan) == []


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
    found = all_violations(plan)
    clusters = [v for v in found if "deletionProtection: true" in v]
    buckets = [v for v in found if "forceDestroy" in v]
    assert len(clusters) == 3 and len(buckets) == 1 and len(found) == 4, found
    assert all(v.startswith("prod-deletion-protection") for v in found)


def test_which_stacks_count_as_production_is_configurable(plans: dict[str, Plan]) -> None:
    staging = plans["staging"]  # disposable by design: deletionProtection false, bucketForceDestroy true
    assert all_violations(staging) == []
    found = all_violations(staging, {"prodStacks": ["staging", "prod"]})
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
        "'serviceAccount:my-gcp-project.svc.id.goog[triton/triton]' is the shared triton/triton",
    ),
    "staging's reader bound to prod's principal": (
        "workload-identity-per-stack",
        "staging",
        lambda p: _first(p, SA_IAM),
        _set("member", f"{POOL}[triton/triton-prod]"),
        "does not name stack 'staging' (expected service account or namespace 'triton-staging')",
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
        "is every service account of namespace 'triton', which does not name stack 'dev'",
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
        assert binding.inputs["member"] == f"{POOL}[triton/triton-{stack}]"
        assert violations(binding, "workload-identity-per-stack") == []


@pytest.mark.parametrize(
    ("member", "stack", "allowed"),
    [
        (f"{POOL}[triton/triton-dev]", "dev", True),
        (f"{POOL}[triton-dev/triton]", "dev", True),  # a namespace per stack names it too
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
    ],
)
def test_image_references(image: str, problem: str | None) -> None:
    assert image_problem(image) == problem


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
