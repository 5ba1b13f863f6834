"""Issue 20, class 3: figures exact. Percentages and money kept as the decimals written (no binary round-off in a
record, a threshold or a cost), records self-consistent and not from the future, image tags matched or the mismatch
named, record updates serialised (two at once both land)."""

from __future__ import annotations

import datetime
import json
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import triton_gke.capacity.records as records_module
from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import stack_settings
from tests.unit.capacity.test_records import record  # the one record factory of the capacity tests
from triton_gke.bench.reports import record as bench_record
from triton_gke.capacity.compare import Row, slo_group
from triton_gke.capacity.from_bench import Measured, records_from_results
from triton_gke.capacity.records import CapacityError, load_record, load_records, slo_mismatch, write_records
from triton_gke.contracts.paths import BENCH_RESULTS
from triton_gke.settings import load_stack_settings
from triton_gke.settings.cost import load_vm_prices

RUN_JSON = json.loads((PROJECT_DIR / BENCH_RESULTS / "dev-2026-11-30-alone" / "results.json").read_text())
T4 = "nvidia-tesla-t4"


# ---------------------------------------------------------------- percentages round-trip exactly

PERCENTS = st.decimals(min_value=0, max_value=Decimal("99.9"), places=2, allow_nan=False, allow_infinity=False)


@given(percent=PERCENTS | st.sampled_from([Decimal(7), Decimal("7.1"), Decimal("0.3"), Decimal("1.1")]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_failure_budget_round_trips_exactly_through_bench_write_and_read(tmp_path: Path, percent: Decimal) -> None:
    """bench writes max_failure_ratio = percent / 100 (bench/__main__.py); the record must say `percent`, exactly,
    and the stack that allows `percent` must accept it. Failed before: 7 % was written as 7.000000000000001."""
    stated = float(percent)
    run = json.loads(json.dumps(RUN_JSON))
    run["settings"]["max_failure_ratio"] = stated / 100
    made, _ = records_from_results(run, Measured("cpu-twin", "24.10-py3"), Path("results.json"))
    folder = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
    written = write_records(made, folder)
    for stored in (load_record(r.path) for r in written):
        assert stored.max_failure_percent == stated, (percent, stored.max_failure_percent)
        assert json.loads(stored.path.read_text())["max_failure_percent"] == stated
        assert slo_mismatch(stored, 95.0, stated) == ""


def test_a_percentage_a_float_cannot_hold_is_refused_not_rounded(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(
        record().to_json().replace('"max_failure_percent": 1.0', '"max_failure_percent": 7.00000000000000001')
    )
    with pytest.raises(CapacityError, match=r"r\.json: max_failure_percent: 7\.00000000000000001 has more digits"):
        load_record(path)


# ---------------------------------------------------------------- a regression threshold compares exactly


@given(old_tenths=st.integers(min_value=10, max_value=100_000), limit=st.integers(min_value=1, max_value=99))
@settings(max_examples=200, deadline=None)
def test_a_drop_of_exactly_the_threshold_is_no_regression(old_tenths: int, limit: int) -> None:
    """README: "exit 1 if a rate fell > 10 %"; --help: "dropped by more than". Failed before: 3.0 -> 2.7 counted as a
    drop of 10.000000000000002 % for some rates, and 10 % -> "regression"."""
    old_rate = Decimal(old_tenths) / 10
    new_rate = old_rate * (100 - limit) / 100  # exactly `limit` % lower, as a decimal
    old, new = record(max_rps_per_gpu=float(old_rate)), record(max_rps_per_gpu=float(new_rate), revision=2)
    if Decimal(repr(float(new_rate))) != new_rate:
        return  # more digits than a record keeps: not a figure a file could show
    row = Row(slo_group(old), old, new)
    assert not row.regressed(float(limit)), (old_rate, new_rate, row.change_pct)
    assert row.regressed(limit - 0.01)


def test_the_known_float_case_of_an_exact_ten_percent_drop() -> None:
    old, new = record(max_rps_per_gpu=1.1), record(max_rps_per_gpu=0.99)
    assert 100 * (0.99 - 1.1) / 1.1 < -10  # what floats say: a drop of more than 10 %
    assert not Row(slo_group(old), old, new).regressed(10.0)


# ---------------------------------------------------------------- money: no NaN, infinity or negative price


@pytest.mark.parametrize("price", ["nan", "NaN", "inf", "-inf", "-0.5", "1e400", "1_000", "0x10"])
def test_a_price_that_is_no_price_is_refused_in_one_line(tmp_path: Path, price: str) -> None:
    """Failed before: nan, inf and -0.5 flowed into the cost table and the estimatedCost output."""
    path = tmp_path / "vm.csv"
    path.write_text(f"machine_type,region,price_on_demand_usd_h,price_spot_usd_h\nn1-standard-4,us-central1,{price},\n")
    with pytest.raises(ValueError) as refused:
        load_vm_prices(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{path}: data row 1: price_on_demand_usd_h: "), line


# ---------------------------------------------------------------- records self-consistent, not from the future


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"p50_ms": 95.0, "p95_ms": 90.0}, "p50_ms: 95 is above p95_ms 90"),
        ({"p95_ms": 120.0}, "p95_ms: 120 is above the record's own SLO"),
        ({"p50_ms": 150.0, "p95_ms": None}, "p50_ms: 150 is above the record's own SLO"),
        ({"measured_at": "2999-01-01"}, "measured_at: 2999-01-01 is in the future"),
    ],
)
def test_a_record_that_contradicts_itself_or_the_clock_is_refused(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    """Failed before (all but the first): such records were used for sizing."""
    path = tmp_path / "nvidia-tesla-t4__original__25.06-py3__slo-100ms.json"
    path.write_text(json.dumps(record(**changes).to_dict()))
    with pytest.raises(CapacityError) as refused:
        load_record(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{path}: {expected}"), line


def test_tomorrow_is_within_the_clock_skew_and_the_day_after_is_not(tmp_path: Path) -> None:
    today = datetime.datetime.now(datetime.UTC).date()
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record(measured_at=(today + datetime.timedelta(days=1)).isoformat()).to_dict()))
    assert load_record(path).measured_at
    path.write_text(json.dumps(record(measured_at=(today + datetime.timedelta(days=2)).isoformat()).to_dict()))
    with pytest.raises(CapacityError, match="in the future"):
        load_record(path)


