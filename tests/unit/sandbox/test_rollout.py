"""The rollout proof's pure parts: the haproxy configuration and request log, the table, the removed settings, and
the docs table against the committed run (sandbox/balancer.py, sandbox/rollout.py). The run itself:
tests/live/sandbox/test_rollout.py."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.unit.contracts.test_contracts import LOAD_SETTINGS
from tests.unit.k8s.test_inference_auth import KEYS
from triton_gke.contracts.loadtest import INFERENCE_HEADERS_ENV, join_headers
from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS, inference_key_header, other_slot
from triton_gke.sandbox import rollout
from triton_gke.sandbox.balancer import (
    BalancerSettings,
    Counters,
    LoggedRequest,
    Slot,
    haproxy_config,
    parse_log_line,
    percentile,
)
from triton_gke.settings.lifecycle import DEFAULTS, lifecycle_problem

COMMITTED = PROJECT_DIR / "docs" / "results" / "rollout-dev.json"
PAGE = PROJECT_DIR / "docs" / "lifecycle.md"
SECURITY = PROJECT_DIR / "docs" / "security.md"
# Every key the component accepts (k8s/on_cluster_args.py ADMIN_KEY), one per slot.
SLOT_KEYS = st.fixed_dictionaries({slot: KEYS for slot in INFERENCE_KEY_SLOTS})
TABLE = re.compile(r"<!-- rollout table: .*? -->\n(.*?)<!-- end of rollout table -->", re.S)


def test_haproxy_checks_every_server_with_the_contract_values() -> None:
    settings = BalancerSettings.of(DEFAULTS)
    text = haproxy_config(settings, 8080, PROJECT_DIR / "api.sock", [Slot("pod0", "ns0", 8000)])
    assert f"option httpchk GET {DEFAULTS.health_check_path}" in text
    assert f"timeout check {DEFAULTS.health_check_timeout_s}s" in text
    server = "server pod0 127.0.0.1:8000 namespace ns0 check inter 2s rise 2 fall 2 disabled"
    assert (DEFAULTS.health_check_interval_s, DEFAULTS.healthy_threshold, DEFAULTS.unhealthy_threshold) == (2, 2, 2)
    assert server in text


def test_a_request_log_line_is_read_and_anything_else_is_not() -> None:
    entry = parse_log_line("1796161927.074 1000 POST /v2/models/rollout/infer 200 286 pod0 ----\n")
    assert entry is not None and entry.ok and entry.server == "pod0"
    assert (entry.accepted, entry.finished) == (pytest.approx(1796161928.074), pytest.approx(1796161928.36))
    assert parse_log_line("Server triton/pod0 is UP, reason: Layer7 check passed") is None


@given(st.text())
def test_no_text_breaks_the_log_reader(text: str) -> None:
    entry = parse_log_line(text)
    assert entry is None or len(text.split()) == 8


@given(st.lists(st.floats(0, 1e6), min_size=1), st.floats(0.01, 1))
def test_percentile_is_one_of_the_values_and_ranks_them(values: list[float], q: float) -> None:
    found = percentile(values, q)
    assert found in values
    assert sum(v <= found for v in values) >= q * len(values) - 1e-9


def test_each_removed_setting_is_one_the_contract_refuses() -> None:
    """The runs that must fail use values the settings layer would refuse for the stack (gpuSpot for the Spot one)."""
    slo_ms = 1000
    assert lifecycle_problem(DEFAULTS, slo_ms) is None
    for removed in rollout.REMOVED:
        changed = removed.change(DEFAULTS)
        if removed.scenario == "spot":
            assert lifecycle_problem(changed, slo_ms) is None  # coherent on a standard pool...
            changed = type(changed)(**{**changed.__dict__, "spot": True})
        assert lifecycle_problem(changed, slo_ms) is not None, removed.what


def test_the_docs_table_is_the_committed_run() -> None:
    rows = json.loads(COMMITTED.read_text(encoding="utf-8"))["rows"]
    found = TABLE.search(PAGE.read_text(encoding="utf-8"))
    assert found, f"{PAGE.name}: no rollout table between its markers"
    assert found[1] == rollout.table(rows)


def test_the_committed_run_failed_no_request_where_it_must_not() -> None:
    rows = json.loads(COMMITTED.read_text(encoding="utf-8"))["rows"]
    stack = {r["scenario"]: r for r in rows if r["setting"] == "stack"}
    assert set(stack) == set(rollout.SCENARIOS)
    assert all(stack[s]["failed"] == 0 and stack[s]["sent"] >= 300 for s in rollout.SCENARIOS if s != "kill")
    assert stack["kill"]["failed"] <= stack["kill"]["in_flight_at_kill"]
    assert all(r["failed"] > 0 for r in rows if r["setting"] != "stack")
    assert all(rollout.agree(r) for r in rows)


def test_the_committed_run_changed_the_key_with_no_failed_request_and_its_control_failed() -> None:
    """key-change: every replica moved to the other slot, 0 failed; its negative control (clients with the old key
    only) failed requests, each one Triton's 403 for the key."""
    rows = [r for r in json.loads(COMMITTED.read_text(encoding="utf-8"))["rows"] if r["scenario"] == "key-change"]
    change, control = (next(r for r in rows if (r["setting"] == "stack") == stack) for stack in (True, False))
    assert change["failed"] == 0 and change["key_slots"] == {"before": ["a"], "after": ["b"]}
    assert control["setting"] == rollout.old_key_only_label("b") and control["key_slots"]["after"] == ["a"]
    assert control["failed"] > 0 and control["failed_statuses"] == {"403": control["failed"]}


