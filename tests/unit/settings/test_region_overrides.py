"""regionOverrides (triton_gke/settings/region_overrides.py): generated items are read back exactly or refused in one
line naming the key; the program applies each region's override to that region only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import evaluate, stack_settings
from triton_gke.offline.plan_view import plan_records
from triton_gke.settings import ConfigError, load_stack_settings
from triton_gke.settings.region_overrides import as_items, as_pins

PROD_REGIONS = ("us-central1", "europe-west4", "asia-east1")
KEYS = ("tritonImageTag", "autoscaleQueueTimeMs", "capacityScalerPercent", "modelHold", "")
BOUNDS = {"autoscaleQueueTimeMs": (1, 60_000), "capacityScalerPercent": (0, 100)}  # restated, not imported
VALUES = ("25.05-py3", "25.06-py3", "0", "7", "100", "101", "-1", "1e3", "", "x")


def _valid(region: str, pairs: list[tuple[str, str]]) -> dict[str, Any] | None:
    pins: dict[str, Any] = {}
    for key, value in pairs:
        if key in pins or not value:
            return None
        if key == "tritonImageTag" and value in ("25.05-py3", "25.06-py3"):
            pins[key] = value
        elif key in BOUNDS and value.isdigit() and BOUNDS[key][0] <= int(value) <= BOUNDS[key][1]:
            pins[key] = int(value)
        else:
            return None
    return pins if region in PROD_REGIONS and pairs else None


items = st.tuples(
    st.sampled_from((*PROD_REGIONS, "us-east1", "")),
    st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=3),
)


@settings(max_examples=80)
@given(st.lists(items, max_size=3))
def test_every_generated_value_is_read_back_or_refused_in_one_line_naming_the_key(drawn: list[Any]) -> None:
    texts = [" ".join([region, *(f"{k}={v}" for k, v in pairs)]) for region, pairs in drawn]
    wanted = [_valid(region, pairs) for region, pairs in drawn]
    regions = [region for region, _ in drawn]
    config = stack_settings("prod", regionOverrides=texts)
    if all(w is not None for w in wanted) and len(set(regions)) == len(regions):
        read = load_stack_settings(config, stack="prod").region_overrides
        assert as_pins(read) == dict(zip(regions, wanted, strict=True))
        assert as_items(as_pins(read)) == [
            " ".join([r, *(f"{k}={v}" for k, v in p.items())]) for r, p in as_pins(read).items()
        ]
        return
    with pytest.raises(ConfigError) as refused:
        load_stack_settings(config, stack="prod")
    line = str(refused.value)
    assert line.startswith("triton-gke:regionOverrides") and "\n" not in line, line


def test_a_region_image_the_stack_key_would_refuse_is_refused_naming_the_region() -> None:
    config = stack_settings("prod", regionOverrides=["asia-east1 tritonImageTag=24.99-py3"])
    with pytest.raises(ConfigError, match=r"^triton-gke:regionOverrides: asia-east1 tritonImageTag: "):
        load_stack_settings(config, stack="prod")


def test_an_override_changes_its_region_only() -> None:
    base = {r["name"]: r for r in plan_records(evaluate("prod"))}
    plan = evaluate("prod", regionOverrides=["europe-west4 tritonImageTag=25.05-py3 capacityScalerPercent=10"])
    after = {r["name"]: r for r in plan_records(plan)}
    changed = sorted(name for name in base if base[name] != after[name])
    assert changed == ["global-grpc", "global-http", "triton-europe-west4-deployment"]
    image = after["triton-europe-west4-deployment"]["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":25.05-py3")
    scalers = [b["capacityScaler"] for b in after["global-http"]["inputs"]["backends"]]
    assert sorted(scalers) == [0.1] * 3 + [1.0] * (len(scalers) - 3)
