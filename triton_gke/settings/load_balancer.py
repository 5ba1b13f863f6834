"""The global load balancer: domain, Cloud Armor's rate limit and source allowlist, backend rate per pod."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from triton_gke.settings.reader import Reader
from triton_gke.settings.source_ranges import source_ranges
from triton_gke.settings.values import LoadBalancerSettings

DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
# Cloud Armor throttle thresholds: 1 to 1,000,000 requests per interval
# (https://cloud.google.com/armor/docs/rate-limiting-overview).
MAX_RATE_LIMIT = 1_000_000
MAX_RATE_PER_POD = 1_000_000

# How lbMaxRatePerPod, a pod's capacity over both protocols, is split between the two backend services. Both send to
# the same pods (one NEG per port over the same endpoints, infra/global_lb.py), yet a backend's balancing mode and
# target capacity are set per backend service, on each of its backends ("The balancing mode is defined in the
# backend service for each backend", https://cloud.google.com/load-balancing/docs/backend-service; maxRatePerEndpoint
# is a field of one backend of one backend service and capacityScaler multiplies that backend's target,
# https://cloud.google.com/python/docs/reference/compute/latest/google.cloud.compute_v1.types.Backend), and no
# documented setting shares one rate across backend services. So each service fills a pod up to its own
# maxRatePerEndpoint counting only its own requests: the rate on both was twice the pod's capacity. The shares sum
# to 100 %, so no pod is offered more than its capacity over both. Equal by default: without knowing the client
# mix, an even split gives a one-protocol workload the most it can count on (min(share, 100 - share) is largest at
# 50); locustProtocol names the load test's protocol, not the clients'. Traffic past a protocol's share spills to
# the next closest region, as before a pod's whole rate did. lbHttpSharePercent sets the split for a known mix.
PROTOCOL_SHARE_PERCENT: Mapping[str, int] = {"http": 50, "grpc": 50}


def shares_of(http_share_percent: int) -> dict[str, int]:
    """lbHttpSharePercent as the two backend services' shares."""
    return {"http": http_share_percent, "grpc": 100 - http_share_percent}


PROTOCOL_NAMES = {"http": "HTTP", "grpc": "gRPC"}


def backend_rates(max_rate_per_pod: float, shares: Mapping[str, int] = PROTOCOL_SHARE_PERCENT) -> dict[str, float]:
    """Each backend service's maxRatePerEndpoint (port -> requests/s): its share of a pod's capacity, rounded down to
    a hundredth (the field is a float), so the rates over both services add up to at most `max_rate_per_pod`."""
    if sorted(shares) != sorted(PROTOCOL_SHARE_PERCENT) or sum(shares.values()) != 100:
        raise ValueError(f"shares: expected percents for {', '.join(PROTOCOL_SHARE_PERCENT)} summing to 100: {shares}")
    if not all(0 < share < 100 for share in shares.values()):
        raise ValueError(f"shares: each protocol needs a share between 0 and 100 %: {shares}")
    if not max_rate_per_pod >= 1:  # the least lbMaxRatePerPod: every share then gets at least 0.01 requests/s
        raise ValueError(f"max_rate_per_pod: expected >= 1, got {max_rate_per_pod}")
    # Whole hundredths of requests/s: floor(rate x share %) with rate x 100 read exactly from its decimal.
    cents = round(max_rate_per_pod * 100)
    cents = cents if cents <= max_rate_per_pod * 100 else cents - 1
    return {port: math.floor(cents * share / 100) / 100 for port, share in shares.items()}


def describe_split(max_rate_per_pod: float, shares: Mapping[str, int] = PROTOCOL_SHARE_PERCENT) -> str:
    """How the plan says it: the split of lbMaxRatePerPod over the two backend services."""
    rates = backend_rates(max_rate_per_pod, shares)
    parts = ", ".join(f"{PROTOCOL_NAMES[port]} {rate:g} ({shares[port]} %)" for port, rate in rates.items())
    return (
        f"lbMaxRatePerPod {max_rate_per_pod:g} req/s per pod, split over the HTTP and gRPC backend services on the "
        f"same pods (each counts only its own requests): {parts}; past its share a protocol spills to the next region."
    )


# Without a domain the global load balancer has only a target HTTP proxy on port 80 (infra/global_lb.py): requests, and
# the inference key header each carries, cross the internet as plain HTTP. TLS "is used to encrypt information while
# it is sent over a network", and an Application Load Balancer "that uses SSL requires at least one private key and SSL
# certificate" (https://cloud.google.com/load-balancing/docs/ssl-certificates); with `domain` the program makes a
# Google-managed one, a certificate "Google Cloud obtains and manages for your domains"
# (https://cloud.google.com/load-balancing/docs/ssl-certificates/google-managed-certs), and port 80 then only
# redirects to HTTPS. A warning, never an error: the certificate provisions only once the domain's DNS points at the
# load balancer ("The provisioning process can complete only when the domain name for which the certificate is
# created points to a target pool which, itself, points at the certificate",
# https://www.pulumi.com/docs/reference/pkg/gcp/compute/managedsslcertificate), and the address is made by
# the first `up`, so a new stack has no domain to give yet.
PLAINTEXT_KEY_SOURCE = "https://cloud.google.com/load-balancing/docs/ssl-certificates/google-managed-certs"


def plaintext_key_warning(reader: Reader, lb: LoadBalancerSettings, inference_auth: bool) -> str | None:
    """One line when the global load balancer serves inference that needs the key over plain HTTP (no domain)."""
    if not lb.enabled or not inference_auth or lb.domain:
        return None
    return (
        f"{reader.full('domain')}: not set, so the global load balancer serves plain HTTP on port 80 and every "
        "client's inference key (inferenceKeyHeader) crosses the internet unencrypted; point a DNS name's A record at "
        f"the lbAddress output and set domain to it: HTTPS with a Google-managed certificate, port 80 then only "
        f"redirects (docs/security.md, {PLAINTEXT_KEY_SOURCE})"
    )


def load_balancer(reader: Reader) -> LoadBalancerSettings:
    domain = reader.string("domain").lower().rstrip(".")
    if domain and not DOMAIN.fullmatch(domain):
        raise reader.fail("domain", domain, "expected a DNS name such as infer.example.com")
    enabled = reader.boolean("globalLoadBalancer")
    if domain and not enabled:
        raise reader.fail("domain", domain, "a domain needs globalLoadBalancer: true")
    sources = source_ranges(reader, "lbSourceRanges")
    if sources and not enabled:
        raise reader.fail("lbSourceRanges", list(sources), "a source allowlist needs globalLoadBalancer: true")
    rate_limit = reader.integer(
        "lbRateLimitPerMinute",
        minimum=1,
        maximum=MAX_RATE_LIMIT,
        too_large=f"Cloud Armor allows at most {MAX_RATE_LIMIT:,}",
    )
    return LoadBalancerSettings(
        enabled=enabled,
        domain=domain,
        # Bounded so the per-service split stays exact in a float (backend_rates); far above what any pod serves.
        max_rate_per_pod=reader.integer("lbMaxRatePerPod", minimum=1, maximum=MAX_RATE_PER_POD, why="requests/s"),
        http_share_percent=reader.integer(
            "lbHttpSharePercent", minimum=1, maximum=99, why="each protocol keeps a share of the pod"
        ),
        rate_limit_per_minute=rate_limit,
        source_ranges=sources,
    )
