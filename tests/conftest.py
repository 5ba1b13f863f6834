"""Shared helpers: evaluate the real program (or one component) under Pulumi's mock runtime; the unit/live split.

tests/unit/<room>/test_<module>.py tests the module <room>/<module>.py without starting a process;
tests/live/<room>/ holds every test that starts one (marked `live` below). `make test-fast` runs the unit tests,
`make test` everything. Helpers and fixture plugins shared by several files are in tests/support/.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from triton_gke.offline.runtime import Plan, config_string, run_program, run_under_mocks  # noqa: E402
from triton_gke.settings import stack_config  # noqa: E402
from triton_gke.settings.schema import config_schema  # noqa: E402

PROJECT = config_schema()[0]


def stack_settings(stack: str, **overrides: Any) -> dict[str, str]:
    """The stack file's config with `overrides` (project keys by short name, python values)."""
    config = stack_config(stack)
    for key, value in overrides.items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = config_string(value)
    return config


def evaluate(stack: str = "dev", **overrides: Any) -> Plan:
    return run_program(stack, stack_settings(stack, **overrides), PROJECT)


def evaluate_component(declare: Callable[[], Any], stack: str = "dev", **overrides: Any) -> Plan:
    return run_under_mocks(declare, stack, stack_settings(stack, **overrides), PROJECT)


@pytest.fixture(scope="session", autouse=True)
def built_model_repository() -> None:
    """The program refuses to plan without the repository it uploads; dev and prod share the reference settings."""
    from triton_gke.offline import build_models

    assert build_models.main(["--stack", "dev"]) == 0


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return evaluate("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return evaluate("prod")


# ---------------------------------------------------------------- unit and live
# tests/unit/<room>/test_<module>.py: pure and mock-runtime tests, no process started (`make test-fast` runs them).
# tests/live/<room>/: every test that starts a process (tritonserver, Locust, Prometheus or promtool, the GCS
# emulator, our own commands, make, a wheel): marked `live` here, by folder, so no test can be in one and not the other.
LIVE_DIR = PROJECT_DIR / "tests" / "live"


# `make test` runs the unit tests on every core, then the live ones one at a time (`-m "not live"`, then `-m live`):
# a live test may rebuild the shared build/model_repository with other settings, which a unit test running beside
# it would read half-way. A selection (ARGS) holding tests of one kind only leaves the other run empty: that run
# passes, saying so, instead of failing with pytest's "no tests ran" (exit 5).
PHASES = {"live": True, "not live": False}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in item.path.parents:
            item.add_marker(pytest.mark.live)
    wanted = PHASES.get(config.option.markexpr)
    config.stash[_PHASE_EMPTY] = (
        bool(items) and wanted is not None and not any((LIVE_DIR in item.path.parents) is wanted for item in items)
    )


_PHASE_EMPTY = pytest.StashKey[bool]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.stash.get(_PHASE_EMPTY, False):
        print(f"\nnone of the selected tests is {session.config.option.markexpr!r}: nothing to run here")
        session.exitstatus = pytest.ExitCode.OK


class StartedAProcess(AssertionError):
    """A unit test tried to start a process: it belongs under tests/live/."""


@contextlib.contextmanager
def _no_processes(nodeid: str) -> Iterator[None]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StartedAProcess(f"{nodeid} starts a process: move it under tests/live/ (see tests/conftest.py)")

    saved = [(subprocess.Popen, "_execute_child", subprocess.Popen._execute_child)]
    saved += [(os, name, getattr(os, name)) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")]
    for owner, name, _ in saved:
        setattr(owner, name, refuse)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A unit test's own body starts no process (its fixtures' setup is not watched: session fixtures are shared)."""
    if item.get_closest_marker("live"):
        return (yield)
    with _no_processes(item.nodeid):
        return (yield)
