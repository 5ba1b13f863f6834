"""The global load balancer of multi-region stacks, its routes, and what adding a region changes."""

from __future__ import annotations

import ipaddress
import json
import re

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, evaluate, evaluate_component, stack_settings
from triton_gke.infra.global_lb import (
    HEALTH_CHECK_RANGES,
    GlobalLoadBalancer,
    GlobalLoadBalancerArgs,
    RegionBackend,
    certificate_name,
)
from triton_gke.offline.runtime import Plan
from triton_gke.settings import from_stack_file as load_settings
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.load_balancer import DOMAIN, MAX_RATE_LIMIT

BACKEND = "gcp:compute/backendService:BackendService"


URL_MAP = "gcp:compute/uRLMap:URLMap"


SECURITY_POLICY = "gcp:compute/securityPolicy:SecurityPolicy"


HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"


NEG_LOOKUP = "gcp:compute/getNetworkEndpointGroup:getNetworkEndpointGroup"


LB_TYPES = {
    BACKEND,
    URL_MAP,
    "gcp:compute/globalAddress:GlobalAddress",
    "gcp:compute/healthCheck:HealthCheck",
    "gcp:compute/firewall:Firewall",
    "gcp:compute/targetHttpProxy:TargetHttpProxy",
    "gcp:compute/globalForwardingRule:GlobalForwardingRule",
    SECURITY_POLICY,
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
        # lbMaxRatePerPod 1000, half per backend service: both reach the same pods
        # (tests/unit/settings/test_load_balancer.py)
        assert all(b["balancingMode"] == "RATE" and b["maxRatePerEndpoint"] == 500 for b in backend["backends"])
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
    rules = [r for r in prod_plan.of_type("gcp:compute/firewall:Firewall") if r.name.startswith("global-")]
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
            template = match.get("pathTemplateMatch")
            if match.get("fullPathMatch") == path or (
                template and re.fullmatch(re.sub(r"\{[^}]+=\*\}", "[^/]+", template), path)
            ):
                abort = rule.get("routeAction", {}).get("faultInjectionPolicy", {}).get("abort")
                if abort is not None:  # the first matching rule decides, and it answers itself
                    assert (abort["httpStatus"], abort["percentage"]) == (404, 100)
                    return None
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
    "/v2/models/stats",  # every model's statistics: /v2/models/{model=*} matched it (red team)
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


def test_inference_routes_resend_only_requests_no_pod_started(prod_plan):
    """A refused connection (a crashed or killed pod still in its NEG) is sent once more, elsewhere; nothing that
    reached Triton is (no 5xx, reset or gateway-error condition): "connect-failure", "refused-stream" are the
    conditions under which no byte of the request was processed (HttpRetryPolicy,
    https://cloud.google.com/compute/docs/reference/rest/v1/urlMaps). The local proof's kill -9 row depends on it."""
    (url_map,) = prod_plan.of_type(URL_MAP)
    (matcher,) = url_map.inputs["pathMatchers"]
    served = [rule for rule in matcher["routeRules"] if "faultInjectionPolicy" not in rule["routeAction"]]
    policies = [rule["routeAction"]["retryPolicy"] for rule in served]
    assert len(policies) == 2  # gRPC and HTTP inference (the 404 rule for /v2/models/stats reaches no pod)
    for policy in policies:
        assert sorted(policy["retryConditions"]) == ["connect-failure", "refused-stream"]
        assert policy["numRetries"] == 1


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
    # The clusters' own firewall rules (control plane to pods) are no part of the load balancer.
    assert {r.type for r in dev_plan.resources if not r.name.startswith("gke-")} & LB_TYPES == set()
    assert not [call for _, call in dev_plan.invokes if call.token == NEG_LOOKUP]


def test_backends_name_the_negs_by_url_and_wait_until_they_exist(prod_plan):
    """No NEG lookup (it ran at preview, before a new zone had its NEG: GoogleCloudPlatform/gke-autoneg-controller#50):
    each backend names its NEG by URL, and the backend services wait for every region's ZonalNegs.ready, which waits
    for that region's NEG Service; so destroy removes the backends before the NEG Services."""
    assert not [call for _, call in prod_plan.invokes if call.token == NEG_LOOKUP]
    neg_services = {
        r.name: r
        for r in prod_plan.of_type("kubernetes:core/v1:Service")
        if r.inputs["metadata"]["name"] == "triton-neg"
    }
    ready = {r.name: r for r in prod_plan.of_type("command:local:Command") if r.name.endswith("-ready")}
    zone_prefix = f"https://www.googleapis.com/compute/v1/projects/{stack_settings('prod')['gcp:project']}/zones/"
    for backend in prod_plan.of_type(BACKEND):
        for b in backend.inputs["backends"]:
            assert b["group"].startswith(zone_prefix)
        for region in PROD_ZONES:
            waits = ready[f"negs-{region}-ready"]
            assert waits.urn in backend.dependencies
            service = neg_services[f"triton-{region}-triton-neg-svc"]
            assert service.urn in waits.dependencies, "ready waits for the Service whose annotation makes the NEGs"
            annotation = json.loads(service.inputs["metadata"]["annotations"]["cloud.google.com/neg"])
            names = {p["name"] for p in annotation["exposed_ports"].values()}
            assert all(f"--name {name}" in waits.inputs["create"] for name in names)


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
    assert {
        ("command:local:Command", "negs-us-east4-cleanup"),
        ("command:local:Command", "negs-us-east4-ready"),
    } <= added


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


# ---- HTTPS only with a domain; Cloud Armor on every backend ---------------------------------------------------
def test_with_a_domain_port_80_only_redirects_to_https():
    """Port 80 gets its own URL map that answers every request with a redirect and has no backend at all
    (https://cloud.google.com/load-balancing/docs/https/setting-up-global-http-https-redirect)."""
    plan = evaluate("prod", domain="infer.example.com")
    maps = {m.name: m for m in plan.of_type(URL_MAP)}
    redirect = maps["global-https-redirect"].inputs
    assert redirect["defaultUrlRedirect"] == {
        "httpsRedirect": True,
        "redirectResponseCode": "MOVED_PERMANENTLY_DEFAULT",
        "stripQuery": False,
    }
    assert not {"defaultService", "pathMatchers", "hostRules"} & set(redirect), "port 80 must reach no backend"
    proxies = {p.type: p.inputs["urlMap"] for p in plan.resources if p.type.startswith("gcp:compute/targetHttp")}
    assert proxies[HTTP_PROXY] == "global-https-redirect-id"
    assert proxies["gcp:compute/targetHttpsProxy:TargetHttpsProxy"] == "global-routes-id"


def test_without_a_domain_port_80_serves_the_inference_routes(prod_plan):
    (proxy,) = prod_plan.of_type(HTTP_PROXY)
    assert proxy.inputs["urlMap"] == "global-routes-id"
    assert [m.name for m in prod_plan.of_type(URL_MAP)] == ["global-routes"]


def test_both_backends_carry_a_per_client_throttle(prod_plan):
    (policy,) = prod_plan.of_type(SECURITY_POLICY)
    assert policy.inputs["type"] == "CLOUD_ARMOR"
    for backend in prod_plan.of_type(BACKEND):
        assert backend.inputs["securityPolicy"] == "global-armor-id"
        assert policy.urn in backend.dependencies
    throttle, default = sorted(policy.inputs["rules"], key=lambda r: r["priority"])
    assert throttle["action"] == "throttle"
    assert throttle["match"] == {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}
    assert throttle["rateLimitOptions"] == {
        "conformAction": "allow",
        "exceedAction": "deny(429)",
        "enforceOnKey": "IP",
        "rateLimitThreshold": {"count": 3000, "intervalSec": 60},
    }
    assert (default["priority"], default["action"]) == (2147483647, "allow")


def test_the_rate_limit_setting_reaches_the_policy():
    plan = evaluate("staging", lbRateLimitPerMinute=120)
    (policy,) = plan.of_type(SECURITY_POLICY)
    assert {
        r["rateLimitOptions"]["rateLimitThreshold"]["count"]
        for r in policy.inputs["rules"]
        if r.get("rateLimitOptions")
    } == {120}


def armor_decision(rules: list[dict], client: ipaddress.IPv4Address) -> str:
    """What Cloud Armor does with a request from `client`: the action of the highest-priority (lowest number)
    rule whose source ranges match (https://cloud.google.com/armor/docs/create-security-policy-rules)."""
    for rule in sorted(rules, key=lambda r: r["priority"]):
        ranges = rule["match"]["config"]["srcIpRanges"]
        if "*" in ranges or any(client in ipaddress.ip_network(r) for r in ranges):
            return rule["action"]
    raise AssertionError("no rule matched: a policy needs its default rule")


def _policy_of(source_ranges: tuple[str, ...], rate: int = 3000) -> dict:
    def declare() -> None:
        stand_in = pulumi.ComponentResource("test:index:NegsReady", "negs-ready")
        GlobalLoadBalancer(
            "global",
            GlobalLoadBalancerArgs(
                project="demo-project",
                stack="test",
                network="vpc",
                regions=(
                    RegionBackend(
                        "us-central1",
                        ("us-central1-a",),
                        {"http": "neg-http", "grpc": "neg-grpc"},
                        stand_in,
                        "nodes@demo-project.iam.gserviceaccount.com",
                    ),
                ),
                max_rate_per_pod={"http": 50, "grpc": 50},
                rate_limit_per_minute=rate,
                source_ranges=source_ranges,
            ),
        )

    (policy,) = evaluate_component(declare, "staging").of_type(SECURITY_POLICY)
    return policy.inputs


ipv4_networks = st.builds(
    lambda address, prefix: ipaddress.ip_network(f"{address}/{prefix}", strict=False),
    st.ip_addresses(v=4),
    st.integers(min_value=1, max_value=32),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    allowlist=st.lists(ipv4_networks, max_size=25, unique=True),
    clients=st.lists(st.ip_addresses(v=4), min_size=1, max_size=10),
)
def test_an_allowlist_admits_exactly_its_ranges_throttled_and_refuses_everyone_else(allowlist, clients):
    """Any allowlist (more ranges than one rule takes included): a client inside a listed range is throttled,
    anyone else gets 403; without an allowlist every client is throttled."""
    ranges = tuple(str(n) for n in allowlist)
    rules = _policy_of(ranges)["rules"]
    priorities = [r["priority"] for r in rules]
    assert len(set(priorities)) == len(priorities), "Cloud Armor rule priorities must be unique"
    assert all(len(r["match"]["config"]["srcIpRanges"]) <= 10 for r in rules), "at most 10 ranges per rule"
    for client in clients + [n.network_address for n in allowlist]:
        listed = not allowlist or any(client in n for n in allowlist)
        assert armor_decision(rules, client) == ("throttle" if listed else "deny(403)"), client


def _refusal(**overrides) -> str:
    config = {f"{PROJECT}:{k}": json.dumps(v) for k, v in overrides.items()}
    with pytest.raises(ConfigError) as refused:
        load_settings("staging", config)
    message = str(refused.value)
    assert "\n" not in message
    return message


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text.strip())
    except ValueError:
        return False
    return True


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=30).filter(lambda t: not _is_cidr(t)))
def test_an_allowlist_entry_that_is_not_a_cidr_is_refused_naming_it(entry):
    message = _refusal(lbSourceRanges=["203.0.113.0/24", entry])
    assert message.startswith(f"{PROJECT}:lbSourceRanges: ")
    assert repr(entry.strip()) in message
    # Control characters are refused for every string setting before the CIDR check.
    assert "CIDR" in message or "control characters" in message


