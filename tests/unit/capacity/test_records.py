"""capacity.records: the strict loader, find_record, writing and updating records (issue 15).

Record files are read by the stack sizing, so every way a file can be wrong is refused in one line naming the
file and the key."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.capacity.records import (
    BOUNDS,
    RECORDS_DIR,
    CapacityError,
    CapacityRecord,
    NoRecordError,
    escaped,
    find_record,
    load_record,
    load_records,
    record_file_name,
    revised,
    slo_mismatch,
    write_records,
)
from triton_gke.model_repo.settings import REFERENCE_VARIANTS

T4 = "nvidia-tesla-t4"


# The reference tutorial's table on one T4 at p95 <= 100 ms (../shared/reference/architecture.md), our names.
TUTORIAL = {
    "original": 253.0,
    "trt_fp32": 381.0,
    "trt_fp16": 1072.5,
    "trt_int8": 1085.4,
    "trt_int8_bs16_count4": 2236.6,
}


def record(**changes: Any) -> CapacityRecord:
    base = CapacityRecord(
        gpu=T4, variant="original", image_tag="25.06-py3", slo_latency_ms=100.0, slo_percentile=95.0,
        max_failure_percent=1.0, max_rps_per_gpu=250.0, batch=4.0, p50_ms=40.0, p95_ms=90.0, source="measured",
        method="make bench", measured_at="2026-11-30", revision=1, path=Path("unwritten.json"),
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


# ---------------------------------------------------------------- the shipped records
def test_reference_records_are_the_tutorial_table_under_our_variant_names() -> None:
    reference = {r.variant: r for r in load_records() if r.source == "reference"}
    assert {name: r.max_rps_per_gpu for name, r in reference.items()} == TUTORIAL
    assert set(reference) == {v.name for v in REFERENCE_VARIANTS}  # every name is one modelVariants accepts
    for r in reference.values():
        assert (r.gpu, r.slo_latency_ms, r.slo_percentile) == (T4, 100.0, 95.0)
        assert "Measure and tune performance of a TensorFlow inference system" in r.method
        assert "not measured by this toolkit" in r.method
    assert reference["trt_int8"].p50_ms == 32.0 and reference["original"].p50_ms is None


def test_every_shipped_record_file_is_in_the_form_the_writer_writes() -> None:
    records = load_records()
    assert records, "capacity/records/ holds records"
    for r in records:
        assert r.path.read_text(encoding="utf-8") == r.to_json(), r.path
        assert r.path.parent == RECORDS_DIR


def test_the_stack_finds_the_t4_reference_for_its_own_image_tag() -> None:
    """No T4 record of the served image yet: the newest of another tag stands in, and says which tag it is."""
    found = find_record(T4, "trt_int8_bs16_count4", 100, image_tag="25.06-py3")
    assert found.max_rps_per_gpu == 2236.6 and found.source == "reference" and found.image_tag != "25.06-py3"


# ---------------------------------------------------------------- round trip and corruptions (generated)
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)


GPUS = st.sampled_from([T4, "nvidia-l4", "cpu-twin", "nvidia-tesla-a100"])


LINE = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF, blacklist_categories=("Cs", "Zl", "Zp", "Cc")),
               min_size=1, max_size=60).map(str.strip).filter(lambda s: bool(s) and s.isprintable())  # fmt: skip


def within(key: str) -> st.SearchStrategy[float]:
    """Any value the loader accepts for a bounded key (BOUNDS; the least is exclusive where it is 0)."""
    least, most = BOUNDS[key]
    return st.floats(min_value=least, max_value=most, exclude_min=least == 0, allow_nan=False)


RATE = within("max_rps_per_gpu")


LATENCY = within("p95_ms")


OPTIONAL = st.none() | LATENCY


@st.composite
def records(draw: st.DrawFn) -> CapacityRecord:
    p50, p95 = draw(OPTIONAL), draw(OPTIONAL)
    if p50 is not None and p95 is not None and p50 > p95:
        p50, p95 = p95, p50
    # Self-consistent: no measured latency above the SLO the rate was searched at (the loader refuses that).
    slo_latency_ms = max(draw(LATENCY), p50 or 0.0, p95 or 0.0)
    return record(
        gpu=draw(GPUS), variant=draw(NAMES), image_tag=draw(LINE), slo_latency_ms=slo_latency_ms,
        slo_percentile=draw(st.floats(min_value=0.5, max_value=100)), max_failure_percent=draw(st.floats(0, 99.9)),
        max_rps_per_gpu=draw(RATE), batch=draw(st.none() | within("batch")), p50_ms=p50, p95_ms=p95,
        source=draw(st.sampled_from(["reference", "measured"])), method=draw(LINE),
        measured_at=draw(st.dates(max_value=datetime.date.today())).isoformat(), revision=draw(st.integers(1, 10_000)),
        baseline_before=draw(st.none() | within("baseline_before")), load_average=draw(st.none() | st.floats(0, 1e5)),
        cpu_steal_percent=draw(st.none() | st.floats(0, 100)), noisy=draw(st.none() | LINE),
    )  # fmt: skip


@given(st.lists(records(), min_size=1, max_size=4, unique_by=lambda r: r.key))
@settings(max_examples=40, deadline=None)
def test_written_records_read_back_equal(
    tmp_path_factory: pytest.TempPathFactory, written: list[CapacityRecord]
) -> None:
    folder = tmp_path_factory.mktemp("records")
    on_disk = write_records(written, folder)
    read = {r.key: r for r in load_records(folder)}
    assert len(read) == len(written)
    for original, stored in zip(written, on_disk, strict=True):
        assert read[original.key] == dataclasses.replace(original, path=stored.path)
        assert stored.path.parent == folder


VALID = record().to_dict()


BREAKAGES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("max_rps_per_gpu", lambda d: d | {"max_rps_per_gpu": 0}),
    ("max_rps_per_gpu", lambda d: d | {"max_rps_per_gpu": -12.5}),
    ("max_rps_per_gpu", lambda d: d | {"max_rps_per_gpu": "250"}),
    ("max_rps_per_gpu", lambda d: d | {"max_rps_per_gpu": True}),
    ("max_rps_per_gpu", lambda d: d | {"max_rps_per_gpu": None}),
    ("slo_latency_ms", lambda d: d | {"slo_latency_ms": 0.0}),
    ("slo_percentile", lambda d: d | {"slo_percentile": 101}),
    ("max_failure_percent", lambda d: d | {"max_failure_percent": 100}),
    ("batch", lambda d: d | {"batch": 0}),
    ("p50_ms", lambda d: d | {"p50_ms": 95.0, "p95_ms": 90.0}),
    ("source", lambda d: d | {"source": "guessed"}),
    ("measured_at", lambda d: d | {"measured_at": "30/11/2026"}),
    ("measured_at", lambda d: d | {"measured_at": "2026-W48-1"}),
    ("revision", lambda d: d | {"revision": 0}),
    ("revision", lambda d: d | {"revision": 1.5}),
    ("schema", lambda d: d | {"schema": 2}),
    ("gpu", lambda d: d | {"gpu": "NVIDIA T4"}),
    ("variant", lambda d: d | {"variant": "../original"}),
    ("method", lambda d: d | {"method": "two\nlines"}),
    ("image_tag", lambda d: d | {"image_tag": ""}),
    ("max_rps_per_gpu", lambda d: {k: v for k, v in d.items() if k != "max_rps_per_gpu"}),
    ("maximum_rps", lambda d: d | {"maximum_rps": 3}),
    ("path", lambda d: d | {"path": "x.json"}),
    # The run's conditions (optional keys, issue 24): of their types and bounds when present.
    ("noisy", lambda d: d | {"noisy": "load average 3.1\nsteal 9 %"}),
    ("noisy", lambda d: d | {"noisy": ["busy"]}),
    ("noisy", lambda d: d | {"noisy": ""}),
    ("cpu_steal_percent", lambda d: d | {"cpu_steal_percent": -0.5}),
    ("load_average", lambda d: d | {"load_average": "2.0"}),
    ("baseline_before", lambda d: d | {"baseline_before": 0}),
]


def _as_text(data: Any) -> str:
    return json.dumps(data, indent=2)


TEXT_BREAKAGES: list[tuple[str, Callable[[str], str]]] = [
    ("not valid JSON", lambda text: text[: len(text) // 2]),
    ("not valid JSON", lambda text: text.replace("}", "},")),
    ("NaN is not JSON", lambda text: text.replace('"max_rps_per_gpu": 250.0', '"max_rps_per_gpu": NaN')),
    ("Infinity is not JSON", lambda text: text.replace('"p95_ms": 90.0', '"p95_ms": Infinity')),
    ("gpu: given twice", lambda text: text.replace('"gpu":', '"gpu": "nvidia-l4", "gpu":')),
    ("expected a JSON object", lambda text: f"[{text}]"),
    ("not UTF-8", lambda text: text.replace("make bench", "make b\udcffench")),
]


@given(st.sampled_from(BREAKAGES), st.sampled_from(["a.json", "T4 record.json", "ünï.json"]))
@settings(max_examples=50, deadline=None)
def test_a_broken_record_is_refused_in_one_line_naming_file_and_key(
    tmp_path_factory: pytest.TempPathFactory, breakage: tuple[str, Callable[[dict[str, Any]], Any]], name: str
) -> None:
    key, breaking = breakage
    path = tmp_path_factory.mktemp("bad") / name
    path.write_text(_as_text(breaking(dict(VALID))), encoding="utf-8")
    with pytest.raises(CapacityError) as refused:
        load_record(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: {key}: "), message


@given(st.sampled_from(TEXT_BREAKAGES))
@settings(max_examples=25, deadline=None)
def test_a_file_that_is_no_json_record_is_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, breakage: tuple[str, Callable[[str], str]]
) -> None:
    expected, breaking = breakage
    path = tmp_path_factory.mktemp("bad") / "record.json"
    path.write_bytes(breaking(_as_text(VALID)).encode("utf-8", "surrogateescape"))
    with pytest.raises(CapacityError) as refused:
        load_record(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and expected in message, message


def _beyond(key: str) -> st.SearchStrategy[float]:
    """Positive finite values outside the key's bounds: from just past them to 1e308 and down to 5e-324."""
    least, most = BOUNDS[key]
    above = st.floats(min_value=most, max_value=1e308, exclude_min=True, allow_infinity=False)
    below = st.floats(min_value=5e-324, max_value=least, exclude_max=True) if least > 0 else st.nothing()
    return above | below


