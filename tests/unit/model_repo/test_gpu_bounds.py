"""Physical bounds: every variant's instances and batches must fit in one GPU's memory (issue 20, class 4).

The oracle restates the figures (model_repo/settings.py says where each comes from) and adds them up on its own:
one GPU holds, summed over the served variants, instances x (weights + max batch x input bytes).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings, VariantSettings, validate_settings
from triton_gke.offline.runtime import config_string
from triton_gke.settings import catalogue
from triton_gke.settings import from_stack_file as load_settings
from triton_gke.settings.errors import ConfigError

T4_BYTES = 16 * 10**9  # NVIDIA T4 datasheet: 16 GB GDDR6


IMAGE_VALUES = 224 * 224 * 3


INPUT = {"FP32": 4 * IMAGE_VALUES, "UINT8": IMAGE_VALUES}  # 602,112 and 150,528


# Measured on build/model_repository: FP32 ONNX 102,132,044 bytes, INT8 26,053,398; FP16 half the FP32 weights.
WEIGHTS = {"none": 102_132_044, "FP32": 102_132_044, "FP16": 102_132_044 // 2, "INT8": 26_053_398}


SMALL = "trt_int8_bs16_count4"  # the variant read from modelSmallBatch*


MODEL_KEYS = ("modelMaxBatchSize", "modelInstanceCount", "modelSmallBatchSize", "modelSmallBatchInstanceCount")


DEFAULTS = dict(zip(MODEL_KEYS, (64, 1, 16, 4), strict=True))  # Pulumi.yaml's defaults


EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def needed_bytes(values: dict[str, int], uint8: frozenset[str] = frozenset()) -> int:
    """Bytes one T4 holds for the dev stack's five variants under these model settings."""
    total = 0
    for v in REFERENCE_VARIANTS:
        small = v.name == SMALL
        batch = values["modelSmallBatchSize" if small else "modelMaxBatchSize"]
        count = values["modelSmallBatchInstanceCount" if small else "modelInstanceCount"]
        total += count * (WEIGHTS[v.precision] + batch * INPUT["UINT8" if v.name in uint8 else "FP32"])
    return total


def largest_fitting(key: str, values: dict[str, int] | None = None) -> int:
    """The largest value of `key` that still fits a T4, the other model keys at `values` (defaults)."""
    values = dict(DEFAULTS | (values or {}))
    values[key] = 1
    low, high = 1, 2**31 - 1
    while low < high:  # the need grows with each key: bisect
        middle = (low + high + 1) // 2
        values[key] = middle
        if needed_bytes(values) <= T4_BYTES:
            low = middle
        else:
            high = middle - 1
    return low


def outcome(**overrides: Any) -> str | None:
    config = {f"{PROJECT}:{key}": config_string(value) for key, value in overrides.items()}
    try:
        load_settings("dev", config)
    except ConfigError as err:
        return str(err)
    return None


def test_the_t4_figure_is_the_datasheets() -> None:
    assert catalogue.gpu_memory_bytes("nvidia-tesla-t4") == T4_BYTES


def test_a_batch_of_100000_is_refused_naming_the_key_and_figures() -> None:
    """Fails on the code before issue 20: 100000 and 1000 instances were accepted (int32 was the only bound)."""
    error = outcome(modelMaxBatchSize=100000, modelPreferredBatchSize=64)
    assert error is not None and "\n" not in error
    assert error.startswith(f"{PROJECT}:modelMaxBatchSize: 100000 is not valid; ")
    assert "100000 x 602,112 input bytes" in error and "16 GB" in error and "nvidia-tesla-t4" in error
    error = outcome(modelInstanceCount=1000)
    assert error and error.startswith(f"{PROJECT}:modelInstanceCount: 1000 is not valid; ")
    assert "1000 x (102.1 MB weights" in error


def sizes() -> st.SearchStrategy[int]:
    """Small, around-the-edge and huge values: the bound sits in the thousands of batch items."""
    return st.one_of(st.integers(1, 64), st.integers(1, 40_000), st.sampled_from([2**31 - 1, 100_000, 1000]))


@EXAMPLES
@given(
    values=st.fixed_dictionaries({key: sizes() for key in MODEL_KEYS}),
    uint8=st.sets(st.sampled_from([v.name for v in REFERENCE_VARIANTS])),
)
def test_accepted_iff_the_bytes_fit_and_a_refusal_names_key_and_figures(values: dict[str, int], uint8: set) -> None:
    overrides: dict[str, Any] = dict(values, modelPreferredBatchSize=1, modelUint8Input=sorted(uint8))
    if uint8:  # Locust's payload must match the model it drives (settings/serving.py load_test)
        overrides["locustModel"], overrides["locustPayload"] = sorted(uint8)[0], "uint8"
    error = outcome(**overrides)
    need = needed_bytes(values, frozenset(uint8))
    if need <= T4_BYTES:
        assert error is None, error
        return
    assert error is not None, f"{need:,} bytes accepted on a {T4_BYTES:,}-byte T4"
    assert "\n" not in error
    match = re.match(rf"{PROJECT}:(\w+): (\d+) is not valid; ", error)
    assert match and match.group(1) in MODEL_KEYS, error
    assert int(match.group(2)) == values[match.group(1)]
    assert f"= {need / 1e9:,.1f} GB" in error or f"= {need / 1e6:,.1f} MB" in error, error
    assert "nvidia-tesla-t4's 16 GB" in error
    for v in REFERENCE_VARIANTS:
        dtype = "UINT8" if v.name in uint8 else "FP32"
        assert f"x {INPUT[dtype]:,} input bytes" in error


@EXAMPLES
@given(batch=sizes(), count=sizes(), dtype=st.sampled_from(["FP32", "UINT8"]), precision=st.sampled_from(list(WEIGHTS)))
def test_the_model_repo_build_path_applies_the_same_bound(batch: int, count: int, dtype: str, precision: str) -> None:
    """`triton-gke model-repo custom --set` builds for the T4 through validate_settings: the same sum, per variant."""
    variant = VariantSettings("m", precision, batch, 1, 0, count, dtype)
    fits = count * (WEIGHTS[precision] + batch * INPUT[dtype]) <= T4_BYTES
    try:
        validate_settings(ModelRepoSettings(variants=(variant,)))
    except ModelRepoError as err:
        assert not fits, err
        assert str(err).startswith("variant 'm': ") and "16 GB" in str(err) and "\n" not in str(err)
        assert f"{batch} x {INPUT[dtype]:,} input bytes" in str(err)
    else:
        assert fits
