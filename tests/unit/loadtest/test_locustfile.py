"""The locustfile's rate and trace settings, refused in one line (issue 13 red-team findings).

The locustfile's `rate` reading is compiled from its source (importing it would import Locust and monkey-patch
this process with gevent), as in tests/unit/k8s/test_loadtest.py. tests/live/loadtest/test_locustfile.py runs
the same refusals through a real Locust process."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.loadtest import arrivals


# ---------------------------------------------------------------- the locustfile's rate and trace
def _locustfile_rate() -> tuple[Callable[[dict[str, str]], float], type[Exception]]:
    source = (PROJECT_DIR / "loadtest" / "locustfile.py").read_text()
    wanted = {"SettingError", "_get", "_number", "_rate"}
    nodes = [n for n in ast.parse(source).body if getattr(n, "name", None) in wanted]
    assert {n.name for n in nodes} == wanted, "the locustfile no longer reads rate through _rate"
    namespace: dict = {"arrivals": arrivals, "math": math, "Mapping": dict, "annotations": None}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), "locustfile.py", "exec"), namespace)  # noqa: S102
    return namespace["_rate"], namespace["SettingError"]


LOCUSTFILE_RATE, SETTING_ERROR = _locustfile_rate()


@settings(max_examples=50, deadline=None)
@given(value=st.one_of(st.floats(max_value=0), st.floats(min_value=arrivals.MAX_RATE, exclude_min=True)).map(repr))
def test_locust_rate_at_or_below_zero_or_over_the_cap_is_refused(value: str) -> None:
    with pytest.raises(SETTING_ERROR, match=r"^rate=") as err:
        LOCUSTFILE_RATE({"rate": value})
    assert "\n" not in str(err.value)


@settings(max_examples=30, deadline=None)
@given(value=st.floats(min_value=0, max_value=arrivals.MAX_RATE, exclude_min=True))
def test_locust_rate_above_zero_is_taken_and_empty_is_unset(value: float) -> None:
    assert LOCUSTFILE_RATE({"rate": repr(value)}) == value
    assert LOCUSTFILE_RATE({"rate": " "}) == LOCUSTFILE_RATE({}) == 0.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    good=st.lists(st.integers(min_value=1, max_value=arrivals.MAX_GAP_US), min_size=0, max_size=5),
    gap=st.one_of(st.floats(min_value=arrivals.MAX_GAP_US, exclude_min=True, allow_infinity=False), st.just(1e30)),
)
def test_trace_gap_over_an_hour_is_refused_naming_file_and_line(good: list[int], gap: float, tmp_path_factory) -> None:
    trace = tmp_path_factory.mktemp("trace") / "gaps.txt"
    trace.write_text("".join(f"{g}\n" for g in good) + f"{gap!r}\n")
    with pytest.raises(arrivals.ArrivalError, match=rf"^{trace}:{len(good) + 1}: gap of .* is over 1 hour$"):
        arrivals.read_trace(trace)