@given(st.data(), st.sampled_from(sorted(BOUNDS)))
@settings(max_examples=50, deadline=None)
def test_a_number_outside_its_bounds_is_refused_naming_file_and_key(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, key: str
) -> None:
    """1e308 req/s or 5e-324 req/s per GPU would size a stack of 300-digit node counts; the loader stops them."""
    value = data.draw(_beyond(key))
    changes = {key: value} | ({"p95_ms": None} if key == "p50_ms" else {"p50_ms": None} if key == "p95_ms" else {})
    if key in ("p50_ms", "p95_ms"):  # a latency at its bound stays within the record's own SLO (the loader checks it)
        changes["slo_latency_ms"] = BOUNDS["slo_latency_ms"][1]
    path = tmp_path_factory.mktemp("bounds") / "r.json"
    path.write_text(_as_text(VALID | changes), encoding="utf-8")
    with pytest.raises(CapacityError) as refused:
        load_record(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: {key}: {value!r} is out of bounds"), message
    least, most = BOUNDS[key]
    at_bound = most if key != "max_rps_per_gpu" or data.draw(st.booleans()) else least
    path.write_text(_as_text(VALID | changes | {key: at_bound}), encoding="utf-8")
    assert getattr(load_record(path), key) == at_bound


CONTROL = st.characters(min_codepoint=1, max_codepoint=0x9F, categories=("Cc",), exclude_characters="/")


@given(st.lists(CONTROL, min_size=1, max_size=3), st.sampled_from(BREAKAGES[:3]))
@settings(max_examples=25, deadline=None)
def test_a_file_name_with_a_line_break_stays_one_line_in_every_message(
    tmp_path_factory: pytest.TempPathFactory, controls: list[str], breakage: tuple[str, Any]
) -> None:
    folder = tmp_path_factory.mktemp("names")
    path = folder / f"t4__a{''.join(controls)}b__x__slo-1ms.json"  # a record's name: load_records reads it
    key, breaking = breakage
    path.write_text(_as_text(breaking(dict(VALID))), encoding="utf-8")
    for load in (lambda: load_record(path), lambda: load_records(folder)):
        with pytest.raises(CapacityError) as refused:
            load()
        message = str(refused.value)
        assert message.isprintable() and message.startswith(f"{escaped(path)}: {key}: "), message
    assert escaped(path).encode().decode("unicode_escape") == str(path)  # escaped, not dropped


def test_two_files_of_one_key_are_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "t4__a__x__slo-1ms.json").write_text(record().to_json())  # named as records: a folder's only records
    (tmp_path / "t4__b__x__slo-1ms.json").write_text(record(max_rps_per_gpu=1.0).to_json())
    with pytest.raises(CapacityError, match=r"b__x__slo-1ms\.json: holds the same gpu .* as .*a__x__slo-1ms\.json"):
        load_records(tmp_path)


