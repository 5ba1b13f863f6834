"""The global load balancer of multi-region stacks, its routes, and what adding a region changes."""

from __future__ import annotations

import json
import re

import pytest
from conftest import evaluate

from infra.global_lb import HEALTH_CHECK_RANGES
from offline.runtime import Plan

BACKEND = "gcp:compute/backendService:BackendService"
URL_MAP = "gcp:compute/uRLMap:URLMap"
NEG_LOOKUP = "gcp:compute/getNetworkEndpointGroup:getNetworkEndpointGroup"
LB_TYPES = {
    BACKEND,
    URL_MAP,
    "gcp:compute/globalAddress:GlobalAddress",
    "gcp:compute/healthCheck:HealthCheck",
    "gcp:compute/firewall:Firewall",
    "gcp:compute/targetHttpProxy:TargetHttpProxy",
    "gcp:compute/globalForwardingRule:GlobalForwardingRule",
}
PROD_ZONES = {
    "us-central1": {"us-central1-a", "us-central1-b", "us-central1-c"},
    "europe-west4": {"europe-west4-a", "europe-west4-b", "europe-west4-c"},
    "asia-east1": {"asia-east1-a", "asia-east1-c"},
}


def backends_by_port(plan: Plan) -> dict[str, dict]:
    return {b.name.removeprefix("global-"): b.inputs for b in plan.of_type(BACKEND)}


def neg_zone_and_name(group: str) -> tuple[str, str]:
    match = re.search(r"zones/([^/]+)/networkEndpointGroups/([^/]+)$", group)
    assert match, group
    return match.group(1), match.group(2)


def test_a_backend_per_zonal_neg_of_every_region(prod_plan):
    for port, backend in backends_by_port(prod_plan).items():
        negs = {neg_zone_and_name(b["group"]) for b in backend["backends"]}
        expected = {(zone, f"triton-prod-{region}-{port}") for region, zones in PROD_ZONES.items() for zone in zones}
        assert negs == expected
        assert all(b["balancingMode"] == "RATE" and b["maxRatePerEndpoint"] == 1000 for b in backend["backends"])
        assert backend["loadBalancingScheme"] == "EXTERNAL_MANAGED"


def test_grpc_goes_over_http2_and_http_over_http(prod_plan):
    backends = backends_by_port(prod_plan)
    assert backends["grpc"]["protocol"] == "H2C"  # HTTP/2 in clear text: Triton's gRPC port has no TLS
    assert backends["http"]["protocol"] == "HTTP"


def test_health_check_is_tritons_strict_readiness_on_port_8000(prod_plan):
    (check,) = prod_plan.of_type("gcp:compute/healthCheck:HealthCheck")
    http = check.inputs["httpHealthCheck"]
    assert (http["requestPath"], http["port"], http["portSpecification"]) == (
        "/v2/health/ready",
        8000,
        "USE_FIXED_PORT",
    )
    for backend in backends_by_port(prod_plan).values():
        assert backend["healthChecks"] == check.urn.split("::")[-1] + "-id"


def test_firewall_opens_only_the_health_check_ranges_to_each_regions_gpu_nodes(prod_plan):
    rules = prod_plan.of_type("gcp:compute/firewall:Firewall")
    assert len(rules) == 3
    for rule in rules:
        assert sorted(rule.inputs["sourceRanges"]) == sorted(HEALTH_CHECK_RANGES)
        assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["8000", "8001"]}]
        (account,) = rule.inputs["targetServiceAccounts"]
        assert account.startswith("prod-nodes-")


def routed_service(url_map: dict, path: str) -> str | None:
    """Which backend the URL map sends `path` to; None when the default 404 abort answers."""
    (matcher,) = url_map["pathMatchers"]
    for rule in sorted(matcher["routeRules"], key=lambda r: r["priority"]):
        for match in rule["matchRules"]:
            if match.get("fullPathMatch") == path:
                return rule["service"]
            template = match.get("pathTemplateMatch")
            if template and re.fullmatch(re.sub(r"\{[^}]+=\*\}", "[^/]+", template), path):
                return rule["service"]
    abort = matcher["defaultRouteAction"]["faultInjectionPolicy"]["abort"]
    assert (abort["httpStatus"], abort["percentage"]) == (404, 100)
    return None


INFERENCE_PATHS = {
    "/v2/models/resnet/infer": "global-http-id",
    "/v2/models/resnet/versions/1/infer": "global-http-id",
    "/v2/models/resnet": "global-http-id",
    "/v2/models/resnet/ready": "global-http-id",
    "/v2/health/ready": "global-http-id",
    "/v2": "global-http-id",
    "/inference.GRPCInferenceService/ModelInfer": "global-grpc-id",
    "/inference.GRPCInferenceService/ServerReady": "global-grpc-id",
}
ADMIN_PATHS = [
    "/v2/repository/index",
    "/v2/repository/models/resnet/load",
    "/v2/repository/models/resnet/unload",
    "/v2/systemsharedmemory/status",
    "/v2/cudasharedmemory/region/x/register",
    "/v2/trace/setting",
    "/v2/logging",
    "/v2/models/resnet/stats",
    "/v2/models/resnet/config",
    "/metrics",
    "/inference.GRPCInferenceService/RepositoryModelUnload",
    "/inference.GRPCInferenceService/SystemSharedMemoryRegister",
    "/inference.GRPCInferenceService/LogSettings",
    "/inference.GRPCInferenceService/TraceSetting",
]