# ---------------------------------------------------------------- image tags matched or the mismatch named


def test_sizing_from_a_record_of_another_image_names_the_mismatch() -> None:
    """The T4 records are the tutorial's (tensorrtserver 19.05); the stack runs a current image. Failed before: the
    record was used without a word."""
    sized = load_stack_settings(stack_settings("staging"), stack="staging")
    assert sized.capacity.record_path, sized.capacity.missing
    tag = sized.model_repo.triton_image_tag
    assert f"not the stack's {tag}" in sized.capacity.record_path
    assert "measured with image tensorrtserver:19.05-py3 (tutorial)" in sized.capacity.record_path


# ---------------------------------------------------------------- record updates serialised


def _slow_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Widen the window between reading the folder and writing it, so that unserialised writers interleave."""
    original = records_module._write_atomically

    def slow(path: Path, text: str) -> None:
        time.sleep(0.3)
        original(path, text)

    monkeypatch.setattr(records_module, "_write_atomically", slow)


def _together(*calls: Any) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(call: Any) -> None:
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - reported by the test
            errors.append(err)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_two_bench_record_updates_of_one_key_both_land(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failed before: both read revision 1 and wrote revision 2; one update was lost. Either may land first, and the
    second then holds a figure below the first's: --accept-regression lets both land (without it, the guard refuses
    the lower one, whichever it is)."""
    records_dir = tmp_path / "records"
    run = json.loads(json.dumps(RUN_JSON))
    run["summaries"] = run["summaries"][:1]
    bench_record.write_run_records(run, None, tmp_path / "out0", record=True, records_dir=records_dir)
    _slow_writes(monkeypatch)
    runs = []
    for n in (1, 2):
        changed = json.loads(json.dumps(run))
        changed["summaries"][0]["max_rps"] = run["summaries"][0]["max_rps"] + n
        runs.append(changed)
    errors = _together(
        *(
            lambda r=r, n=n: bench_record.write_run_records(
                r, None, tmp_path / f"out{n}", record=True, records_dir=records_dir, accept_regression=True
            )
            for n, r in enumerate(runs, start=1)
        )
    )
    assert errors == []
    (stored,) = load_records(records_dir)
    assert stored.revision == 3


@given(tags=st.sampled_from([("25.06/py3", "25.06-py3"), ("a b", "a-b"), ("a_b", "a-b")]))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_two_concurrent_writers_of_new_keys_sharing_a_file_name_both_land(
    tmp_path_factory: pytest.TempPathFactory, tags: tuple[str, str]
) -> None:
    """Two image tags that give one file name: each writer picks a free name under the lock. Failed before: both
    picked the same name and one record was overwritten."""
    folder = tmp_path_factory.mktemp("records")
    with pytest.MonkeyPatch.context() as patch:
        _slow_writes(patch)
        errors = _together(*(lambda t=t: write_records([record(image_tag=t)], folder) for t in tags))
    assert errors == []
    assert sorted(r.image_tag for r in load_records(folder)) == sorted(tags)
