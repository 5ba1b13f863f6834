"""Source ranges are judged by the public addresses their union lets in, in the stack config and the pack alike.

The oracle here counts differently from policy/address_space.py: plain integer intervals, merged by sorting,
with the IPv4 addresses embedded in IPv6 ranges recovered by bit arithmetic on the interval ends, and the
non-public blocks subtracted interval by interval. The module collapses networks and sums CIDR overlaps.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Network, IPv6Network

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT
from triton_gke.policy import policies
from triton_gke.policy.address_space import (
    COMPATIBLE,
    MAPPED,
    MAX_PUBLIC_IPV4,
    MAX_PUBLIC_IPV6,
    NAT64,
    NAT64_LOCAL,
    NON_PUBLIC_IPV4,
    NON_PUBLIC_IPV6,
    SIX_TO_FOUR,
    TEREDO,
    TRANSLATED,
    coverage,
    internet_problem,
    parse,
)
from triton_gke.policy.policies import source_range_problem
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader
from triton_gke.settings.schema import config_schema
from triton_gke.settings.source_ranges import cidr_ranges

V4_ALL = (1 << 32) - 1
Interval = tuple[int, int]
EMBEDDING_BLOCKS = (MAPPED, COMPATIBLE, TRANSLATED, NAT64, NAT64_LOCAL, SIX_TO_FOUR, TEREDO)


# ---------------------------------------------------------------- the oracle: integer intervals


def interval(network: IPv4Network | IPv6Network) -> Interval:
    return int(network.network_address), int(network.broadcast_address)


def merge(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def subtract(intervals: list[Interval], holes: list[Interval]) -> list[Interval]:
    left = list(intervals)
    for hole_low, hole_high in holes:
        kept: list[Interval] = []
        for low, high in left:
            if high < hole_low or low > hole_high:
                kept.append((low, high))
                continue
            if low < hole_low:
                kept.append((low, hole_low - 1))
            if high > hole_high:
                kept.append((hole_high + 1, high))
        left = kept
    return left


def size(intervals: list[Interval]) -> int:
    return sum(high - low + 1 for low, high in intervals)


def clip(span: Interval, block: IPv6Network) -> Interval | None:
    low, high = max(span[0], int(block.network_address)), min(span[1], int(block.broadcast_address))
    return (low, high) if low <= high else None


def embedded(span: Interval) -> list[Interval]:
    """The IPv4 addresses an IPv6 interval stands for, by where each embedding keeps them."""
    found: list[Interval] = []
    for block in (MAPPED, COMPATIBLE, TRANSLATED, NAT64):  # the last 32 bits, unchanged
        part = clip(span, block)
        if part:
            found.append((part[0] & V4_ALL, part[1] & V4_ALL))
    part = clip(span, NAT64_LOCAL)  # RFC 8215: any /96 inside may be a translation prefix, so it frees all IPv4
    if part:
        first_whole_96 = -(-part[0] >> 32) << 32  # the first /96 boundary at or after the start
        if first_whole_96 + V4_ALL <= part[1]:
            found.append((0, V4_ALL))
        elif part[0] >> 32 == part[1] >> 32:
            found.append((part[0] & V4_ALL, part[1] & V4_ALL))
        else:  # the tails of two neighbouring /96s
            found += [(part[0] & V4_ALL, V4_ALL), (0, part[1] & V4_ALL)]
    part = clip(span, SIX_TO_FOUR)  # bits 16..47 of 2002::/16
    if part:
        found.append(((part[0] >> 80) & V4_ALL, (part[1] >> 80) & V4_ALL))
    part = clip(span, TEREDO)  # the last 32 bits, inverted; a span over 2^32 addresses frees them all
    if part:
        if part[1] - part[0] >= V4_ALL:
            found.append((0, V4_ALL))
        else:
            found.append((V4_ALL - (part[1] & V4_ALL), V4_ALL - (part[0] & V4_ALL)))
    return found


def ipv4_union(networks: list[IPv4Network | IPv6Network]) -> list[Interval]:
    """Every IPv4 address the ranges let in, written or embedded, as merged intervals."""
    spans6 = merge([interval(n) for n in networks if n.version == 6])
    return merge([interval(n) for n in networks if n.version == 4] + [e for s in spans6 for e in embedded(s)])


def oracle(networks: list[IPv4Network | IPv6Network]) -> tuple[int, int]:
    """(public IPv4, public IPv6) addresses the union lets in."""
    spans6 = merge([interval(n) for n in networks if n.version == 6])
    spans4 = ipv4_union(networks)
    holes4 = merge([interval(b) for b in NON_PUBLIC_IPV4])
    holes6 = merge([interval(b) for b in (*NON_PUBLIC_IPV6, *EMBEDDING_BLOCKS)])
    return size(subtract(spans4, holes4)), size(subtract(spans6, holes6))


def refused_by_oracle(networks: list[IPv4Network | IPv6Network]) -> bool:
    public4, public6 = oracle(networks)
    return public4 > MAX_PUBLIC_IPV4 or public6 > MAX_PUBLIC_IPV6


# ---------------------------------------------------------------- generated source ranges


def v4(prefix: st.SearchStrategy[int]) -> st.SearchStrategy[IPv4Network]:
    return st.builds(lambda a, p: IPv4Network((a, p), strict=False), st.integers(0, V4_ALL), prefix)


def inside(block: IPv6Network) -> st.SearchStrategy[IPv6Network]:
    """Networks inside (or around) an embedding block, the shapes an evasion would take."""
    return st.builds(
        lambda offset, p: IPv6Network((int(block.network_address) + offset, p), strict=False),
        st.integers(0, block.num_addresses - 1),
        st.integers(max(block.prefixlen - 4, 0), 128),
    )


V6 = st.one_of(
    st.builds(lambda a, p: IPv6Network((a, p), strict=False), st.integers(0, (1 << 128) - 1), st.integers(0, 128)),
    *(inside(block) for block in EMBEDDING_BLOCKS),
    st.builds(lambda p: IPv6Network((0x2600 << 112, p)), st.integers(28, 36)),  # around the /32 budget
)
SPLIT_INTERNET = st.builds(
    lambda k, drop: [n for i, n in enumerate(IPv4Network("0.0.0.0/0").subnets(new_prefix=k)) if i % 97 != drop],
    st.integers(1, 8),
    st.integers(0, 96),
)
MANY_SMALL = st.lists(v4(st.integers(16, 24)), min_size=20, max_size=300)
AROUND_A_SLASH_8 = st.lists(v4(st.integers(7, 12)), min_size=1, max_size=6)
PRIVATE = st.lists(st.sampled_from([*NON_PUBLIC_IPV4, *NON_PUBLIC_IPV6]), max_size=8)
RANGES = st.one_of(
    st.lists(st.one_of(v4(st.integers(0, 32)), V6), max_size=8),
    SPLIT_INTERNET,
    MANY_SMALL,
    AROUND_A_SLASH_8,
    st.builds(lambda a, b: a + b, PRIVATE, AROUND_A_SLASH_8),
)


@settings(max_examples=60, deadline=None)
@given(RANGES)
def test_the_union_is_judged_by_its_public_address_count(networks) -> None:
    covered = coverage(networks)
    assert merge([interval(n) for n in covered.ipv4]) == ipv4_union(networks)
    assert (covered.public_ipv4, covered.public_ipv6) == oracle(networks)
    assert (internet_problem(networks) is not None) == refused_by_oracle(networks)


def config_check(ranges: list[str]) -> str | None:
    """The stack config's webUiSourceRanges check on these ranges: its error, or None."""
    project, keys = config_schema()
    # The config mapping as the engine passes it: the JSON text of the stack file's value.
    reader = Reader(project, keys, {f"{project}:webUiSourceRanges": json.dumps(ranges)})
    try:
        cidr_ranges(reader, "webUiSourceRanges")
    except ConfigError as error:
        return str(error)
    return None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(*(inside(block) for block in EMBEDDING_BLOCKS)), max_size=6))
