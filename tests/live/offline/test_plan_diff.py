"""`triton-gke plan-diff` as a process: a missing file and an unknown option, one line."""

from __future__ import annotations

import subprocess
import sys

from tests.support.checkout import PROJECT_DIR
from tests.unit.offline.test_plan_diff import HPA, record, write
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT


def test_the_command_line_refuses_a_missing_file_and_an_unknown_option_in_one_line(tmp_path):
    good = write(tmp_path, "good.json", [record(HPA, "h")])
    cases = {
        "missing.json: no such file": [str(good), str(tmp_path / "missing.json")],
        "unrecognized arguments: --allow-everything": [str(good), str(good), "--allow-everything"],
    }
    for expected, argv in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "triton_gke.offline.plan_diff", *argv],
            cwd=PROJECT_DIR,
            capture_output=True,
            text=True,
        )
        assert done.returncode == EXIT_BAD_INPUT and done.stdout == ""
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
        assert expected in done.stderr
