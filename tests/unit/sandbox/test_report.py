"""The sandbox report's reader of Locust's --json-file: any content gives figures or one ReportError line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.sandbox.report import ReportError, locust_results

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)
ENTRY = {
    "name": "infer",
    "method": "infer-http",
    "last_request_timestamp": 110.0,
    "start_time": 100.0,
    "num_requests": 20,
    "num_none_requests": 0,
    "num_failures": 1,
    "total_response_time": 1000,
    "max_response_time": 90,
    "min_response_time": 40,
    "total_content_length": 0,
    "response_times": {"40": 10, "50": 8, "90": 2},
    "num_reqs_per_sec": {},
    "num_fail_per_sec": {},
}


@SETTINGS
@given(content=values)
def test_any_json_gives_figures_or_one_line(content: object, tmp_path: Path) -> None:
    (tmp_path / "locust.json").write_text(json.dumps(content))
    try:
        figures = locust_results(tmp_path / "locust", 12.0)
    except ReportError as err:
        assert "\n" not in str(err) and "locust.json" in str(err)
    else:
        assert figures["requests"] >= 0 or content == []  # a list of entries was read


@SETTINGS
@given(key=st.sampled_from(sorted(ENTRY)), value=values)
def test_a_damaged_entry_gives_figures_or_one_line(key: str, value: object, tmp_path: Path) -> None:
    (tmp_path / "locust.json").write_text(json.dumps([{**ENTRY, key: value}]))
    try:
        locust_results(tmp_path / "locust", 12.0)
    except ReportError as err:
        assert "\n" not in str(err) and "locust.json" in str(err)


def test_two_request_names_are_summed_with_locusts_percentile_rule(tmp_path: Path) -> None:
    second = {**ENTRY, "name": "other", "start_time": 101.0, "last_request_timestamp": 112.0}
    (tmp_path / "locust.json").write_text(json.dumps([ENTRY, second]))
    figures = locust_results(tmp_path / "locust", 12.0)
    # 40 requests: 20 at 40 ms, 16 at 50, 4 at 90. p95: all but int(40 x 0.95) = 38 within -> 90 ms.
    assert figures == {
        "requests": 40,
        "failures": 2,
        "rps": pytest.approx(40 / 12),  # over the load's 12 s
        "p50_ms": 50.0,
        "p95_ms": 90.0,
        "average_ms": 50.0,
    }


def test_no_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"Locust wrote no statistics \(.*locust\.json\)"):
        locust_results(tmp_path / "locust", 12.0)


@pytest.mark.parametrize(
    "content",
    ["[" * 5000 + "]" * 5000, '[{"num_requests": 1e400}]', "[" + '{"num_requests": ' + "9" * 400 + "}]"],
    ids=["deep", "float_overflow", "huge_int"],
)
def test_pathological_json_is_one_line(content: str, tmp_path: Path) -> None:
    (tmp_path / "locust.json").write_text(content)
    with pytest.raises(ReportError, match="locust.json"):
        locust_results(tmp_path / "locust", 12.0)


def test_more_untimed_requests_than_requests_is_refused(tmp_path: Path) -> None:
    (tmp_path / "locust.json").write_text(json.dumps([{**ENTRY, "num_none_requests": 25}]))
    with pytest.raises(ReportError, match="not Locust's statistics"):
        locust_results(tmp_path / "locust", 12.0)


def test_a_fifo_or_a_device_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "locust.json")
    with pytest.raises(ReportError, match="locust.json"):
        locust_results(tmp_path / "locust", 12.0)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(ReportError, match="zero.json"):
        locust_results(tmp_path / "zero", 12.0)