@settings(max_examples=30, deadline=None)
@given(st.integers().filter(lambda n: not 1 <= n <= MAX_RATE_LIMIT))
def test_a_rate_limit_outside_cloud_armors_range_is_refused(rate):
    message = _refusal(lbRateLimitPerMinute=rate)
    assert message.startswith(f"{PROJECT}:lbRateLimitPerMinute: {rate} is not valid")


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_RATE_LIMIT), st.lists(ipv4_networks, max_size=12, unique=True))
def test_valid_rate_limits_and_allowlists_are_read_as_given(rate, allowlist):
    config = {
        f"{PROJECT}:lbRateLimitPerMinute": str(rate),
        f"{PROJECT}:lbSourceRanges": json.dumps([str(n) for n in allowlist]),
    }
    lb = load_settings("staging", config).load_balancer
    assert (lb.rate_limit_per_minute, lb.source_ranges) == (rate, tuple(str(n) for n in allowlist))


@pytest.mark.parametrize(
    "ranges,stack,hint",
    [
        (["0.0.0.0/0"], "staging", "leave the list empty"),
        (["10.0.0.0/8", "10.0.0.0/8"], "staging", "listed once"),
        (["203.0.113.0/24"], "dev", "globalLoadBalancer: true"),
    ],
)
def test_pointless_or_orphan_allowlists_are_refused(ranges, stack, hint):
    with pytest.raises(ConfigError) as refused:
        load_settings(stack, {f"{PROJECT}:lbSourceRanges": json.dumps(ranges)})
    assert str(refused.value).startswith(f"{PROJECT}:lbSourceRanges: ") and hint in str(refused.value)


