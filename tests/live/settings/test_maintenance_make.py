"""`make plan` refuses an exclusion GKE would refuse in the middle of `up`, before anything is built or declared."""

from __future__ import annotations

import json

from tests.unit.capacity.test_from_bench import run

# A 31-day NO_UPGRADES exclusion: GKE takes at most 30 (settings/maintenance.py MAX_NO_UPGRADES).
TOO_LONG = "freeze 2026-12-01T00:00:00Z 2027-01-01T00:00:00Z NO_UPGRADES"


def test_make_plan_refuses_a_31_day_no_upgrades_exclusion_in_one_line() -> None:
    args = f"--set 'maintenanceExclusions={json.dumps([TOO_LONG])}'"
    # -o: the venv's set-up is not what is under test (tests/live/cli/test_main.py does the same).
    done = run(
        "make", "--no-print-directory", "-o", "setup", "-o", ".venv/.installed", "plan", "STACK=prod", f"ARGS={args}"
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"error: triton-gke:maintenanceExclusions: '{TOO_LONG}' is not valid; ")
    assert "at most 30 days" in errors[0]
