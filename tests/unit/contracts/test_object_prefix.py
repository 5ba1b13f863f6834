"""Issue 44, bad input 4: the sync accepted a prefix with a leading space (gs://BUCKET/" models"), another GCS prefix
than "models" (GCS object names are any UTF-8, https://cloud.google.com/storage/docs/naming-objects). The prefix now
has one rule, contracts/naming.py object_prefix_problem, which the sync's destination and the component's
model_repository both ask; the stack's modelPrefix refuses spaces around it instead of stripping them.

The family is generated: every control character (C0, C1 with NEL), every Unicode space but ' ', U+2028, U+2029 and
format characters anywhere in a prefix, and a space at either end of any of its parts.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.contracts.naming import object_prefix_problem
from triton_gke.k8s import on_cluster_args
from triton_gke.model_repo.sync import SyncError, parse_gs_url
from triton_gke.settings import ConfigError, from_stack_file

PART = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="_-. "), min_size=1, max_size=10)
GOOD_PART = PART.map(str.strip).filter(lambda p: p not in ("", ".", ".."))
PREFIXES = st.lists(GOOD_PART, min_size=1, max_size=4).map("/".join)
UNPRINTABLE = st.one_of(
    st.sampled_from("\n\r\t\x0b\x0c\x1c\x1d\x1e\x85\xa0\u2028\u2029\u3000\u200b\ufeff"),
    st.characters(whitelist_categories=("Cc", "Cf", "Zs", "Zl", "Zp"), blacklist_characters=" "),
)
SPACES = st.text(st.sampled_from(" "), min_size=1, max_size=3)


@st.composite
def unprintable_inside(draw: st.DrawFn) -> str:
    prefix = draw(PREFIXES)
    at = draw(st.integers(0, len(prefix)))
    return prefix[:at] + draw(UNPRINTABLE) + prefix[at:]


@st.composite
def part_with_spaces_around(draw: st.DrawFn) -> str:
    parts = draw(st.lists(GOOD_PART, min_size=1, max_size=4))
    which = draw(st.integers(0, len(parts) - 1))
    before, after = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
    spaces = draw(SPACES)
    parts[which] = f"{spaces if before else ''}{parts[which]}{spaces if after else ''}"
    return "/".join(parts)


def sync_accepts(prefix: str) -> bool:
    try:
        parse_gs_url(f"gs://models-bucket/{prefix}")
    except SyncError as err:
        assert str(err).isprintable(), err  # one line, whatever the prefix holds
        return False
    return True


def component_accepts(prefix: str) -> bool:
    return on_cluster_args.repository_problem(f"gs://models-bucket/{prefix}") is None


@given(st.one_of(unprintable_inside(), part_with_spaces_around()))
def test_the_sync_and_the_component_refuse_the_family(prefix: str) -> None:
    assert object_prefix_problem(prefix) is not None, prefix
    assert not sync_accepts(prefix), prefix
    assert not component_accepts(prefix), prefix


@given(st.one_of(PREFIXES, st.text(max_size=12), unprintable_inside(), part_with_spaces_around()))
def test_the_sync_and_the_component_accept_the_same_prefixes(prefix: str) -> None:
    """Agreement: the one rule decides for both (prefixes without '/' at either end, which each side trims)."""
    prefix = prefix.strip("/")
    if not prefix:
        return  # the sync needs a prefix, the component takes a bare bucket: their own, documented, difference
    assert sync_accepts(prefix) == component_accepts(prefix) == (object_prefix_problem(prefix) is None), prefix


def test_a_leading_space_is_refused_by_the_sync_naming_the_prefix() -> None:
    with pytest.raises(SyncError, match=r"^invalid object prefix: ' models' \(no part may start or end with a space\)"):
        parse_gs_url("gs://models-bucket/ models")


@pytest.mark.parametrize("value", [" models", "models ", "\tmodels", "models\u3000", "models\u2028", "\u0085models"])
def test_the_stack_refuses_whitespace_around_its_model_prefix(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^triton-gke:modelPrefix: .* before or after the prefix$"):
        from_stack_file("dev", {"triton-gke:modelPrefix": value})
