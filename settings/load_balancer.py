"""The global load balancer: domain, Cloud Armor's rate limit and source allowlist, backend rate per pod."""

from __future__ import annotations

import re

from settings.reader import Reader
from settings.source_ranges import source_ranges
from settings.values import LoadBalancerSettings

DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
# Cloud Armor throttle thresholds: 1 to 1,000,000 requests per interval
# (https://cloud.google.com/armor/docs/rate-limiting-overview).
MAX_RATE_LIMIT = 1_000_000


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
        max_rate_per_pod=reader.integer("lbMaxRatePerPod", minimum=1),
        rate_limit_per_minute=rate_limit,
        source_ranges=sources,
    )
