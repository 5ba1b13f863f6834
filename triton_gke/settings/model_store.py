"""The model store: the bucket's location and the models' prefix."""

from __future__ import annotations

import re

from triton_gke.settings import catalogue
from triton_gke.settings.reader import Reader
from triton_gke.settings.values import ModelStoreSettings, RegionSettings


def model_store(reader: Reader, regions: tuple[RegionSettings, ...]) -> ModelStoreSettings:
    prefix = model_prefix(reader)
    location = reader.string("bucketLocation") or regions[0].name
    _check_bucket_location(reader, location, tuple(r.name for r in regions))
    return ModelStoreSettings(
        location=location,
        force_destroy=reader.boolean("bucketForceDestroy"),
        prefix=prefix,
        hold_regions=hold_regions(reader, tuple(r.name for r in regions)),
    )


def model_prefix(reader: Reader) -> str:
    """modelPrefix without its leading and trailing '/'. Spaces around it are refused, not stripped (the one reader
    strips every text setting): " models" is another GCS prefix than "models" for the sync, which refuses it
    (contracts/naming.py object_prefix_problem), so a stack that said it would name a prefix nothing uploads to."""
    text = reader.string("modelPrefix")  # first: control characters are refused as in every text setting
    raw = reader.raw("modelPrefix")
    if isinstance(raw, str) and raw != raw.strip():
        raise reader.fail("modelPrefix", raw, "no whitespace (spaces, tabs, line breaks) before or after the prefix")
    prefix = text.strip("/")
    segments = prefix.split("/")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*", prefix) or {".", ".."} & set(segments):
        raise reader.fail("modelPrefix", prefix, "expected a folder path of letters, digits, '_', '-', '.' and '/'")
    return prefix


def hold_regions(reader: Reader, regions: tuple[str, ...]) -> tuple[str, ...]:
    """modelHoldRegions: some of the stack's regions, each once, never all (then no region takes a new version and
    the models' change serves nowhere)."""
    held = reader.strings("modelHoldRegions")
    for region in held:
        if region not in regions:
            raise reader.fail("modelHoldRegions", region, f"not one of the stack's regions ({', '.join(regions)})")
        if held.count(region) > 1:
            raise reader.fail("modelHoldRegions", region, "each region may be listed once")
    if held and set(held) == set(regions):
        raise reader.fail("modelHoldRegions", list(held), "holds every region: at least one must take new versions")
    return held


def _check_bucket_location(reader: Reader, location: str, clusters: tuple[str, ...]) -> None:
    """A GCS location that exists and holds data in at least one cluster's region (else every model load crosses
    continents, billed as inter-region egress: https://cloud.google.com/storage/pricing#network-pricing)."""
    try:
        held = catalogue.bucket_location_regions(location, tuple(catalogue.load_regions()))
    except ValueError as err:
        raise reader.fail("bucketLocation", location, str(err)) from None
    if not set(held) & set(clusters):
        kind = "region" if len(held) == 1 else f"location ({', '.join(held[:4])}{', ...' if len(held) > 4 else ''})"
        raise reader.fail(
            "bucketLocation", location, f"that {kind} holds none of the cluster regions ({', '.join(clusters)})"
        )