def test_ipv4_embedded_in_ipv6_counts_as_the_ipv4_it_holds(networks) -> None:
    assert merge([interval(n) for n in coverage(networks).ipv4]) == ipv4_union(networks)
    assert (internet_problem(networks) is not None) == refused_by_oracle(networks)


@settings(max_examples=40, deadline=None)
@given(RANGES)
def test_the_config_and_the_policy_pack_decide_alike(networks) -> None:
    ranges = [str(n) for n in networks]
    refused = refused_by_oracle(networks)
    config_error = config_check(ranges)
    policy_problem = source_range_problem(ranges) if ranges else None  # the pack also refuses an empty list
    assert (config_error is not None) == refused == (policy_problem is not None)
    if config_error:
        assert config_error.startswith(f"{PROJECT}:webUiSourceRanges: ") and "\n" not in config_error
        assert "their union" in config_error and "public IPv" in config_error


# ---------------------------------------------------------------- the tester's findings, and what stays allowed

EVERY_SLASH_8 = [f"{i}.0.0.0/8" for i in range(256)]


@pytest.mark.parametrize(
    "ranges",
    [
        ["0.0.0.0/0"],
        ["0.0.0.0/1", "128.0.0.0/1"],
        EVERY_SLASH_8,
        ["::ffff:0.0.0.0/96"],
        ["::/96"],  # IPv4-compatible
        ["64:ff9b::/96"],  # NAT64
        ["::ffff:0:0:0/96"],  # IPv4-translated (SIIT, RFC 2765)
        ["64:ff9b:1::/48"],  # local-use NAT64 (RFC 8215)
        ["64:ff9b:1:abcd::/96"],  # one /96 inside it: a translation prefix an operator may use
        ["::ffff:0:b00:0/104", "::ffff:0:c00:0/104"],  # 11/8 + 12/8 through IPv4-translated addresses
        ["2002::/16"],  # 6to4
        ["2001::/32"],  # Teredo: every client
        ["::/0"],
        ["2000::/3"],
        ["11.0.0.0/8", "12.0.0.0/24"],  # a /8 and a bit more
        ["2600::/32", "2a00::/32"],  # two IPv6 /32s
    ],
    ids=lambda r: f"{r[0]}+{len(r) - 1}",
)
def test_internet_in_any_shape_is_refused_by_config_and_pack(ranges: list[str]) -> None:
    error = config_check(ranges)
    assert error and error.startswith(f"{PROJECT}:webUiSourceRanges: '{ranges[0]}'"), error
    assert source_range_problem(ranges)


