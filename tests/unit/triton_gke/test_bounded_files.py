"""Issue 20, class 2: every reader of a user-suppliable file is bounded (regular files only, size-capped, UTF-8
checked, depth-capped, numbers finite and in range) and refuses in one line naming the file: the GPU catalogue
(gpuCatalogue), the VM price table, capacity records, a bench results.json."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.bench.plans.results import load_run
from triton_gke.bench.reports.record import read_results
from triton_gke.capacity.records import load_record
from triton_gke.settings.catalogue import load_gpu_catalogue
from triton_gke.settings.cost import load_vm_prices

GPU_HEADER = "accelerator,count,region,zone,price_on_demand_usd_h,price_spot_usd_h"
VM_HEADER = "machine_type,region,price_on_demand_usd_h,price_spot_usd_h"

READERS: dict[str, Callable[[Path], Any]] = {
    "gpu catalogue": load_gpu_catalogue,
    "vm prices": load_vm_prices,
    "capacity record": load_record,
    "results.json (bench.reports.record)": read_results,
    "results.json (load_run)": load_run,
}


@pytest.fixture()
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)
    yield path


def _one_line_naming(refused: pytest.ExceptionInfo[BaseException], path: Path | str) -> str:
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{path}"), line
    return line


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_a_special_file_is_refused_without_reading_it(reader: str, special: str, fifo: Path, tmp_path: Path) -> None:
    """Failed before for the catalogue, the price table and load_run: /dev/zero filled memory, a FIFO hung."""
    path = {"/dev/zero": Path("/dev/zero"), "fifo": fifo, "folder": tmp_path / "dir"}[special]
    if special == "folder":
        path.mkdir()
    target = path
    if special == "folder" and reader == "results.json (bench.reports.record)":
        target = path / "results.json"  # bench.reports.record reads FOLDER/results.json: make that the special file
        os.mkfifo(target)
    with pytest.raises(ValueError) as refused:
        READERS[reader](path)
    _one_line_naming(refused, target)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_binary_or_oversized_file_is_refused_in_one_line(reader: str, tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"\x00\xff" * 10)
    with pytest.raises(ValueError) as refused:
        READERS[reader](path)
    _one_line_naming(refused, path)
    path.write_bytes(b"#" * (33 * 1024 * 1024))  # above every cap (results.json's is 32 MiB)
    with pytest.raises(ValueError) as refused:
        READERS[reader](path)
    assert "more than" in _one_line_naming(refused, path)


# ---------------------------------------------------------------- generated bad price files

BAD_PRICES = st.sampled_from(
    ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0.01", "1e3", "1e400", "9" * 5000, "1_0", "0x1", "", "abc"]
) | st.integers(min_value=10_001, max_value=10**60).map(str)
GOOD_PRICES = st.decimals(min_value=0, max_value=100, places=4).map(lambda price: format(price, "f"))
JUNK = st.sampled_from(
    [
        b"\x00\x01\x02binary",
        b"\xff\xfe not utf-8",
        b'"' + b"x" * 200_000 + b'"',  # one field over csv's limit
        b"[" * 100_000,  # deep nesting
        b"a,b\n" + b'"unterminated',
        b"",
    ]
)


@st.composite
def price_files(draw: st.DrawFn, header: str, cells: Callable[[str, str], str]) -> bytes:
    rows = [cells(draw(GOOD_PRICES), draw(GOOD_PRICES)) for _ in range(draw(st.integers(0, 3)))]
    rows.insert(draw(st.integers(0, len(rows))), cells(draw(BAD_PRICES), draw(GOOD_PRICES | BAD_PRICES)))
    text = "\n".join(["# generated", header, *rows]).encode()
    return draw(st.just(text) | JUNK.map(lambda junk: text + b"\n" + junk) | JUNK)


def _gpu_row(on_demand: str, spot: str) -> str:
    return f"nvidia-tesla-t4,1,us-central1,us-central1-a,{on_demand},{spot}"


def _vm_row(on_demand: str, spot: str) -> str:
    return f"n1-standard-4,us-central1,{on_demand},{spot or '0'}"


@given(data=price_files(GPU_HEADER, _gpu_row))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_generated_bad_gpu_catalogue_is_one_line_naming_the_file(tmp_path: Path, data: bytes) -> None:
    """Failed before: NaN, inf and negative prices were taken, binary was a UnicodeDecodeError traceback, a short row
    an AttributeError."""
    path = tmp_path / "gpus.csv"
    path.write_bytes(data)
    with pytest.raises(ValueError) as refused:
        load_gpu_catalogue(path)
    _one_line_naming(refused, path)


@given(data=price_files(VM_HEADER, _vm_row))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_generated_bad_vm_price_table_is_one_line_naming_the_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "vm.csv"
    path.write_bytes(data)
    try:
        prices = load_vm_prices(path)
    except ValueError as err:
        line = str(err)
        assert "\n" not in line and line.startswith(f"{path}"), line
    else:  # only a file without any data row reads (an empty table): never a bad figure
        assert prices == {}, prices


@given(on_demand=GOOD_PRICES, spot=GOOD_PRICES)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_good_price_is_read_as_the_decimal_written(tmp_path: Path, on_demand: str, spot: str) -> None:
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join([GPU_HEADER, _gpu_row(on_demand, spot)]))
    (offer,) = load_gpu_catalogue(path).offers
    assert (repr(offer.on_demand_usd_h), repr(offer.spot_usd_h)) == (repr(float(on_demand)), repr(float(spot)))


# ---------------------------------------------------------------- generated bad JSON (records, results.json)

BAD_JSON = st.sampled_from(
    [
        b"[" * 50_000 + b"]" * 50_000,
        b'{"a": ' * 40 + b"1" + b"}" * 40,
        b'{"schema": ' + b"9" * 5000 + b"}",
        b'{"schema": NaN}',
        b'{"schema": -Infinity}',
        b"\x00{}",
        b"{\xff}",
        b"{",
        b"",
    ]
)


@pytest.mark.parametrize(
    "reader", ["capacity record", "results.json (bench.reports.record)", "results.json (load_run)"]
)
@given(data=BAD_JSON)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_bad_json_is_one_line_naming_the_file(tmp_path: Path, reader: str, data: bytes) -> None:
    """Failed before for load_run (tracebacks) and bench.reports.record (a RecursionError traceback on deep
    nesting)."""
    path = tmp_path / "results.json"
    path.write_bytes(data)
    with pytest.raises(ValueError) as refused:
        READERS[reader](path)
    _one_line_naming(refused, path)


@given(zones=st.lists(st.sampled_from(["us-central1-a", "us-central1-b", "us-central1-c"]), min_size=2, max_size=5))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_gpu_catalogue_repeating_a_zone_is_refused_naming_both_rows(tmp_path: Path, zones: list[str]) -> None:
    """Red-team finding: a repeated zone row was taken, listing the zone twice in a cluster's node locations (and
    dropping another) with whichever price came last."""
    rows = [f"nvidia-tesla-t4,1,us-central1,{zone},0.35,0.14" for zone in zones]
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join([GPU_HEADER, *rows]), encoding="utf-8")
    if len(set(zones)) == len(zones):
        assert len(load_gpu_catalogue(path).offers) == len(zones)
        return
    with pytest.raises(ValueError) as refused:
        load_gpu_catalogue(path)
    _one_line_naming(refused, path)
    assert "repeats data row" in str(refused.value)
