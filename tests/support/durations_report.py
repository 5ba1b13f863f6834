"""The committed report of where `make test`'s time goes (issue 47), from the files tests/durations_plugin.py wrote.

    python -m tests.support.durations_report build/test-durations results/test-durations

Reads setup.json (set-up seconds, and whether the virtualenv was there before) and phase1.json, phase2.json (the
two pytest runs of `make test`), and writes README.md (the machine, the commit, each phase's wall time, the time
inside each kind of work, time by folder, the 50 slowest tests) and tests.csv (every test's duration) into the
output folder, replacing what was there. The README's and docs/testing.md's figures are read from README.md here
(tests/unit/docs/test_test_durations.py checks they agree).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PHASES = (("phase1.json", "1: all but the quiet tests, four workers"), ("phase2.json", "2: the quiet tests, alone"))
SLOWEST = 50


def folder_of(nodeid: str) -> str:
    """tests/unit/settings/test_x.py::t -> tests/unit/settings (a test file straight under tests/unit: tests/unit)."""
    path = nodeid.split("::", 1)[0]
    return "/".join(path.split("/")[:3]) if path.count("/") >= 3 else path.rsplit("/", 1)[0]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min ({seconds:.0f} s)"


def _commit(project: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def render(setup: dict[str, Any], phases: list[tuple[str, dict[str, Any]]], commit: str, day: str) -> str:
    tests = [(nodeid, t["seconds"]) for _, phase in phases for nodeid, t in phase["tests"].items()]
    lines = [
        "# Where `make test`'s time goes",
        "",
        f"Written by `make test-durations` on {day}, commit {commit}, on a machine with {phases[0][1]['cores']} cores.",
        f"Set-up (`make setup system-packages lint`): {_minutes(setup['setup_seconds'])}, virtualenv "
        f"{setup['venv_before']} before.",
        "",
        "| phase | tests | workers | wall | load average before / after (1, 5, 15 min) | exit status |",
        "|---|---|---|---|---|---|",
    ]
    for title, phase in phases:
        before, after = (" ".join(f"{x:.1f}" for x in phase[key]) for key in ("load_before", "load_after"))
        lines.append(
            f"| {title} | {len(phase['tests'])} | {phase['workers'] or 1} | {_minutes(phase['wall_seconds'])} | "
            f"{before} / {after} | {phase['exit_status']} |"
        )
    total = sum(phase["wall_seconds"] for _, phase in phases)
    lines += ["", f"**Test phases together: {_minutes(total)}.**", ""]
    lines += _kinds(phases) + _folders(tests) + _slowest(tests)
    return "\n".join(lines) + "\n"


def _kinds(phases: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "## Time inside each kind of work (seconds, summed over workers; the outermost kind of a nested call only)",
        "",
        "| kind | " + " | ".join(f"phase {title.split(':')[0]}" for title, _ in phases) + " | calls |",
        "|---|" + "---|" * len(phases) + "---|",
    ]
    for kind in phases[0][1]["kinds"]:
        seconds = " | ".join(f"{phase['kinds'][kind]:.0f}" for _, phase in phases)
        calls = sum(phase["kind_calls"][kind] for _, phase in phases)
        lines.append(f"| {kind} | {seconds} | {calls} |")
    return [*lines, ""]


def _folders(tests: list[tuple[str, float]]) -> list[str]:
    by_folder: dict[str, list[float]] = defaultdict(list)
    for nodeid, seconds in tests:
        by_folder[folder_of(nodeid)].append(seconds)
    lines = ["## Time by folder (test durations summed)", "", "| folder | tests | seconds |", "|---|---|---|"]
    for folder, seconds in sorted(by_folder.items(), key=lambda item: -sum(item[1])):
        lines.append(f"| {folder} | {len(seconds)} | {sum(seconds):.0f} |")
    return [*lines, ""]


def _slowest(tests: list[tuple[str, float]]) -> list[str]:
    lines = [f"## The {SLOWEST} slowest tests", "", "| seconds | test |", "|---|---|"]
    for nodeid, seconds in sorted(tests, key=lambda item: -item[1])[:SLOWEST]:
        lines.append(f"| {seconds:.1f} | `{nodeid}` |")
    return lines


def tests_csv(phases: list[tuple[str, dict[str, Any]]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["phase", "test", "seconds", "outcome"])
    for title, phase in phases:
        for nodeid, test in sorted(phase["tests"].items()):
            writer.writerow([title.split(":")[0], nodeid, f"{test['seconds']:.3f}", test["outcome"]])
    return out.getvalue()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.support.durations_report IN_FOLDER OUT_FOLDER", file=sys.stderr)
        return 2
    source, out = Path(argv[0]), Path(argv[1])
    try:
        setup = json.loads((source / "setup.json").read_text(encoding="utf-8"))
        phases = [(title, json.loads((source / name).read_text(encoding="utf-8"))) for name, title in PHASES]
    except (OSError, ValueError) as err:
        print(f"error: {source}: {err}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    day = datetime.now(UTC).date().isoformat()
    (out / "README.md").write_text(render(setup, phases, _commit(Path.cwd()), day), encoding="utf-8")
    (out / "tests.csv").write_text(tests_csv(phases), encoding="utf-8")
    print(f"wrote {out / 'README.md'} and {out / 'tests.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