def test_the_security_page_quotes_the_committed_key_change_rows() -> None:
    """docs/security.md's key change points at this proof with its figures: the committed run's rows, as the table."""
    rows = [r for r in json.loads(COMMITTED.read_text(encoding="utf-8"))["rows"] if r["scenario"] == "key-change"]
    page = SECURITY.read_text(encoding="utf-8")
    assert len(rows) == 2 and rollout.table(rows) in page


@given(SLOT_KEYS)
def test_during_a_key_change_locust_carries_the_key_a_replica_of_either_slot_checks(keys: dict[str, str]) -> None:
    """What Locust sends reaches the locustfile intact (its own parser) and holds each slot's key in that slot's
    header: whichever slot a replica checks, it finds its key."""
    sent = dict(LOAD_SETTINGS({INFERENCE_HEADERS_ENV: join_headers(rollout.client_headers(keys))}).headers)
    for slot in INFERENCE_KEY_SLOTS:
        assert sent[inference_key_header(slot)] == keys[slot]


@given(SLOT_KEYS, st.sampled_from(INFERENCE_KEY_SLOTS))
def test_a_client_with_only_the_old_key_carries_nothing_the_new_slot_checks(keys: dict[str, str], old: str) -> None:
    sent = rollout.client_headers(keys, old)
    assert sent == {inference_key_header(old): keys[old]}
    assert inference_key_header(other_slot(old)) not in sent  # Triton looks its header up by name: none, refused
    assert inference_key_header(old) in rollout.old_key_only_label(old)


@given(st.lists(st.sampled_from([200, 403, 500, 503]), max_size=40))
def test_a_row_names_the_status_of_every_logged_failure(statuses: list[int]) -> None:
    """failed_statuses counts the failed inferences haproxy logged, by status: the control's 403s are Triton's refusals
    of the key, told apart from a balancer's 5xx."""
    logged = [
        LoggedRequest(10.0 + i, "POST", rollout.INFER_PATH, status, 5, "pod0", "----")
        for i, status in enumerate(statuses)
    ]
    failed = [s for s in statuses if s != 200]
    window = rollout.Window("key-change", "stack", load_from=0.0, load_to=100.0)
    locust = {"requests": len(statuses), "failures": len(failed)}
    counters = Counters(len(statuses), len(statuses) - len(failed), len(failed), 0, 0)
    row = rollout.tally(window, locust, logged, (len(statuses) - len(failed), 0), counters)
    assert row["failed_statuses"] == {str(s): failed.count(s) for s in sorted(set(failed))}
    assert sum(row["failed_statuses"].values()) == row["failed"] and rollout.agree(row)


def test_without_keys_locust_sends_no_header() -> None:
    assert rollout.client_headers({}) == {}


@pytest.mark.parametrize("words", [["--duration", "5"], ["--users=3"], ["--keep-data"], ["--no-isolation"]])
def test_the_rollout_scenario_refuses_the_load_scenarios_options(words: list[str], capsys) -> None:
    """Its load is fixed: an option it would ignore is refused in one line, before anything starts."""
    from triton_gke.sandbox import run as sandbox

    with pytest.raises(SystemExit) as done:
        sandbox.main(["--scenario", "rollout", *words])
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "not with --scenario rollout" in line and words[0].split("=")[0] in line
