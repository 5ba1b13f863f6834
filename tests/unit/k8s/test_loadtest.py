"""The stack's load-rate settings (locustRate, locustRateSteps, locustArrival) and the cluster's locust-config.

The stack checks locustRateSteps with loadtest/arrivals.parse_steps, the parser the locustfile uses; these tests
run the locustfile's own reading of `rate_steps` (its `_get` and `_steps`, compiled from its source: importing
the locustfile would import Locust and monkey-patch this process with gevent) against the stack's check.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate, stack_settings
from triton_gke.loadtest import arrivals
from triton_gke.settings import load_stack_settings
from triton_gke.settings.errors import ConfigError

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _locustfile_steps() -> tuple[Callable[[dict[str, str]], tuple[arrivals.Segment, ...]], type[Exception]]:
    """The locustfile's `_steps` (and the SettingError it raises), from its source, with its own helpers."""
    source = (PROJECT_DIR / "loadtest" / "locustfile.py").read_text()
    wanted = {"SettingError", "_get", "_steps"}
    nodes = [n for n in ast.parse(source).body if getattr(n, "name", None) in wanted]
    assert {n.name for n in nodes} == wanted, "the locustfile no longer reads rate_steps through _steps"
    namespace: dict = {"arrivals": arrivals, "Mapping": dict, "annotations": None}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), "locustfile.py", "exec"), namespace)  # noqa: S102
    return namespace["_steps"], namespace["SettingError"]


LOCUSTFILE_STEPS, SETTING_ERROR = _locustfile_steps()


def _stack(text: str) -> str | None:
    """The rate_steps the stack puts in the ConfigMap, or None when the stack refuses the text."""
    try:
        return load_stack_settings(stack_settings("dev", locustRateSteps=text), stack="dev").load_test.rate_steps
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).startswith("triton-gke:locustRateSteps:")
        return None


def _locustfile(text: str) -> tuple[arrivals.Segment, ...] | None:
    try:
        return LOCUSTFILE_STEPS({"rate_steps": text})
    except SETTING_ERROR:
        return None


_number = st.one_of(
    st.integers(min_value=-5, max_value=2_000_000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", ".", "1e3", "1e400", "+4", "0", "1e-9"]),
)
_item = st.one_of(
    st.tuples(_number, _number).map(":".join),  # RATE:SECONDS, valid or not
    st.tuples(_number, _number, _number).map(lambda t: f"{t[0]}-{t[1]}:{t[2]}"),  # FROM-TO:SECONDS
    st.text(alphabet="0123456789.-:,eE+ x", max_size=12),  # junk
)
# No control characters: the stack refuses them in every key (settings/reader.py), tested elsewhere.
RATE_STEPS = st.lists(_item, min_size=1, max_size=4).map(",".join) | st.text(alphabet=" \u00a0", max_size=3)


@settings(max_examples=60, deadline=None)
@given(RATE_STEPS)
def test_stack_and_locustfile_accept_and_read_the_same_rate_steps(text: str) -> None:
    stack, locustfile = _stack(text), _locustfile(text)
    assert (stack is None) == (locustfile is None), (text, stack, locustfile)
    if stack is not None:  # what the ConfigMap carries reads as the same shape in the pods
        assert _locustfile(stack) == locustfile


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=-10, max_value=3_000_000))
def test_locust_rate_is_refused_outside_what_the_locustfile_takes(rate: int) -> None:
    try:
        accepted = load_stack_settings(stack_settings("dev", locustRate=rate), stack="dev").load_test.rate
    except ConfigError as err:
        assert str(err).startswith("triton-gke:locustRate:") and "\n" not in str(err)
        accepted = None
    assert (accepted is not None) == (0 <= rate <= arrivals.MAX_RATE)


def _locust_config(**overrides: object) -> dict[str, str]:
    plan = evaluate("dev", **overrides)
    [config] = [c for c in plan.of_type(CONFIG_MAP) if c.inputs["metadata"]["name"] == "locust-config"]
    return config.inputs["data"]


def test_configmap_carries_the_rate_and_arrival_of_the_stack() -> None:
    data = _locust_config(locustRate=40, locustArrival="constant")
    assert (data["rate"], data["arrival"]) == ("40", "constant")
    assert "rate_steps" not in data  # unset: the locustfile's default (no shape)


def test_configmap_carries_the_rate_steps_of_the_stack() -> None:
    data = _locust_config(locustRateSteps="10:60,10-40:120")
    assert data["rate_steps"] == "10:60,10-40:120" and data["arrival"] == "poisson"
    assert "rate" not in data  # unset: rps per user applies outside the shape
    assert LOCUSTFILE_STEPS(data) == (arrivals.Segment(10, 10, 60), arrivals.Segment(10, 40, 120))


@pytest.mark.parametrize("key", ["locustRate", "locustRateSteps", "locustArrival"])
def test_defaults_leave_the_locustfile_as_before(key: str) -> None:
    loaded = load_stack_settings(stack_settings("dev", **{key: None}), stack="dev").load_test
    assert (loaded.rate, loaded.rate_steps, loaded.arrival) == (0, "", "poisson")