# ---------------------------------------------------------------- find_record, writing, revisions
def test_find_record_prefers_the_exact_image_then_the_newest_other(tmp_path: Path) -> None:
    write_records(
        [
            record(image_tag="25.02-py3", measured_at="2026-01-10", max_rps_per_gpu=100.0),
            record(image_tag="25.06-py3", measured_at="2026-03-10", max_rps_per_gpu=200.0),
            record(image_tag="24.10-py3", measured_at="2026-05-10", max_rps_per_gpu=300.0),
            record(variant="trt_fp16", max_rps_per_gpu=900.0),
            record(slo_latency_ms=50.0, max_rps_per_gpu=50.0, p50_ms=20.0, p95_ms=45.0),
        ],
        tmp_path,
    )
    assert find_record(T4, "original", 100, "25.02-py3", tmp_path).max_rps_per_gpu == 100.0
    assert find_record(T4, "original", 100.0, "25.06-py3", tmp_path).max_rps_per_gpu == 200.0
    assert find_record(T4, "original", 100, "25.10-py3", tmp_path).max_rps_per_gpu == 300.0  # newest other tag
    assert find_record(T4, "original", 100, None, tmp_path).max_rps_per_gpu == 300.0
    assert find_record(T4, "original", 50, "25.06-py3", tmp_path).max_rps_per_gpu == 50.0
    with pytest.raises(CapacityError) as missing:
        find_record("nvidia-l4", "original", 100, "25.06-py3", tmp_path)
    assert "\n" not in str(missing.value) and "gpu nvidia-l4, variant original" in str(missing.value)
    with pytest.raises(CapacityError, match="not a folder of capacity records"):
        find_record(T4, "original", 100, records_dir=tmp_path / "absent")


