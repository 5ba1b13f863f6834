"""bench.reports.record type-checks the facts a record quotes (command, wall_s, machine)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.reports import record
from triton_gke.contracts.paths import BENCH_RESULTS

RUN = PROJECT_DIR / BENCH_RESULTS / "dev-2026-11-30-alone" / "results.json"


# ------------------------------------------------------------------ bench.reports.record's facts
_bad = st.sampled_from([None, float("nan"), float("inf"), [], [1], {}, True, "x", -1])


_keys = st.sampled_from(["command", "wall_s", "machine", *(f"machine.{k}" for k in record.MACHINE_FACTS)])


@settings(max_examples=60, deadline=None)
@given(key=_keys, value=_bad)
def test_record_type_checks_command_wall_s_and_machine(key: str, value: object, tmp_path_factory) -> None:
    run = json.loads(RUN.read_text())
    top, _, sub = key.partition(".")
    if sub:
        run["machine"][sub] = value
    else:
        run[top] = value
    right_type = {"command": value == "x", "machine": value == {}}.get(key, False)
    if right_type or (sub and record.MACHINE_FACTS[sub][0](value)):
        return  # a value of the right type (text, an empty object, a null load average): nothing to refuse
    path = tmp_path_factory.mktemp("r") / "results.json"
    path.write_text(json.dumps(run))
    with pytest.raises(record.CapacityError) as refused:
        record.read_results(path)
    message = str(refused.value)
    if isinstance(value, float) and not math.isfinite(value):  # NaN/Infinity are not JSON: refused as the file is read
        assert message.startswith(f"{path}: ") and "not a finite number" in message and "\n" not in message
    else:
        assert message.startswith(f"{path}: {key}: ") and "\n" not in message


def test_the_committed_runs_pass_the_fact_checks() -> None:
    for path in sorted((PROJECT_DIR / BENCH_RESULTS).glob("*/results.json")):
        assert record.read_results(path)[0]["machine"]
