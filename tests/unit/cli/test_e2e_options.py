"""Red team of issue 48: `triton-gke e2e` ran `pulumi up` and `destroy` with `--stack ''` (Pulumi's selected stack),
and started a billed `up` with a --model the stack does not serve or a rate of NaN. Every option is now checked before
any tool or credential is asked: one line, exit 2, nothing run (the unit runner refuses any process start)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.cli import e2e
from triton_gke.settings.stack import STACK_NAME


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        e2e.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stack=st.text(max_size=120).filter(lambda name: not STACK_NAME.fullmatch(name) and not name.startswith("-")))
def test_a_stack_name_pulumi_would_not_take_is_refused(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a Pulumi stack name" in _refused(["--stack", stack], capsys)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.text(min_size=1, max_size=20).filter(lambda m: m.strip() and not m.startswith("-")))
def test_a_model_the_stack_does_not_serve_is_refused(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    served = {"original", "trt_fp32", "trt_fp16", "trt_int8", "trt_int8_bs16_count4"}
    if model in served:
        return
    assert "not a variant stack dev serves" in _refused(["--stack", "dev", "--model", model], capsys)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    option=st.sampled_from(["--rate", "--users", "--locust-seconds"]),
    value=st.one_of(st.sampled_from([math.nan, math.inf, -1.0, 0.0]), st.floats(min_value=2e6, max_value=1e300)),
)
def test_a_load_that_cannot_be_a_short_check_is_refused(
    option: str, value: float, capsys: pytest.CaptureFixture[str]
) -> None:
    text = repr(value) if option == "--rate" else str(int(value)) if math.isfinite(value) else "x"
    err = _refused(["--stack", "dev", option, text], capsys)
    assert option in err