def test_find_record_skips_records_of_another_percentile_or_failure_budget(tmp_path: Path) -> None:
    """A p50 rate, or one that let 99 % of requests fail, is no capacity at a p95, 1 % SLO."""
    p95 = (95.0, 1.0)
    write_records(
        [
            record(slo_percentile=50.0, max_failure_percent=99.0, measured_at="2026-11-30"),
            record(image_tag="24.10-py3", max_failure_percent=0.5, max_rps_per_gpu=200.0, measured_at="2026-01-01"),
        ],
        tmp_path,
    )
    assert find_record(T4, "original", 100, "25.06-py3", tmp_path).slo_percentile == 50.0  # no SLO asked: as before
    found = find_record(T4, "original", 100, "25.06-py3", tmp_path, slo=p95)
    assert (found.image_tag, found.max_rps_per_gpu) == ("24.10-py3", 200.0)  # within a stricter budget: fine
    with pytest.raises(NoRecordError) as none:
        find_record(T4, "original", 100, "25.06-py3", tmp_path, slo=(95.0, 0.25))
    message = str(none.value)
    assert "\n" not in message
    assert "skipped: it is for p50; the stack's SLO is p95" in message
    assert "skipped: it allows 0.5 % failures; the stack's SLO allows 0.25 %" in message


@given(percentile=st.sampled_from([50.0, 90.0, 95.0, 99.0]), failures=st.floats(0, 99.9), allowed=st.integers(0, 100))
@settings(max_examples=40, deadline=None)
def test_a_record_matches_an_slo_exactly_when_percentile_equal_and_failures_within(
    percentile: float, failures: float, allowed: int
) -> None:
    why = slo_mismatch(record(slo_percentile=percentile, max_failure_percent=failures), 95.0, float(allowed))
    assert (why == "") == (percentile == 95.0 and failures <= allowed)


def test_an_update_raises_the_revision_in_the_same_file(tmp_path: Path) -> None:
    (first,) = write_records(revised([record()], tmp_path), tmp_path)
    assert first.revision == 1 and first.path.name == record_file_name(T4, "original", "25.06-py3", 100.0)
    (second,) = write_records(revised([record(max_rps_per_gpu=180.0)], tmp_path), tmp_path)
    assert (second.revision, second.path) == (2, first.path)
    assert [r.max_rps_per_gpu for r in load_records(tmp_path)] == [180.0]


def test_a_bad_record_in_a_batch_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(CapacityError, match="max_rps_per_gpu"):
        write_records([record(), record(variant="trt_fp16", max_rps_per_gpu=-1.0)], tmp_path)
    assert not tmp_path.exists() or not list(tmp_path.iterdir())
    with pytest.raises(CapacityError, match="holds the same gpu"):
        write_records([record(), record(max_rps_per_gpu=2.0)], tmp_path)


def test_a_record_without_the_run_conditions_still_reads_and_keeps_its_form(tmp_path: Path) -> None:
    """Records committed before issue 24 have no conditions: they read as unknown (None), not as quiet or noisy."""
    shipped = load_records()
    assert shipped and all(r.noisy is None and r.baseline_before is None for r in shipped)
    marked = record(baseline_before=120.5, baseline_after=101.0, load_average=3.1, cpu_steal_percent=0.2,
                    noisy="raw onnxruntime baseline drifted -16 %")  # fmt: skip
    (written,) = write_records([marked], tmp_path)
    assert load_record(written.path) == written and json.loads(written.path.read_text())["noisy"] == marked.noisy
