"""The unit/live split and the two phases of `make test`, which tests/conftest.py's hooks apply.

tests/unit/<room>/: pure and mock-runtime tests, no process started (`make test-fast` runs them).
tests/live/<room>/: every test that starts a process (tritonserver, Locust, Prometheus or promtool, the GCS
emulator, our own commands, make, a wheel): tests/conftest.py marks them `live`, by folder, so no test can be in one
and not the other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support.checkout import PROJECT_DIR

LIVE_DIR = PROJECT_DIR / "tests" / "live"


# `make test` runs two phases: every test but the quiet ones on four workers (`-m "not quiet"`: unit tests share
# nothing they write; each live test works in folders of its own and on ports it picks, and the shared
# build/model_repository is only rebuilt when its settings change, model_repo/build.py _holds); then the `quiet` ones
# one at a time (`-m "live and quiet"`): they measure rates, latencies or elapsed times, which a test beside them
# would skew, or they load the whole machine themselves. QUIET names them, by file or test, with the reason.
# `make test-fast` runs `-m "not live"`. A selection (ARGS) holding no test of a phase leaves that run empty: it
# passes, saying so, instead of failing with pytest's "no tests ran" (exit 5).
QUIET = {
    "tests/live/bench/test_conditions.py": "loads every core on purpose (the CPU hog and the bench's noisy-run check)",
    "tests/live/sandbox/test_rollout.py": "zero failed requests with lifecycle waits of 1-4 s",
    "tests/live/bench/test_bench_agreement.py": "compares two load generators' p95 near an SLO knee (see below)",
}
# The bench agreement is quiet since 2026-12-03: its model sleeps its service time, so the cores do not set its
# capacity, but its Locust is a Python process whose latencies include its own waits for a core. Beside three other
# workers and the CPU hog (tests/support/cpu_hog.py) it could not even offer its first rate (asked 10 requests/s, sent
# 5.5-10.1) and found no rate within the SLO; beside the hog alone (six busy processes) it sent 9.7-10.5 at p95 104-120
# ms. The other rates, latencies and budgets checked beside other workers hold with room to spare (docs/testing.md).
PHASES: dict[str, Callable[[bool, bool], bool]] = {  # -m expression -> does a test (live?, quiet?) belong to it
    "not live": lambda live, quiet: not live,
    "live": lambda live, quiet: live,
    "not quiet": lambda live, quiet: not quiet,
    "live and not quiet": lambda live, quiet: live and not quiet,
    "live and quiet": lambda live, quiet: live and quiet,
}


# The live files that take longest, in seconds alone (a `--durations` run of the live tests on this 2-core machine).
# They are handed out first: xdist gives each worker whole files, and one started last would run alone at the end
# (its default order is by number of tests, which put the 5-minute bench agreement, one test, last).
LONGEST_FILES = {
    "tests/live/bench/test_bench_agreement.py": 336,
    "tests/live/loadtest/test_locustfile.py": 159,
    "tests/live/sandbox/test_rollout.py": 121,
    "tests/live/sandbox/test_sandbox.py": 95,
    "tests/live/docs/test_readme.py": 91,
    "tests/live/model_repo/test_reproducible.py": 90,
    "tests/live/triton_gke/test_package.py": 91,
    "tests/live/offline/test_plan.py": 85,
    "tests/live/offline/test_plan_against.py": 88,
    "tests/live/sandbox/test_faults.py": 65,
    "tests/live/bench/test_pa_rates.py": 47,
    "tests/live/model_repo/test_sync.py": 44,
    "tests/live/offline/test_plan_out.py": 43,
    "tests/live/observability/test_monitoring_stack.py": 40,
}


QUIET_FILES = {key.split("::", 1)[0] for key in QUIET}


def skipped_in_quiet_phase(collection_path: Path, markexpr: str) -> bool | None:
    """True for a test file the quiet phase need not import (importing all of them cost it ~7 s); None lets pytest
    decide (tests/conftest.py pytest_ignore_collect)."""
    if markexpr != "live and quiet" or not collection_path.name.startswith("test_"):
        return None
    relative = (
        collection_path.resolve().relative_to(PROJECT_DIR).as_posix()
        if PROJECT_DIR in collection_path.resolve().parents
        else ""
    )
    return (relative.startswith("tests/") and relative not in QUIET_FILES) or None


def is_quiet(nodeid: str) -> bool:
    return any(nodeid == key or nodeid.startswith((f"{key}::", f"{key}[")) for key in QUIET)
