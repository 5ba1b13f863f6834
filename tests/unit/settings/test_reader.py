"""settings.reader.Reader.integer: whole numbers between a minimum and an optional maximum, one-line refusals.

Every bounded count of the stack (node counts, disk sizes, batch sizes, rates, percentages) goes through it; the
messages of the real settings are pinned in tests/unit/settings/test_values.py, the bounds themselves here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from triton_gke.settings import ConfigError
from triton_gke.settings.reader import Reader
from triton_gke.settings.schema import Key

PROJECT = "demo"
KEY = "someCount"
BOUND = st.integers(min_value=0, max_value=2**64)
# What a stack file may hold: whole numbers of any size, and the other JSON kinds an integer key must refuse.
VALUE = st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))


def _reader(value: object) -> Reader:
    return Reader(PROJECT, {KEY: Key(KEY, "integer", 1)}, {f"{PROJECT}:{KEY}": json.dumps(value)})


def _refusal(value: object, **bounds: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        _reader(value).integer(KEY, **bounds)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{PROJECT}:{KEY}: "), message
    return message


@given(BOUND, BOUND, VALUE)
@example(1, 1, 1)
@example(1, 1, 2)
@example(0, 10, True)
@settings(max_examples=60, deadline=None)
def test_a_whole_number_within_the_bounds_is_taken_and_any_other_value_refused(
    minimum: int, span: int, value: object
) -> None:
    maximum = minimum + span
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole and minimum <= value <= maximum:
        assert _reader(value).integer(KEY, minimum=minimum, maximum=maximum, why="a limit") == value
        return
    message = _refusal(value, minimum=minimum, maximum=maximum, why="a limit")
    if not whole:
        assert message.endswith("expected a whole number"), message
    elif value < minimum:
        assert message.endswith(f"expected a number >= {minimum}"), message
    else:
        assert message.endswith(f"expected a number from {minimum} to {maximum:,} (a limit)"), message


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**30))
@settings(max_examples=40, deadline=None)
def test_above_the_maximum_the_caller_s_words_replace_the_range(maximum: int, excess: int) -> None:
    message = _refusal(maximum + excess, maximum=maximum, too_large=f"at most {maximum} things")
    assert message.endswith(f"is not valid; at most {maximum} things"), message
    assert message.startswith(f"{PROJECT}:{KEY}: {maximum + excess} "), message


@given(st.integers(min_value=0, max_value=2**200))
@settings(max_examples=25, deadline=None)
def test_without_a_maximum_any_whole_number_from_the_minimum_is_taken(value: int) -> None:
    assert _reader(value).integer(KEY) == value
