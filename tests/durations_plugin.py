"""Where a test run's time goes: a pytest plugin for `make test-durations` (issue 47: measure first).

Loaded with `-p
tests.durations_plugin --durations-out FILE`; without --durations-out it does nothing. It lives beside conftest.py,
not in tests/support/: importing that package this early keeps pytest from rewriting its asserts. It writes one JSON
file per run (a phase of `make test`): every test's duration (setup + call + teardown, as pytest reports them, so a
module-scoped server's start is charged to the first test that asks for it), the phase's wall time, the machine
(cores, load average before and after), and the time spent inside four kinds of work, summed over all workers:
building model repositories, starting servers (tritonserver, Prometheus, the GCS emulator, haproxy, Locust),
planning stacks under Pulumi's mock runtime, and sleeping. Each is timed around the one function that does it
(KINDS); nested calls are charged to the outermost kind only (a server start's readiness polls are starting, not
sleeping), so the kinds never count a second twice. Work in processes the tests start (a `triton-gke sandbox` run)
is not seen: it shows in the tests' durations only. tests/support/durations_report.py turns the files into the
committed report.

The wrappers are installed in pytest_load_initial_conftests, before tests/conftest.py imports the program's modules
(an early plugin's hook, https://docs.pytest.org/en/stable/reference/reference.html#pytest.hookspec.pytest_load_initial_conftests),
so `from X import f` anywhere afterwards binds the timed function. xdist workers send their sums to the controller
in `workeroutput` (pytest-xdist's documented channel: https://pytest-xdist.readthedocs.io/en/stable/how-to.html).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# kind -> the functions that do it, as module:qualname. Timed from call to return, outermost call only.
KINDS: dict[str, tuple[str, ...]] = {
    "building models": ("triton_gke.model_repo.build:build_repository",),
    "starting servers": (
        "triton_gke.sandbox.triton:TritonServer.start",
        "triton_gke.sandbox.prometheus:LocalPrometheus.start",
        "triton_gke.sandbox.gcs_emulator:GcsEmulator.start",
        "triton_gke.sandbox.balancer:LocalBalancer.start",
        "triton_gke.sandbox.components:LocustLoad.start",
    ),
    "planning stacks": (
        "triton_gke.offline.runtime:run_program",
        "triton_gke.offline.runtime:run_under_mocks",
        "triton_gke.offline.runtime:run_program_folder",
    ),
    "sleeping": ("time:sleep",),
}
_WORKER_KEY = "durations_kinds"

_spent: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)
_inside = threading.local()


def _timed(kind: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "kind", None) is not None:  # inside another kind's call: charged there
            return function(*args, **kwargs)
        _inside.kind = kind
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            _spent[kind] += time.monotonic() - started
            _calls[kind] += 1
            _inside.kind = None

    return timed


def _install() -> None:
    for kind, targets in KINDS.items():
        for target in targets:
            module_name, _, qualname = target.partition(":")
            owner: Any = importlib.import_module(module_name)
            *path, name = qualname.split(".")
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, name, _timed(kind, getattr(owner, name)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--durations-out", metavar="FILE", help="write where this run's time went, as JSON, to FILE")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    known, _ = parser.parse_known_and_unknown_args(args)
    if getattr(known, "durations_out", None):
        _install()


class _Collector:
    """The controller's (or the only process's) record: tests' durations, the kinds' sums, the machine."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.started = time.monotonic()
        self.load_before = os.getloadavg()
        self.tests: dict[str, dict[str, Any]] = {}
        self.worker_kinds: list[dict[str, Any]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(report.nodeid, {"seconds": 0.0, "outcome": "passed"})
        test["seconds"] += report.duration
        if report.failed:
            test["outcome"] = "failed"
        elif report.skipped and test["outcome"] == "passed":
            test["outcome"] = "skipped"

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.worker_kinds.append(getattr(node, "workeroutput", {}).get(_WORKER_KEY, {}))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        kinds = [*self.worker_kinds, _own_kinds()]
        record = {
            "markexpr": session.config.option.markexpr,
            "workers": len(self.worker_kinds),
            "cores": os.cpu_count(),
            "load_before": self.load_before,
            "load_after": os.getloadavg(),
            "wall_seconds": time.monotonic() - self.started,
            "exit_status": int(exitstatus),
            "kinds": {kind: sum(k.get(kind, {}).get("seconds", 0.0) for k in kinds) for kind in KINDS},
            "kind_calls": {kind: sum(k.get(kind, {}).get("calls", 0) for k in kinds) for kind in KINDS},
            "tests": self.tests,
        }
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _own_kinds() -> dict[str, dict[str, float]]:
    return {kind: {"seconds": _spent[kind], "calls": _calls[kind]} for kind in KINDS}


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("durations_out", None)
    if not out:
        return
    if hasattr(config, "workerinput"):  # an xdist worker: its sums go to the controller at the end
        config.pluginmanager.register(_WorkerSender(config), "durations-worker")
    else:
        config.pluginmanager.register(_Collector(Path(out)), "durations-collector")


class _WorkerSender:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.config.workeroutput[_WORKER_KEY] = _own_kinds()  # type: ignore[attr-defined]