def test_url_map_routes_inference_only(prod_plan):
    (url_map,) = prod_plan.of_type(URL_MAP)
    for path, service in INFERENCE_PATHS.items():
        assert routed_service(url_map.inputs, path) == service, path
    for path in ADMIN_PATHS:
        assert routed_service(url_map.inputs, path) is None, f"{path} must not reach Triton"


def test_forwarding_rules_are_explicitly_external_managed(prod_plan):
    rules = prod_plan.of_type("gcp:compute/globalForwardingRule:GlobalForwardingRule")
    assert [r.inputs["portRange"] for r in rules] == ["80"]
    assert all(r.inputs["loadBalancingScheme"] == "EXTERNAL_MANAGED" for r in rules)


def test_a_domain_adds_https_with_a_managed_certificate():
    plan = evaluate("prod", domain="infer.example.com")
    (cert,) = plan.of_type("gcp:compute/managedSslCertificate:ManagedSslCertificate")
    assert cert.inputs["managed"]["domains"] == ["infer.example.com"]
    ports = sorted(r.inputs["portRange"] for r in plan.of_type("gcp:compute/globalForwardingRule:GlobalForwardingRule"))
    assert ports == ["443", "80"]


def test_dev_has_no_global_load_balancer(dev_plan):
    assert {r.type for r in dev_plan.resources} & LB_TYPES == set()
    assert not [call for _, call in dev_plan.invokes if call.token == NEG_LOOKUP]


def test_backends_depend_on_neg_lookups_which_depend_on_the_services(prod_plan):
    neg_services = {
        r.urn: r
        for r in prod_plan.of_type("kubernetes:core/v1:Service")
        if r.inputs["metadata"]["name"] == "triton-neg"
    }
    for backend in prod_plan.of_type(BACKEND):
        assert set(neg_services) <= set(backend.dependencies), (
            "destroy must remove the backends before the NEG Services"
        )
    lookups = [(seq, call.args) for seq, call in prod_plan.invokes if call.token == NEG_LOOKUP]
    assert len(lookups) == 2 * sum(len(z) for z in PROD_ZONES.values())
    for seq, args in lookups:
        region = next(r for r in PROD_ZONES if args["zone"].startswith(r))
        (service,) = [s for s in neg_services.values() if s.name == f"triton-{region}-triton-neg-svc"]
        assert seq > service.sequence, "a NEG is looked up only after its Service exists"
        annotation = json.loads(service.inputs["metadata"]["annotations"]["cloud.google.com/neg"])
        assert args["name"] in {p["name"] for p in annotation["exposed_ports"].values()}


def _identity(plan: Plan) -> dict[tuple[str, str], dict]:
    return {(r.type, r.name): r.inputs for r in plan.resources}


@pytest.mark.parametrize("stack,base", [("prod", ["us-central1", "europe-west4", "asia-east1"])])
def test_adding_a_region_adds_only_that_region_and_lb_backends(stack, base):
    before = _identity(evaluate(stack, regions=base))
    after = _identity(evaluate(stack, regions=[*base, "us-east4"]))
    added = set(after) - set(before)
    assert set(before) - set(after) == set()
    assert added and all("us-east4" in name for _, name in added), sorted(added)
    assert {t for t, _ in added} >= {
        "gcp:container/cluster:Cluster",
        "gcp:container/nodePool:NodePool",
        "kubernetes:apps/v1:Deployment",
        "gcp:compute/firewall:Firewall",
    }
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {(BACKEND, "global-http"), (BACKEND, "global-grpc")}


def test_staging_is_two_regions_behind_the_load_balancer():
    plan = evaluate("staging")
    assert sorted(c.inputs["location"] for c in plan.of_type("gcp:container/cluster:Cluster")) == [
        "europe-west4",
        "us-central1",
    ]
    regions = {
        neg_zone_and_name(b["group"])[1].split("-", 2)[2].rsplit("-", 1)[0]
        for b in backends_by_port(plan)["http"]["backends"]
    }
    assert regions == {"us-central1", "europe-west4"}


def test_outputs_name_the_endpoints_and_how_to_reach_each_region():
    plan = evaluate("prod", domain="infer.example.com")
    assert plan.outputs["httpEndpoint"] == "https://infer.example.com/v2/models/MODEL/infer"
    assert plan.outputs["grpcEndpoint"] == "infer.example.com:443"
    access = plan.outputs["access"]
    assert set(access) == {"us-central1", "europe-west4", "asia-east1"}
    assert "--region europe-west4" in access["europe-west4"]["credentials"]
    assert {"locust", "grafana", "prometheus"} <= set(access["asia-east1"])


def test_dev_exports_no_load_balancer_endpoints(dev_plan):
    assert not {"lbAddress", "httpEndpoint", "grpcEndpoint"} & set(dev_plan.outputs)
