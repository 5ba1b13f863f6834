"""One global external Application Load Balancer in front of every region's Triton pods.

Traffic reaches pods directly through the zonal NEGs that GKE creates from the `triton-neg`
Service annotation (container-native load balancing). Backends name each NEG by its URL, built from known values,
never by a lookup: a lookup runs at preview, before a newly added zone has nodes and so before GKE created its NEG
there (GoogleCloudPlatform/gke-autoneg-controller#50). The backend services wait instead for each region's
ZonalNegs.ready (infra/negs.py), which returns once the NEGs exist in every zone. Backends use RATE balancing with a
per-pod capacity: each client goes to the closest region that has healthy pods with spare
capacity, overflows to the next closest when a region is full, and skips a region whose pods
all fail the health check.

Only inference routes exist (KServe v2 HTTP inference, health and metadata; the gRPC inference
methods). Everything else, the repository, shared-memory, trace, logging and statistics APIs
included, is answered 404 by the load balancer itself and never reaches Triton.

A Cloud Armor policy on both backend services throttles each client IP and, optionally, admits only
an allowlist of sources, so a stranger cannot drive the HPA and node autoscaler to gpuMaxNodes. With a
domain, port 80 only redirects to HTTPS.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from triton_gke.contracts.triton import INFERENCE_PORTS, LIVE_PATH, READY_PATH, SERVER_METADATA_PATH
from triton_gke.infra.naming import gcp_name
from triton_gke.infra.negs import neg_url
from triton_gke.settings.lifecycle import DEFAULTS as LIFECYCLE_DEFAULTS
from triton_gke.settings.lifecycle import LifecycleSettings

# Google's health-check and global front-end ranges: the only sources the firewall opens.
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
SCHEME = "EXTERNAL_MANAGED"
# One backend service per inference port; the metrics port stays inside the cluster.
TRITON_PORTS = INFERENCE_PORTS
GRPC_SERVICE = "/inference.GRPCInferenceService"
GRPC_INFERENCE_METHODS = (
    "ServerLive",
    "ServerReady",
    "ModelReady",
    "ServerMetadata",
    "ModelMetadata",
    "ModelInfer",
    "ModelStreamInfer",
)
HTTP_FULL_PATHS = (SERVER_METADATA_PATH, LIVE_PATH, READY_PATH)
# Cloud Armor: a basic match condition takes at most 10 ranges
# (https://cloud.google.com/python/docs/reference/compute/latest/google.cloud.compute_v1.types.SecurityPolicyRuleMatcherConfig);
# the highest-priority matching rule decides (https://cloud.google.com/armor/docs/create-security-policy-rules)
# and every policy ends in its default rule at the lowest priority, 2147483647, matching '*'
# (https://cloud.google.com/armor/docs/manage-security-policies).
ARMOR_RANGES_PER_RULE = 10
ARMOR_DEFAULT_PRIORITY = 2147483647
ARMOR_THROTTLE_PRIORITY = 1000
RATE_LIMIT_INTERVAL_SEC = 60
# Compute Engine names: 1-63 characters, RFC 1035 ([a-z]([-a-z0-9]*[a-z0-9])?), per the sslCertificates name field
# (https://docs.rs/google-compute1/1.0.12+20190618/google_compute1/struct.SslCertificate.html).
GCP_NAME_MAX = 63
CERT_DIGEST_LEN = 8
# Paths the templates below would send to Triton that are not inference: /v2/models/{model=*} also matches Triton's
# statistics of every model, GET /v2/models/stats (HandleModelStats in server src/http_server.cc; red team: it
# answered 200 through the load balancer, and the statistics API group is not restricted). Aborted with 404 by a rule
# ahead of every other: route rules are evaluated "in order of priority, from the lowest to highest number", 0 allowed
# (pulumi-gcp URLMapPathMatcherRouteRule.priority, from the Compute API). A model named `stats` is unreachable there.
HTTP_NOT_INFERENCE = ("/v2/models/stats",)
NOT_INFERENCE_PRIORITY = 0
HTTP_PATH_TEMPLATES = (
    "/v2/models/{model=*}",
    "/v2/models/{model=*}/ready",
    "/v2/models/{model=*}/infer",
    "/v2/models/{model=*}/versions/{version=*}",
    "/v2/models/{model=*}/versions/{version=*}/ready",
    "/v2/models/{model=*}/versions/{version=*}/infer",
)


@dataclass(frozen=True)
class RegionBackend:
    region: str
    zones: tuple[str, ...]
    neg_names: dict[str, str]  # port name (http, grpc) -> NEG name GKE creates in every zone
    # ZonalNegs.ready: done once the NEGs exist in every zone; it waits for the NEG Service, so destroy removes the
    # backends before that Service (and before ZonalNegs.cleanup deletes what the NEG controller left).
    negs_ready: pulumi.Resource
    node_service_account: pulumi.Input[str]
    # The share of its capacity the balancer offers this region (BackendServiceBackendArgs capacity_scaler: "0 means
    # the group is completely drained", range [0.0, 1.0], pulumi-gcp 10.2): `triton-gke rollout` weighs a canary down.
    capacity_scaler: float = 1.0


@dataclass(frozen=True)
class GlobalLoadBalancerArgs:
    project: str
    stack: str
    network: pulumi.Input[str]
    regions: tuple[RegionBackend, ...]
    # Per port (http, grpc): the requests/s each backend service offers one pod. Both services reach the same pods
    # and each counts only its own requests, so the rates must add up to at most what a pod serves
    # (settings/load_balancer.py backend_rates derives them from lbMaxRatePerPod and lbHttpSharePercent).
    max_rate_per_pod: Mapping[str, float]
    domain: str = ""
    # Requests per minute one client IP may send to each backend service; then 429.
    rate_limit_per_minute: int = 3000
    # Only these sources reach the backends (others get 403); empty: any source.
    source_ranges: tuple[str, ...] = ()
    # The lifecycle contract (settings/lifecycle.py): the health check's interval, timeout, thresholds and path, and
    # the connection draining of both backend services, coherent with the Triton pods' preStop and exit timeout.
    lifecycle: LifecycleSettings = LIFECYCLE_DEFAULTS


class GlobalLoadBalancer(pulumi.ComponentResource):
    address: gcp.compute.GlobalAddress
    backend_services: dict[str, gcp.compute.BackendService]
    security_policy: gcp.compute.SecurityPolicy

    def __init__(self, name: str, args: GlobalLoadBalancerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:GlobalLoadBalancer", name, None, opts)
        self._name = name
        self._args = args
        child = pulumi.ResourceOptions(parent=self)
        self.address = gcp.compute.GlobalAddress(
            f"{name}-ip", name=self._physical("ip"), project=args.project, ip_version="IPV4", opts=child
        )
        self._firewall()
        health_check = self._health_check()
        self.security_policy = self._security_policy()
        self.backend_services = {
            port: self._backend_service(port, "HTTP" if port == "http" else "H2C", health_check)
            for port in TRITON_PORTS
        }
        url_map = self._url_map()
        self._front_ends(url_map)
        self.register_outputs({"address": self.address.address})

    def _physical(self, what: str) -> str:
        return gcp_name("triton", self._args.stack, what, max_len=63)

    def _firewall(self) -> None:
        a = self._args
        for region in a.regions:
            # One rule per region, opening only that region's GPU nodes (by service account), only to Google's ranges.
            gcp.compute.Firewall(
                f"{self._name}-allow-lb-{region.region}",
                name=self._physical(f"allow-lb-{region.region}"),
                project=a.project,
                network=a.network,
                direction="INGRESS",
                source_ranges=list(HEALTH_CHECK_RANGES),
                target_service_accounts=[region.node_service_account],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in TRITON_PORTS.values()])],
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _health_check(self) -> gcp.compute.HealthCheck:
        # Strict readiness (the contract's path, READY_PATH): a pod is healthy only when every model it serves has
        # loaded. Interval, timeout and thresholds bound how long a gone pod still gets requests
        # (LifecycleSettings.endpoint_removal_s, which the preStop wait covers).
        life = self._args.lifecycle
        return gcp.compute.HealthCheck(
            f"{self._name}-ready",
            name=self._physical("ready"),
            project=self._args.project,
            http_health_check=gcp.compute.HealthCheckHttpHealthCheckArgs(
                port=TRITON_PORTS["http"], port_specification="USE_FIXED_PORT", request_path=life.health_check_path
            ),
            check_interval_sec=life.health_check_interval_s,
            timeout_sec=life.health_check_timeout_s,
            healthy_threshold=life.healthy_threshold,
            unhealthy_threshold=life.unhealthy_threshold,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _backend_service(self, port: str, protocol: str, health_check: gcp.compute.HealthCheck):
        a = self._args
        return gcp.compute.BackendService(
            f"{self._name}-{port}",
            name=self._physical(port),
            project=a.project,
            protocol=protocol,
            load_balancing_scheme=SCHEME,
            locality_lb_policy="LEAST_REQUEST",
            health_checks=health_check.id,
            timeout_sec=60,
            # Requests a pod had when its endpoint left the NEG may finish for this long; the load balancer sends it
            # no new ones (https://cloud.google.com/load-balancing/docs/enabling-connection-draining).
            connection_draining_timeout_sec=a.lifecycle.drain_timeout_s,
            backends=[self._backend(region, zone, port) for region in a.regions for zone in region.zones],
            log_config=gcp.compute.BackendServiceLogConfigArgs(enable=True, sample_rate=0.1),
            security_policy=self.security_policy.id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[region.negs_ready for region in a.regions]),
        )

    def _security_policy(self) -> gcp.compute.SecurityPolicy:
        """Throttle each client IP (429 above the limit); with an allowlist, everyone else gets 403.

        Throttle rules key on the client IP and apply per backend service the policy is attached to
        (https://cloud.google.com/armor/docs/rate-limiting-overview), so HTTP and gRPC each allow the limit.
        """
        a = self._args
        ranges = list(a.source_ranges)
        chunks = [ranges[i : i + ARMOR_RANGES_PER_RULE] for i in range(0, len(ranges), ARMOR_RANGES_PER_RULE)]
        throttles = [
            gcp.compute.SecurityPolicyRuleArgs(
                priority=ARMOR_THROTTLE_PRIORITY + i,
                description="allowed sources, throttled per client IP" if ranges else "throttle per client IP",
                action="throttle",
                match=_source_match(chunk),
                rate_limit_options=gcp.compute.SecurityPolicyRuleRateLimitOptionsArgs(
                    conform_action="allow",
                    exceed_action="deny(429)",
                    enforce_on_key="IP",
                    rate_limit_threshold=gcp.compute.SecurityPolicyRuleRateLimitOptionsRateLimitThresholdArgs(
                        count=a.rate_limit_per_minute, interval_sec=RATE_LIMIT_INTERVAL_SEC
                    ),
                ),
            )
            for i, chunk in enumerate(chunks or [["*"]])
        ]
        default = gcp.compute.SecurityPolicyRuleArgs(
            priority=ARMOR_DEFAULT_PRIORITY,
            description="sources outside lbSourceRanges" if ranges else "default rule (never reached)",
            action="deny(403)" if ranges else "allow",
            match=_source_match(["*"]),
        )
        return gcp.compute.SecurityPolicy(
            f"{self._name}-armor",
            name=self._physical("armor"),
            project=a.project,
            type="CLOUD_ARMOR",
            description="Per-client rate limit and source allowlist of the Triton inference endpoint",
            rules=[*throttles, default],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _backend(self, region: RegionBackend, zone: str, port: str) -> gcp.compute.BackendServiceBackendArgs:
        # Each backend service counts only the requests it sends against its own maxRatePerEndpoint, and both reach
        # the same pods: each gets its own share (settings/load_balancer.py backend_rates, which cites
        # https://cloud.google.com/load-balancing/docs/backend-service), so no pod is offered more in total.
        return gcp.compute.BackendServiceBackendArgs(
            group=neg_url(self._args.project, zone, region.neg_names[port]),
            balancing_mode="RATE",
            max_rate_per_endpoint=self._args.max_rate_per_pod[port],
            capacity_scaler=region.capacity_scaler,
        )

    def _url_map(self) -> gcp.compute.URLMap:
        http, grpc = self.backend_services["http"], self.backend_services["grpc"]
        not_inference = gcp.compute.URLMapPathMatcherRouteRuleArgs(
            priority=NOT_INFERENCE_PRIORITY,
            service=http.id,
            route_action=gcp.compute.URLMapPathMatcherRouteRuleRouteActionArgs(
                fault_injection_policy=gcp.compute.URLMapPathMatcherRouteRuleRouteActionFaultInjectionPolicyArgs(
                    abort=gcp.compute.URLMapPathMatcherRouteRuleRouteActionFaultInjectionPolicyAbortArgs(
                        http_status=404, percentage=100
                    )
                )
            ),
            match_rules=[
                gcp.compute.URLMapPathMatcherRouteRuleMatchRuleArgs(full_path_match=p) for p in HTTP_NOT_INFERENCE
            ],
        )
        grpc_rule = gcp.compute.URLMapPathMatcherRouteRuleArgs(
            priority=1,
            service=grpc.id,
            route_action=_retry_unsent(),
            match_rules=[
                gcp.compute.URLMapPathMatcherRouteRuleMatchRuleArgs(full_path_match=f"{GRPC_SERVICE}/{method}")
                for method in GRPC_INFERENCE_METHODS
            ],
        )
        http_rule = gcp.compute.URLMapPathMatcherRouteRuleArgs(
            priority=2,
            service=http.id,
            route_action=_retry_unsent(),
            match_rules=[
                gcp.compute.URLMapPathMatcherRouteRuleMatchRuleArgs(full_path_match=p) for p in HTTP_FULL_PATHS
            ]
            + [gcp.compute.URLMapPathMatcherRouteRuleMatchRuleArgs(path_template_match=t) for t in HTTP_PATH_TEMPLATES],
        )
        not_found = gcp.compute.URLMapPathMatcherDefaultRouteActionArgs(
            weighted_backend_services=[
                gcp.compute.URLMapPathMatcherDefaultRouteActionWeightedBackendServiceArgs(
                    backend_service=http.id, weight=100
                )
            ],
            fault_injection_policy=gcp.compute.URLMapPathMatcherDefaultRouteActionFaultInjectionPolicyArgs(
                abort=gcp.compute.URLMapPathMatcherDefaultRouteActionFaultInjectionPolicyAbortArgs(
                    http_status=404, percentage=100
                )
            ),
        )
        return gcp.compute.URLMap(
            f"{self._name}-routes",
            name=self._physical("routes"),
            project=self._args.project,
            default_service=http.id,
            host_rules=[gcp.compute.URLMapHostRuleArgs(hosts=["*"], path_matcher="inference-only")],
            path_matchers=[
                gcp.compute.URLMapPathMatcherArgs(
                    name="inference-only",
                    route_rules=[not_inference, grpc_rule, http_rule],
                    # Anything else (admin APIs included) is aborted at the load balancer with 404.
                    default_route_action=not_found,
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _front_ends(self, url_map: gcp.compute.URLMap) -> None:
        a = self._args
        child = pulumi.ResourceOptions(parent=self)
        # With a domain, port 80 serves nothing but a redirect to HTTPS: its own URL map without backends
        # (https://cloud.google.com/load-balancing/docs/https/setting-up-global-http-https-redirect).
        http_map = self._https_redirect() if a.domain else url_map
        http_proxy = gcp.compute.TargetHttpProxy(
            f"{self._name}-http-proxy", name=self._physical("http"), project=a.project, url_map=http_map.id, opts=child
        )
        self._forwarding_rule("http", http_proxy.id, "80")
        if not a.domain:
            return
        certificate = gcp.compute.ManagedSslCertificate(
            f"{self._name}-cert",
            name=certificate_name(a.stack, [a.domain]),
            project=a.project,
            managed=gcp.compute.ManagedSslCertificateManagedArgs(domains=[a.domain]),
            opts=child,
        )
        https_proxy = gcp.compute.TargetHttpsProxy(
            f"{self._name}-https-proxy",
            name=self._physical("https"),
            project=a.project,
            url_map=url_map.id,
            ssl_certificates=[certificate.id],
            opts=child,
        )
        self._forwarding_rule("https", https_proxy.id, "443")

    def _https_redirect(self) -> gcp.compute.URLMap:
        return gcp.compute.URLMap(
            f"{self._name}-https-redirect",
            name=self._physical("https-redirect"),
            project=self._args.project,
            default_url_redirect=gcp.compute.URLMapDefaultUrlRedirectArgs(
                https_redirect=True, redirect_response_code="MOVED_PERMANENTLY_DEFAULT", strip_query=False
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _forwarding_rule(self, kind: str, target: pulumi.Input[str], port: str) -> None:
        gcp.compute.GlobalForwardingRule(
            f"{self._name}-{kind}-rule",
            name=self._physical(f"{kind}-rule"),
            project=self._args.project,
            target=target,
            ip_address=self.address.address,
            port_range=port,
            ip_protocol="TCP",
            load_balancing_scheme=SCHEME,
            opts=pulumi.ResourceOptions(parent=self),
        )


def certificate_name(stack: str, domains: Sequence[str]) -> str:
    """The managed certificate's name: per stack, and new whenever its domains change.

    A managed certificate cannot change its domains: a new domain replaces it. Under a fixed name, create-first fails
    (409 alreadyExists) and delete-first fails while the HTTPS proxy still uses it (resourceInUseByAnotherResource,
    hashicorp/terraform-provider-google#6147, #15966; terraform-google-modules/terraform-google-lb-http#207). With a
    digest of the domains in the name, Pulumi's default create-before-delete replacement creates the new certificate,
    points the proxy at it, then deletes the old one. Any change of the list (order included) changes the digest, since
    any such change replaces the certificate.
    """
    digest = hashlib.sha256("\n".join(domains).encode()).hexdigest()[:CERT_DIGEST_LEN]
    prefix = gcp_name("triton", stack, "cert", max_len=GCP_NAME_MAX - CERT_DIGEST_LEN - 1)
    return f"{prefix}-{digest}"


def _source_match(ranges: list[str]) -> gcp.compute.SecurityPolicyRuleMatchArgs:
    return gcp.compute.SecurityPolicyRuleMatchArgs(
        versioned_expr="SRC_IPS_V1", config=gcp.compute.SecurityPolicyRuleMatchConfigArgs(src_ip_ranges=ranges)
    )


# Requests the load balancer may send again: only those no pod has started on. A pod that crashed, or was killed
# before its endpoint left the NEG, refuses the connection; the request is then sent to another endpoint instead of
# failing (the local proof, docs/lifecycle.md: haproxy's `retry-on conn-failure` turns a kill -9's refused
# connections into answers, and only the requests in flight on the killed pod fail). "connect-failure: a retry is
# attempted on failures connecting to the instance or endpoint"; "refused-stream: ... the endpoint resets the stream
# with a REFUSED_STREAM error code. This reset type indicates that it is safe to retry" (HttpRetryPolicy,
# https://cloud.google.com/compute/docs/reference/rest/v1/urlMaps). No 5xx or reset condition: an inference that
# reached Triton is never run twice. An update in place: only the URL map's name and project force a replacement
# (terraform-provider-google-beta resource_compute_url_map.go; infra/data/replacement_rules.yaml).
RETRY_CONDITIONS = ("connect-failure", "refused-stream")


def _retry_unsent() -> gcp.compute.URLMapPathMatcherRouteRuleRouteActionArgs:
    return gcp.compute.URLMapPathMatcherRouteRuleRouteActionArgs(
        retry_policy=gcp.compute.URLMapPathMatcherRouteRuleRouteActionRetryPolicyArgs(
            retry_conditions=list(RETRY_CONDITIONS), num_retries=1
        )
    )
