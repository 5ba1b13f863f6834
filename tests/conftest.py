"""pytest's setup for every test: global settings, the shared plan fixtures, the unit/live split and its hooks.

tests/unit/<room>/test_<module>.py tests the module <room>/<module>.py without starting a process;
tests/live/<room>/ holds every test that starts one (marked `live` below). `make test-fast` runs the unit tests,
`make test` everything. Hooks, fixtures and global setup only: the helpers tests import (evaluate, stack_settings,
PROJECT_DIR, the phases) are in tests/support/, which no test reaches through this file
(tests/unit/test_support_imports.py).
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
from hypothesis import settings

from triton_gke.cli.main import tune_gc

# No time limit per Hypothesis example. Its default deadline, 200 ms per test case off CI (hypothesis 6.170
# _settings.py settings.deadline: "The default deadline is 200 milliseconds. If running on CI, the default is None";
# CI is told by variables such as CI or GITHUB_ACTIONS, is_in_ci), fails an example a busy machine slowed, or raises
# Flaky when the rerun is fast ("Unreliable test timings": https://github.com/HypothesisWorks/hypothesis/issues/4009).
# Loaded before any test module is imported: a settings object a test makes itself inherits every attribute it does
# not set "from the current settings profile" (the settings class's docstring, "Attribute inheritance").
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

# The workers collect cyclic garbage as the toolkit's commands do (cli/main.py tune_gc): a plan under the mock runtime
# spent ~40 % of its CPU in full collections over the imported modules' objects; the suite is bound by CPU.
tune_gc()

# The shared helpers and fixture plugins get pytest's assertion messages, whether a test file imports them first or
# lists them as a plugin (else: "Module already imported so cannot be rewritten").
pytest.register_assert_rewrite("tests.support")

from tests.support.checkout import PROJECT_DIR  # noqa: E402 (after register_assert_rewrite, so it is rewritten)

sys.path.insert(0, str(PROJECT_DIR))

# The day kubernetesVersion's end of GKE standard support is judged on (settings/versions.py), for every test and every
# command a test starts (the variable is inherited): the day infra/data/gke_versions.csv was written. The program
# judges the real date; CI runs this repository for months, and its plans of the shipped stacks must not start warning
# (a warning, never a refusal: settings/versions.py POLICY) on the day the shipped default leaves standard support.
# tests/unit/settings/test_versions.py checks the default is supported on this day with room to spare, and the check
# itself at dates around each end.
os.environ["TRITON_GKE_TODAY"] = "2026-12-03"

from tests.support.phases import LIVE_DIR, LONGEST_FILES, PHASES, is_quiet, skipped_in_quiet_phase  # noqa: E402
from tests.support.stacks import PROJECT, evaluate, stack_settings  # noqa: E402
from triton_gke.offline.runtime import Plan, run_under_mocks  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def built_model_repository() -> None:
    """The program refuses to plan without the repository it uploads; dev and prod share the reference settings."""
    from triton_gke.offline import build_models

    assert build_models.main(["--stack", "dev"]) == 0


@pytest.fixture(scope="session")
def engine_plan(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Plan]:
    """evaluate(stack, tritonBuildEngines=True, **overrides) with the repository those settings build: its TensorRT
    variants are plans (model_repo/build.py), which the program checks against the stack before it plans. Built into
    a folder of this session, never build/model_repository, which the other workers' plans read; the system is
    declared as __main__.py declares it, with that folder as model_repository_dir."""
    import pulumi

    from triton_gke.infra.config import load_stack_settings
    from triton_gke.infra.system import TritonGkeSystem, TritonGkeSystemArgs
    from triton_gke.model_repo.build import build_repository
    from triton_gke.settings import load_stack_settings as checked_settings

    built: dict[tuple[str, str], Path] = {}

    def plan(stack: str = "dev", **overrides: Any) -> Plan:
        overrides["tritonBuildEngines"] = True
        config = stack_settings(stack, **overrides)
        settings = checked_settings(config, stack=stack)
        key = (stack, repr(settings.model_repo))
        if key not in built:
            built[key] = build_repository(settings.model_repo, tmp_path_factory.mktemp("engine-repo") / "repo").out

        def declare() -> None:
            args = TritonGkeSystemArgs(settings=load_stack_settings(), model_repository_dir=str(built[key]))
            TritonGkeSystem("triton-gke", args, child_aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)])

        return run_under_mocks(declare, stack, config, PROJECT)

    def repository(stack: str = "dev", **overrides: Any) -> Path:
        """The folder plan(stack, **overrides) served (built there by that call)."""
        config = stack_settings(stack, **overrides, tritonBuildEngines=True)
        return built[(stack, repr(checked_settings(config, stack=stack).model_repo))]

    plan.repository = repository  # type: ignore[attr-defined]
    return plan


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return evaluate("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return evaluate("prod")


# ---------------------------------------------------------------- unit and live (tests/support/phases.py)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The quiet phase imports only the files that hold quiet tests."""
    return skipped_in_quiet_phase(collection_path, config.option.markexpr)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in item.path.parents:
            item.add_marker(pytest.mark.live)
            if is_quiet(item.nodeid):
                item.add_marker(pytest.mark.quiet)
    items.sort(key=lambda item: -LONGEST_FILES.get(item.nodeid.split("::", 1)[0], 0))  # stable: files stay whole


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Whatever emptied the phase (its -m, or ARGS' -k or paths): under xdist the controller collects nothing itself,
    # so it is told by the phase alone (found by the red team: `make test ARGS='-k test_phases'` failed in phase 2).
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.option.markexpr in PHASES:
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