# Pulumi stack names: letters, digits, hyphens, underscores and periods
# (https://www.pulumi.com/docs/iac/concepts/stacks/).
STACK_NAMES = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=1, max_size=100
)


# DNS names as the config accepts them (settings.load_balancer.DOMAIN), built label by label: filtering random text
# is too slow.
DNS_NAMES = st.builds(
    lambda labels, tld: ".".join([*labels, tld]),
    st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True), min_size=1, max_size=3),
    st.from_regex(r"[a-z]{2,8}", fullmatch=True),
)


DOMAIN_LISTS = st.lists(DNS_NAMES, min_size=1, max_size=3, unique=True)


# Compute Engine resource names (sslCertificates included): RFC 1035, 1-63 characters
# (https://docs.rs/google-compute1/1.0.12+20190618/google_compute1/struct.SslCertificate.html).
COMPUTE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


@settings(max_examples=50, deadline=None)
@given(stack=STACK_NAMES, first=DOMAIN_LISTS, second=DOMAIN_LISTS)
def test_certificate_names_are_valid_and_change_with_any_change_of_domains(stack, first, second):
    """Any change of the domain list replaces the managed certificate, so it must also change its name (create-first
    under the old name fails with 409 alreadyExists, hashicorp/terraform-provider-google#15966); the same list keeps it,
    so an unchanged stack plans no replacement."""
    assert all(DOMAIN.fullmatch(d) for d in first + second)
    name = certificate_name(stack, first)
    assert COMPUTE_NAME.fullmatch(name), name
    assert certificate_name(stack, list(first)) == name
    assert (certificate_name(stack, second) == name) == (second == first)
