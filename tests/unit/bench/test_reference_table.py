"""The reference's table on the GPU twin (bench/truth/reference_table.py): its rows, orderings and README, without
processes; the reference's figures read from their one home (the capacity records), the variants from settings."""

from __future__ import annotations

import dataclasses

from triton_gke.bench.truth import reference_table as table
from triton_gke.capacity import records
from triton_gke.model_repo.settings import REFERENCE_VARIANTS

K = 20.0
NAMES = [v.name for v in REFERENCE_VARIANTS]
# The tutorial's table on one T4 at p95 <= 100 ms (../shared/reference/architecture.md), our names.
REFERENCE = {
    "original": 253.0, "trt_fp32": 381.0, "trt_fp16": 1072.5, "trt_int8": 1085.4, "trt_int8_bs16_count4": 2236.6,
}  # fmt: skip


def test_each_variant_is_measured_as_the_stack_serves_it_with_its_queue_delay_in_twin_time() -> None:
    bs16 = next(v for v in REFERENCE_VARIANTS if v.name == "trt_int8_bs16_count4")
    c = table.candidate(bs16, K)
    assert (c.max_batch_size, c.preferred_batch_size, c.instance_count) == (16, 16, 4)
    assert c.max_queue_delay_us == bs16.max_queue_delay_us * 20


def test_the_reference_figures_are_the_capacity_records_of_source_reference() -> None:
    assert table.reference_figures() == REFERENCE


def test_the_reference_figures_follow_their_home(monkeypatch) -> None:
    """Agreement: change the records' figure and the table reads the new one."""
    shipped = records.load_records()
    changed = [dataclasses.replace(r, max_rps_per_gpu=999.0) if r.source == "reference" and r.variant == "original"
               else r for r in shipped]  # fmt: skip
    monkeypatch.setattr(records, "load_records", lambda: changed)
    assert table.reference_figures()["original"] == 999.0


def _measured() -> dict[str, list[float | None]]:
    # twin requests/s per round; trt_fp32's middle round met no rate (None)
    return {"original": [18.0, 18.5, 17.0], "trt_fp32": [19.0, None, 18.0], "trt_fp16": [55.0, 57.0, 56.0],
            "trt_int8": [96.0, 95.0, 97.0], "trt_int8_bs16_count4": [94.0, 96.0, 95.0]}  # fmt: skip


def test_rows_are_medians_unscaled_to_t4_beside_the_reference_with_the_ratio() -> None:
    truth = {"original": 18.3, "trt_fp32": 18.6, "trt_fp16": 58.7, "trt_int8": 120.3, "trt_int8_bs16_count4": 105.9}
    rows = {r["variant"]: r for r in table.table_rows(_measured(), truth, REFERENCE, K)}
    assert list(rows) == NAMES
    assert rows["original"]["measured_t4"] == 360.0  # median 18.0 x k
    assert rows["original"]["rounds_t4"] == [360.0, 370.0, 340.0]
    assert rows["trt_fp32"]["measured_t4"] == 360.0  # rounds 19, 0, 18: the failed round counts as 0
    assert rows["trt_int8"]["truth_t4"] == 2406.0
    assert rows["trt_int8_bs16_count4"]["ratio"] == round(1900.0 / 2236.6, 3)
    assert rows["original"]["reference"] == 253.0


def test_a_variant_without_a_reference_figure_has_no_ratio() -> None:
    truth = dict.fromkeys(NAMES, 10.0)
    rows = table.table_rows(_measured(), truth, {"original": 253.0}, K)
    assert rows[0]["ratio"] is not None and all(r["ratio"] is None and r["reference"] is None for r in rows[1:])


def test_orderings_and_the_readme_table() -> None:
    truth = dict.fromkeys(NAMES, 50.0)
    rows = table.table_rows(_measured(), truth, REFERENCE, K)
    for row in rows:
        row["label"] = "delay 400000 us, batch 64/64, 1 instance(s)"
    assert table.ordering(rows, "measured_t4") == ["trt_int8", "trt_int8_bs16_count4", "trt_fp16", "original",
                                                   "trt_fp32"]  # fmt: skip
    assert table.ordering(rows, "reference") == list(reversed(NAMES))
    report = {
        "command": "python -m triton_gke.bench.truth.reference_table --out x", "date": "2026-12-07T04:00:00+00:00",
        "k": K, "slo_ms": 2000.0, "seed": 46, "rounds": 3, "orders": [NAMES], "tool": "perf_analyzer --async",
        "truth_seeds": [1, 2, 3], "truth_requests": 2000, "rows": rows, "wall_s": 600.0,
        "order_measured": table.ordering(rows, "measured_t4"), "order_reference": table.ordering(rows, "reference"),
    }  # fmt: skip
    text = table.readme(report)
    assert "| `trt_int8_bs16_count4` | delay 400000 us, batch 64/64, 1 instance(s) | 1900 | [1880.0, 1920.0, 1900.0] " \
           "| 1000 | 2236.6 | 0.85 |" in text  # fmt: skip
    assert "k = 20" in text and "p95 <= 2000 ms" in text
    assert "Ordering, reference: trt_int8_bs16_count4 > trt_int8 > trt_fp16 > trt_fp32 > original." in text
