"""How many public addresses a list of source ranges lets in: the one rule for "not open to the internet".

The stack config (settings/source_ranges.py, webUiSourceRanges) and the policy pack (web-ui-not-public) judge source
ranges with the same function, so a list the config refuses is a list the pack refuses. It lives in the pack's
folder because the pack runs in its own virtualenv with only this folder on its path (and `pulumi policy publish`
uploads only this folder); the program imports it as `policy.address_space`. Standard library only.

The rule judges the UNION of the ranges by the public addresses it covers, never one range at a time: 256 x /8,
the two halves 0.0.0.0/1 + 128.0.0.0/1 and 0.0.0.0/0 are the same internet.
- Non-public blocks do not count: the IANA special-purpose registries' blocks that are not globally reachable
  (RFC 1918 private use, shared CGN space, loopback, link-local, documentation, benchmarking, reserved, ULA...).
  https://www.iana.org/assignments/iana-ipv4-special-registry/ and
  https://www.iana.org/assignments/iana-ipv6-special-registry/ (RFC 6890). So 10.0.0.0/8 + 172.16.0.0/12 +
  192.168.0.0/16 (a VPN's private ranges) are always fine.
- IPv6 ranges that embed IPv4 addresses count as those IPv4 addresses: IPv4-mapped ::ffff:0:0/96 and the
  deprecated IPv4-compatible ::/96 (RFC 4291 2.5.5), IPv4-translated ::ffff:0:0:0/96 (SIIT, RFC 2765 2.1:
  ::ffff:0:a.b.c.d), the NAT64 well-known prefix 64:ff9b::/96 (RFC 6052) and its local-use block
  64:ff9b:1::/48 (RFC 8215), 6to4 2002::/16 (RFC 3056: 2002:V4ADDR::/48) and Teredo 2001::/32 (RFC 4380: the
  client's IPv4 address, inverted, in the last 32 bits). In 64:ff9b:1::/48 the operator picks the translation
  prefix length (RFC 6052 2.2: /48, /56, /64 or /96 inside it), so a range there that holds a whole /96 can
  stand for every IPv4 address; a longer one is read as a /96 prefix would hold it (IPv4 in the last 32
  bits). Kubernetes itself calls mapped addresses a way to smuggle IPs past validation checks (KEP-4858,
  https://github.com/kubernetes/enhancements/pull/4899), and whether a given dataplane matches an IPv4 client
  against them varies: counting them as IPv4 is the safe reading.
- The budget is a /8 worth of public IPv4 addresses (16,777,216) and a /32 worth of public IPv6 (2^96), in
  total: the line the per-range check drew before (nothing wider than /8, IPv6 /32), now drawn on the union.
  An office or VPN is a few /24s or /16s; beyond a /8 the list describes a large share of the internet,
  not a team.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, collapse_addresses, ip_network

Network = IPv4Network | IPv6Network

MAX_PUBLIC_IPV4 = 2**24  # a /8 worth
MAX_PUBLIC_IPV6 = 2**96  # a /32 worth
WIDEST = {4: "/8", 6: "/32"}
SHOWN_NETWORKS = 6  # a one-line error names this many networks of a union, then counts the rest
IPV4_BITS = 0xFFFFFFFF

# IANA IPv4 special-purpose registry, "Globally Reachable: False" (pairwise disjoint; the overlap sums rely on it).
NON_PUBLIC_IPV4: tuple[IPv4Network, ...] = tuple(
    IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # shared address space (carrier-grade NAT), RFC 6598
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1, RFC 5737
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking, RFC 2544
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast: never a source address
        "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
    )
)
# IANA IPv6 special-purpose registry, not globally reachable (pairwise disjoint, and disjoint from EMBEDDED_IPV4).
NON_PUBLIC_IPV6: tuple[IPv6Network, ...] = tuple(
    IPv6Network(n)
    for n in (
        "100::/64",  # discard-only, RFC 6666
        "2001:db8::/32",  # documentation, RFC 3849
        "fc00::/7",  # unique local, RFC 4193
        "fe80::/10",  # link-local
        "ff00::/8",  # multicast: never a source address
    )
)
MAPPED = IPv6Network("::ffff:0:0/96")
COMPATIBLE = IPv6Network("::/96")  # also holds :: and ::1, which land in 0.0.0.0/8 (not public)
TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # SIIT IPv4-translated, RFC 2765 2.1
NAT64 = IPv6Network("64:ff9b::/96")
NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")  # local-use IPv4/IPv6 translation, RFC 8215
SIX_TO_FOUR = IPv6Network("2002::/16")
TEREDO = IPv6Network("2001::/32")
EMBEDDED_IPV4 = (MAPPED, COMPATIBLE, TRANSLATED, NAT64, NAT64_LOCAL, SIX_TO_FOUR, TEREDO)
EVERY_IPV4 = IPv4Network("0.0.0.0/0")


def parse(text: str, *, strict: bool = True) -> Network:
    """One CIDR; ValueError when it is not one (strict: also when host bits are set, as in 10.0.0.1/8)."""
    return ip_network(str(text).strip(), strict=strict)


def _overlap(a: Network, b: Network) -> int:
    """Addresses two CIDR blocks share: CIDR blocks are nested or disjoint, so it is the smaller or nothing."""
    if a.version != b.version or not a.overlaps(b):
        return 0
    return min(a.num_addresses, b.num_addresses)


def _suffix(network: IPv6Network, block: IPv6Network) -> IPv4Network:
    """The IPv4 network held in the last 32 bits of `network`, a subnet of a /96 embedding block."""
    return IPv4Network((int(network.network_address) - int(block.network_address), network.prefixlen - 96))


def _six_to_four(network: IPv6Network) -> IPv4Network:
    """2002:V4ADDR::/48: the IPv4 address is bits 16..47; longer prefixes are one 6to4 site, one IPv4 host."""
    return IPv4Network(((int(network.network_address) >> 80) & IPV4_BITS, min(network.prefixlen - 16, 32)))


def _teredo(network: IPv6Network) -> IPv4Network:
    """Teredo clients: the last 32 bits are the client's IPv4 address with every bit inverted."""
    if network.prefixlen <= 96:
        return EVERY_IPV4  # the client part is free: any IPv4 client
    length = network.prefixlen - 96
    mask = (IPV4_BITS << (32 - length)) & IPV4_BITS
    return IPv4Network((~int(network.network_address) & mask, length))


