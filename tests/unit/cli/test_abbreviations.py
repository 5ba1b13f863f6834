"""Options are never abbreviated: `--set` was read as `--settle-seconds`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.one_line import OneLineParser


# ------------------------------------------------------------------ abbreviations
@settings(max_examples=30, deadline=None)
@given(cut=st.integers(min_value=3, max_value=len("--settle-seconds") - 1))
def test_an_abbreviated_option_is_unrecognized(cut: int) -> None:
    parser = OneLineParser(prog="p", raise_as=ValueError)
    parser.add_argument("--settle-seconds", type=float)
    with pytest.raises(ValueError, match="unrecognized arguments"):
        parser.parse_args(["--settle-seconds"[:cut], "2"])
    assert parser.parse_args(["--settle-seconds", "2"]).settle_seconds == 2.0
