"""`make test-durations` (issue 47): the plugin times functions that exist, charges nested work once, and the report
says what the phases' files say."""

from __future__ import annotations

import importlib
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import durations_plugin
from tests.support import durations_report

FOLDER_PARTS = st.text(st.characters(categories=("L", "N"), include_characters="_"), min_size=1, max_size=8)


def test_every_timed_function_exists() -> None:
    """A renamed server start or planner would silently drop out of its kind: each target must resolve."""
    for targets in durations_plugin.KINDS.values():
        for target in targets:
            module_name, _, qualname = target.partition(":")
            owner = importlib.import_module(module_name)
            for part in qualname.split("."):
                owner = getattr(owner, part)
            assert callable(owner), target


def test_nested_work_is_charged_to_the_outermost_kind_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durations_plugin, "_spent", {"a": 0.0, "b": 0.0})
    monkeypatch.setattr(durations_plugin, "_calls", {"a": 0, "b": 0})
    inner = durations_plugin._timed("b", lambda: time.sleep(0.01))
    outer = durations_plugin._timed("a", lambda: (inner(), time.sleep(0.01)))
    outer()
    inner()
    assert durations_plugin._calls == {"a": 1, "b": 1}
    assert durations_plugin._spent["a"] >= 0.02 and durations_plugin._spent["b"] >= 0.01  # sleep waits at least that


@given(parts=st.lists(FOLDER_PARTS, min_size=1, max_size=5), name=FOLDER_PARTS)
def test_a_test_is_filed_under_at_most_three_levels_of_its_path(parts: list[str], name: str) -> None:
    nodeid = "/".join(["tests", *parts, f"test_{name}.py"]) + "::test_x[a/b::c]"
    folder = durations_report.folder_of(nodeid)
    assert nodeid.startswith(folder + "/")
    assert folder.count("/") == min(2, len(parts))


def _phase(tests: dict[str, float], wall: float) -> dict:
    kinds = dict.fromkeys(durations_plugin.KINDS, 1.0)
    return {
        "cores": 2,
        "workers": 4,
        "load_before": [0.1, 0.2, 0.3],
        "load_after": [1.0, 1.5, 2.0],
        "wall_seconds": wall,
        "exit_status": 0,
        "kinds": kinds,
        "kind_calls": dict.fromkeys(durations_plugin.KINDS, 3),
        "tests": {nodeid: {"seconds": s, "outcome": "passed"} for nodeid, s in tests.items()},
    }


@given(
    durations=st.dictionaries(
        st.sampled_from([f"tests/unit/room{i}/test_m.py::test_{j}" for i in range(3) for j in range(30)]),
        st.floats(0, 1000, allow_nan=False),
        min_size=1,
    ),
    walls=st.tuples(st.floats(1, 5000), st.floats(1, 5000)),
)
def test_the_report_adds_up_its_phases_and_lists_the_slowest_first(
    durations: dict[str, float], walls: tuple[float, float]
) -> None:
    phases = [(title, _phase(durations, wall)) for (_, title), wall in zip(durations_report.PHASES, walls, strict=True)]
    text = durations_report.render({"setup_seconds": 42, "venv_before": "absent"}, phases, "abc123", "2026-12-07")
    assert f"**Test phases together: {(walls[0] + walls[1]) / 60:.1f} min" in text
    assert "commit abc123" in text and "virtualenv absent before" in text
    slowest = text.split("slowest tests")[1].splitlines()[3:]
    listed = [float(line.split("|")[1]) for line in slowest if line.startswith("| ")]
    assert listed == sorted(listed, reverse=True)
    assert len(listed) == min(durations_report.SLOWEST, 2 * len(durations))
    rows = durations_report.tests_csv(phases).splitlines()
    assert len(rows) == 1 + 2 * len(durations)
