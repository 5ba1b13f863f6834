"""regionOverrides: what one region serves apart from the stack-wide settings, so a change can reach one region at a
time (`triton-gke rollout`, cli/rollout.py). One item per region, as maintenanceWindows does:

    regionOverrides: ["us-central1 tritonImageTag=25.02-py3 capacityScalerPercent=10"]

tritonImageTag: this region's Triton image, judged by the stack key's own rules (the release, the model source it
serves, the GPU nodes' driver); autoscaleQueueTimeMs: this region's HPA target, bounded as the stack key;
capacityScalerPercent: the share of its pods' capacity the global balancer offers this region's backends
(BackendService backend capacityScaler, "A setting of 0 means the group is completely drained ... Valid range is
[0.0,1.0]": pulumi-gcp 10.2 compute/_inputs.py BackendServiceBackendArgs). An empty list (the default) changes
nothing: every region takes the stack-wide settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import Reader
from triton_gke.settings.serving import MAX_QUEUE_TIME_TARGET_MS, check_image_runs_on_driver, validate_image
from triton_gke.settings.values import RegionOverride, StackSettings

KEY = "regionOverrides"
TAG, QUEUE, SCALER = "tritonImageTag", "autoscaleQueueTimeMs", "capacityScalerPercent"
# Each key's field of RegionOverride, and its bounds where it is a number.
FIELDS = {TAG: "triton_image_tag", QUEUE: "queue_time_ms", SCALER: "capacity_scaler_percent"}
BOUNDS = {QUEUE: (1, MAX_QUEUE_TIME_TARGET_MS), SCALER: (0, 100)}


def region_overrides(reader: Reader, regions: tuple[str, ...]) -> tuple[tuple[str, RegionOverride], ...]:
    """regionOverrides as (region, its override), in the items' order: each a stack region, once, with known keys."""
    seen: dict[str, RegionOverride] = {}
    for item in reader.strings(KEY):
        region, *pairs = item.split() or [""]
        if region not in regions:
            raise reader.fail(KEY, item, f"{region!r} is not one of the stack's regions ({', '.join(regions)})")
        if region in seen:
            raise reader.fail(KEY, item, f"{region} has two items; put all its keys in one")
        seen[region] = _override(reader, item, pairs)
    return tuple(seen.items())


def _override(reader: Reader, item: str, pairs: list[str]) -> RegionOverride:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if key not in FIELDS:
            raise reader.fail(KEY, item, f"{key!r} is not a key a region overrides ({', '.join(FIELDS)})")
        if not sep or not text:
            raise reader.fail(KEY, item, f"{key}: expected {key}=VALUE")
        if FIELDS[key] in values:
            raise reader.fail(KEY, item, f"{key} is given twice")
        values[FIELDS[key]] = _value(reader, item, key, text)
    if not values:
        raise reader.fail(KEY, item, f"no KEY=VALUE after the region (keys: {', '.join(FIELDS)})")
    return RegionOverride(**values)


def _value(reader: Reader, item: str, key: str, text: str) -> str | int:
    if key not in BOUNDS:
        return text
    low, high = BOUNDS[key]
    if not text.isdigit() or not low <= int(text) <= high:  # isdigit: no sign, no '1e3', no '٣' (int() takes it)
        raise reader.fail(KEY, item, f"{key}: expected a whole number from {low} to {high:,}")
    return int(text)


def check_images(reader: Reader, settings: StackSettings) -> None:
    """Each overridden image by the stack key's own rules, the refusal naming regionOverrides and the region."""
    for region, override in settings.region_overrides:
        if override.triton_image_tag is None:
            continue
        if settings.serving.build_engines and any(v.uses_tensorrt for v in settings.model_repo.variants):
            raise reader.fail(
                KEY, region, f"{TAG}: the engine-build Jobs build plans for the stack's {TAG} only; set it stack-wide"
            )
        repo = dataclasses.replace(settings.model_repo, triton_image_tag=override.triton_image_tag)
        try:
            validate_image(reader, repo)
            check_image_runs_on_driver(reader, repo, settings.gpu_pool, settings.cluster)
        except ConfigError as err:
            reason = str(err).removeprefix(f"{reader.full(TAG)}: ")
            raise ConfigError(f"{reader.full(KEY)}: {region} {TAG}: {reason}") from None


def as_items(pins: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The regionOverrides value of per-region pins (the rollout's), in the form region_overrides reads back."""
    return [
        " ".join([region, *(f"{key}={entry[key]}" for key in FIELDS if key in entry)])
        for region, entry in pins.items()
        if entry
    ]


def as_pins(overrides: tuple[tuple[str, RegionOverride], ...]) -> dict[str, dict[str, Any]]:
    """The per-region pins of validated overrides: key -> value, only what is set."""
    return {
        region: {key: getattr(o, name) for key, name in FIELDS.items() if getattr(o, name) is not None}
        for region, o in overrides
    }