def _nat64_local(network: IPv6Network) -> IPv4Network:
    """A range inside 64:ff9b:1::/48: every IPv4 address if it holds a whole /96 (some prefix length the operator
    may use puts all of IPv4 inside it), else the last 32 bits as under a /96 prefix."""
    if network.prefixlen <= 96:
        return EVERY_IPV4
    return IPv4Network((int(network.network_address) & IPV4_BITS, network.prefixlen - 96))


def embedded_ipv4(network: IPv6Network) -> list[IPv4Network]:
    """The IPv4 addresses an IPv6 range stands for, through every embedding it overlaps."""
    found: list[IPv4Network] = []
    for block in EMBEDDED_IPV4:
        if not network.overlaps(block):
            continue
        if block.subnet_of(network):
            found.append(EVERY_IPV4)  # the whole embedding, so every IPv4 address
        elif block is SIX_TO_FOUR:
            found.append(_six_to_four(network))
        elif block is TEREDO:
            found.append(_teredo(network))
        elif block is NAT64_LOCAL:
            found.append(_nat64_local(network))
        else:
            found.append(_suffix(network, block))
    return found


@dataclass(frozen=True)
class Coverage:
    """The union of some source ranges and the public addresses in it."""

    ipv4: tuple[IPv4Network, ...]  # collapsed, with the IPv4 addresses embedded in IPv6 ranges
    ipv6: tuple[IPv6Network, ...]  # collapsed, as written
    public_ipv4: int
    public_ipv6: int  # outside the embedding blocks (those count as IPv4)


def coverage(networks: Iterable[Network]) -> Coverage:
    networks = list(networks)
    ipv6 = tuple(collapse_addresses(n for n in networks if isinstance(n, IPv6Network)))
    ipv4 = tuple(
        collapse_addresses(
            [n for n in networks if isinstance(n, IPv4Network)] + [e for n in ipv6 for e in embedded_ipv4(n)]
        )
    )
    # Both unions are disjoint blocks and so are the excluded blocks: subtracting pairwise overlaps is exact.
    public_ipv4 = sum(n.num_addresses for n in ipv4) - sum(_overlap(n, b) for n in ipv4 for b in NON_PUBLIC_IPV4)
    excluded6 = NON_PUBLIC_IPV6 + EMBEDDED_IPV4
    public_ipv6 = sum(n.num_addresses for n in ipv6) - sum(_overlap(n, b) for n in ipv6 for b in excluded6)
    return Coverage(ipv4, ipv6, public_ipv4, public_ipv6)


def show_union(networks: Iterable[Network | str]) -> str:
    """Ranges for a one-line message: the first few quoted, then how many more."""
    networks = list(networks)
    shown = ", ".join(repr(str(n)) for n in networks[:SHOWN_NETWORKS])
    more = len(networks) - SHOWN_NETWORKS
    return f"{shown} and {more} more" if more > 0 else shown


def _count(number: int) -> str:
    return f"{number:,}" if number < 2**40 else f"about 2^{math.log2(number):.1f}"


def internet_problem(networks: Iterable[Network]) -> str | None:
    """Why these source ranges open a service to the internet, in one line; None when they stay in budget."""
    covered = coverage(networks)
    for version, union, public, limit in (
        (4, covered.ipv4, covered.public_ipv4, MAX_PUBLIC_IPV4),
        (6, covered.ipv6, covered.public_ipv6, MAX_PUBLIC_IPV6),
    ):
        if public > limit:
            embedded = " (IPv6 ranges that embed IPv4 counted as IPv4)" if version == 4 and covered.ipv6 else ""
            return (
                f"their union {show_union(union)}{embedded} lets in {_count(public)} public IPv{version} "
                f"addresses, wider than {WIDEST[version]} in total ({_count(limit)})"
            )
    return None
