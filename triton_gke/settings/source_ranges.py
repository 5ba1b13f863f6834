"""Source ranges (CIDR lists): the control plane's, the web UIs', the load balancer's allowlist."""

from __future__ import annotations

from triton_gke.policy import address_space
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader


def cidr_ranges(reader: Reader, key: str, public_allowed: bool = False) -> tuple[str, ...]:
    """CIDR ranges; unless public_allowed, their union lets in at most a /8 worth of public addresses.

    The same rule as the policy pack's web-ui-not-public (policy/address_space.py says why): judged on the
    union, so 256 x /8, 0.0.0.0/1 + 128.0.0.0/1 or ::ffff:0.0.0.0/96 are the internet too.
    """
    cidrs = reader.strings(key)
    networks = []
    for cidr in cidrs:
        try:
            networks.append(address_space.parse(cidr))
        except ValueError:
            raise reader.fail(key, cidr, "expected a CIDR such as 203.0.113.0/24") from None
    problem = None if public_allowed else address_space.internet_problem(networks)
    if problem:
        raise ConfigError(
            f"{reader.full(key)}: {address_space.show_union(cidrs)} is not valid; {problem}: "
            "a web UI is not opened to the internet; list your own ranges"
        )
    return cidrs


def source_ranges(reader: Reader, key: str) -> tuple[str, ...]:
    """An allowlist: valid CIDRs, each once, none the whole internet (that is what an empty list means)."""
    cidrs = cidr_ranges(reader, key, public_allowed=True)
    networks = [address_space.parse(cidr) for cidr in cidrs]
    for cidr, network in zip(cidrs, networks, strict=True):
        if network.prefixlen == 0:
            raise reader.fail(key, cidr, "allows every source; leave the list empty for that")
        if networks.count(network) > 1:
            raise reader.fail(key, cidr, "each range may be listed once")
    return cidrs