@pytest.mark.parametrize(
    "ranges",
    [
        ["203.0.113.0/24"],
        ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"],  # a VPN's private ranges
        ["11.0.0.0/8"],  # exactly the budget
        ["11.0.0.0/9", "12.0.0.0/9"],
        ["2600::/32", "fd00::/8"],
        ["::ffff:198.51.100.0/120", "2002:cb00:7100::/40"],  # embedded, but documentation ranges
        ["::ffff:0:cb00:7100/120", "64:ff9b:1::c633:6400/120"],  # translated / local NAT64, documentation
    ],
)
def test_a_teams_own_ranges_pass_both(ranges: list[str]) -> None:
    assert config_check(ranges) is None
    assert source_range_problem(ranges) is None


def test_a_long_union_is_named_in_one_short_line() -> None:
    error = config_check(EVERY_SLASH_8)
    assert error and "and 250 more is not valid" in error and "their union '0.0.0.0/0'" in error
    assert len(error) < 400


def test_bad_cidrs_are_named() -> None:
    assert "'10.0.0.1/8' is not valid; expected a CIDR" in (config_check(["10.0.0.1/8"]) or "")
    assert "not CIDRs: nonsense" in (source_range_problem(["203.0.113.0/24", "nonsense"]) or "")
    with pytest.raises(ValueError):
        parse("10.0.0.0/33")


# ---------------------------------------------------------------- firewall rules: the same judge (issue 20, class 5)


