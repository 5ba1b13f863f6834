"""The guardrail policy pack (policy/): every stack passes every policy; each policy refuses what it guards.

The validate functions run on the state the real program registers under the mock runtime, handed over
the way the engine hands it to a policy pack: inputs in camelCase inside pulumi-policy's own
unknown-checking proxies. One test also runs the pack exactly as the CLI does (`python -m pulumi.policy`)
and talks to it over the analyzer gRPC protocol.
"""

from __future__ import annotations

import copy
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from conftest import PROJECT_DIR, evaluate
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from infra.config import ConfigError
from offline.runtime import Plan, PlannedResource
from policy.policies import (
    BUCKET,
    CLUSTER,
    FIREWALL,
    NODE_POOL,
    POLICIES,
    SERVICE,
    image_problem,
    restricted_apis,
    stack_of,
)

BY_NAME = {p.name: p for p in POLICIES}
# The documented choice (policy/README.md): only the GPU taint merely warns.
LEVELS = {name: "mandatory" for name in BY_NAME} | {"gpu-node-pools-tainted": "advisory"}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
PACK_START_TIMEOUT_S = 60


def validation_args(resource: PlannedResource, config: dict[str, Any] | None = None) -> ResourceValidationArgs:
    """What the engine hands a policy for this resource: its inputs, deserialised and proxied by pulumi-policy."""
    props = unknown_checking_proxy(deserialize_properties(copy.deepcopy(resource.inputs)))
    options = PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=resource.parent_urn or None,
    )
    return ResourceValidationArgs(resource.type, props, resource.urn, resource.name, options, None, config)


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
    ]


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
    with pytest.raises(ConfigError, match=r"triton-gke:webUiSourceRanges: '0.0.0.0/1' .* wider than /8"):
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
        "for grafana with no loadBalancerSourceRanges",
    ),
    "grafana load balancer open to all": (
        "web-ui-not-public",
        "dev",
        _web_service,
        _edits(_set("spec.type", "LoadBalancer"), _set("spec.loadBalancerSourceRanges", ["0.0.0.0/0"])),
        "wider than /8 (IPv6 /32): 0.0.0.0/0",
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


# ---------------------------------------------------------------- the pack as the CLI runs it


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """policy/ served the way `pulumi up --policy-pack policy` starts it: it prints its port, then serves."""
    pack = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "policy"],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([pack.stdout], [], [], PACK_START_TIMEOUT_S)
        line = pack.stdout.readline().strip() if ready else ""
        assert line.isdigit(), f"the pack printed no port: {line!r} {pack.stderr.read() if pack.poll() else ''}"
        with grpc.insecure_channel(f"127.0.0.1:{line}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        pack.kill()  # the pack serves until its host (the CLI) ends it
        pack.wait(timeout=30)
        pack.stdout.close()
        pack.stderr.close()


def _analyze(stub: analyzer_pb2_grpc.AnalyzerStub, resource: PlannedResource) -> list[analyzer_pb2.AnalyzeDiagnostic]:
    properties = struct_pb2.Struct()
    properties.update(resource.inputs)
    request = analyzer_pb2.AnalyzeRequest(
        type=resource.type, properties=properties, urn=resource.urn, name=resource.name
    )
    return list(stub.Analyze(request, timeout=30).diagnostics)


def test_the_pack_declares_every_policy_with_its_enforcement_level(analyzer) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    levels = {p.name: analyzer_pb2.EnforcementLevel.Name(p.enforcementLevel).lower() for p in info.policies}
    assert info.name == "triton-gke-guardrails"
    assert levels == LEVELS


def test_the_pack_blocks_a_public_bucket_and_passes_the_real_one(analyzer, plans: dict[str, Plan]) -> None:
    bucket = _first(plans["prod"], BUCKET)
    assert _analyze(analyzer, bucket) == []
    public = copy.deepcopy(bucket)
    public.inputs["publicAccessPrevention"] = "inherited"
    [diagnostic] = _analyze(analyzer, public)
    assert diagnostic.policyName == "bucket-locked-down"
    assert diagnostic.enforcementLevel == analyzer_pb2.EnforcementLevel.MANDATORY
    assert "publicAccessPrevention 'inherited'" in diagnostic.message


def test_the_pack_only_warns_about_an_untainted_gpu_pool(analyzer, plans: dict[str, Plan]) -> None:
    pool = copy.deepcopy(_gpu_pool(plans["dev"]))
    pool.inputs["nodeConfig"]["taints"] = []
    [diagnostic] = _analyze(analyzer, pool)
    assert diagnostic.policyName == "gpu-node-pools-tainted"
    assert diagnostic.enforcementLevel == analyzer_pb2.EnforcementLevel.ADVISORY
