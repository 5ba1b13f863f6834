"""The inference key over plain HTTP (red team 44, finding 3): a stack whose global load balancer serves inference that
needs the key, without a domain, is warned in one line at every plan, preview and `up`, and never refused
(settings/load_balancer.py plaintext_key_warning says why, with Google's pages)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT
from triton_gke.settings import from_stack_file
from triton_gke.settings.load_balancer import PLAINTEXT_KEY_SOURCE


def plaintext_warnings(stack: str, overrides: dict[str, str]) -> list[str]:
    warnings = from_stack_file(stack, {f"{PROJECT}:{k}": v for k, v in overrides.items()}).warnings
    return [w for w in warnings if w.startswith(f"{PROJECT}:domain: ")]


@settings(max_examples=20, deadline=None)
@given(
    stack=st.sampled_from(["dev", "staging", "prod"]),
    load_balancer=st.booleans(),
    auth=st.booleans(),
    domain=st.sampled_from(["", "infer.example.com", "a.b.example.org"]),
)
def test_warned_exactly_when_the_key_would_cross_the_internet_as_plain_http(
    stack: str, load_balancer: bool, auth: bool, domain: str
) -> None:
    overrides = {"globalLoadBalancer": str(load_balancer).lower(), "inferenceAuth": str(auth).lower()}
    if domain and load_balancer:  # a domain needs the load balancer (refused otherwise, before any warning)
        overrides["domain"] = domain
    found = plaintext_warnings(stack, overrides)
    plain_http = load_balancer and auth and not (domain and load_balancer)
    assert len(found) == (1 if plain_http else 0), found
    for line in found:
        assert "\n" not in line and "crosses the internet unencrypted" in line
        assert "set domain to it: HTTPS with a Google-managed certificate, port 80 then only redirects" in line
        assert PLAINTEXT_KEY_SOURCE in line and "docs/security.md" in line


def test_the_shipped_prod_and_staging_are_warned_and_dev_is_not() -> None:
    """The shipped prod and staging have the load balancer and no domain (a domain must be the user's, its DNS at the
    address the first `up` makes): their plans say the key goes as plain HTTP until one is set."""
    assert len(plaintext_warnings("prod", {})) == len(plaintext_warnings("staging", {})) == 1
    assert plaintext_warnings("dev", {}) == []