def firewall_problem(ranges: list[str]) -> str | None:
    """The firewall-no-internet-ingress policy on an ingress allow rule with these sourceRanges."""
    from types import SimpleNamespace

    from triton_gke.policy.policies import FIREWALL, POLICIES

    policy = next(p for p in POLICIES if p.name == "firewall-no-internet-ingress")
    props = {"direction": "INGRESS", "allows": [{"protocol": "tcp", "ports": ["8000"]}], "sourceRanges": ranges}
    found: list[str] = []
    # What the validate function reads of ResourceValidationArgs (tests/unit/policy/test_policies.py hands over the full
    # args).
    args = SimpleNamespace(resource_type=FIREWALL, props=props)
    policy.validate(args, lambda message, urn=None: found.append(message))
    assert len(found) <= 1 and all("\n" not in m for m in found)
    return found[0] if found else None


@pytest.mark.parametrize(
    "ranges",
    [["0.0.0.0/1", "128.0.0.0/1"], EVERY_SLASH_8, ["::ffff:0.0.0.0/96"], ["2002::/16"], ["11.0.0.0/8", "12.0.0.0/24"]],
    ids=["two-halves", "256-slash-8", "mapped", "6to4", "a-slash-8-and-a-bit"],
)
def test_a_firewall_open_to_the_internet_in_pieces_is_refused(ranges: list[str]) -> None:
    """Failed before issue 20: the firewall policy judged each range alone (only a /0 counted)."""
    assert config_check(ranges)  # the settings layer refused these already
    found = firewall_problem(ranges)
    assert found and found.startswith(f"firewall rule allows ingress from '{ranges[0]}'") and "their union" in found


def split_internet(pieces: list[int], mapped: list[bool]) -> list[str]:
    """0.0.0.0/0 cut into subnets by the drawn prefix lengths, some written as IPv4-mapped IPv6."""
    ranges, start = [], 0
    for index in range(1 << 12):
        if start > V4_ALL:
            break
        prefix = max(pieces[index % len(pieces)], 33 - (start & -start or 1 << 32).bit_length())
        network = IPv4Network((start, prefix))
        written = f"::ffff:{network.network_address}/{96 + prefix}" if mapped[index % len(mapped)] else str(network)
        ranges.append(written)
        start += network.num_addresses
    return ranges


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=5), st.lists(st.booleans(), min_size=1, max_size=5))
def test_the_internet_split_at_random_is_refused_by_config_and_both_policies(pieces, mapped) -> None:
    ranges = split_internet(pieces, mapped)
    networks = [parse(r) for r in ranges]
    assert ipv4_union(networks) == [(0, V4_ALL)]  # the pieces are the whole IPv4 internet
    assert config_check(ranges) and source_range_problem(ranges) and firewall_problem(ranges)


@settings(max_examples=60, deadline=None)
@given(RANGES)
def test_the_firewall_policy_decides_as_the_config_and_the_web_ui_policy(networks) -> None:
    ranges = [str(n) for n in networks]
    refused = refused_by_oracle(networks)
    assert (config_check(ranges) is not None) == refused
    if ranges:  # an empty list is the web UI's own refusal, and a firewall's implied 0.0.0.0/0
        assert (source_range_problem(ranges) is not None) == refused == (firewall_problem(ranges) is not None)


def test_the_settings_layer_and_the_pack_share_one_judge() -> None:
    import triton_gke.policy.address_space as judge
    import triton_gke.policy.policies as pack
    import triton_gke.settings.source_ranges as config

    assert config.address_space is judge and pack.internet_problem is judge.internet_problem


@pytest.mark.parametrize("text", ["0/0", "00.0.0.0/0", "000.000.000.000/0", "::ffff:00.0.0.0/96", "０.0.0.0/0"])
def test_the_firewall_policy_fails_closed_on_a_range_it_cannot_read(text: str) -> None:
    """Red-team finding: ranges Python's ipaddress cannot parse were skipped, so a rule of only such entries passed;
    the stack config refuses them, and the policy cannot know how GCP reads them."""
    assert policies.firewall_source_problem([text]) is not None
    assert policies.firewall_source_problem(["10.0.0.0/8"]) is None
