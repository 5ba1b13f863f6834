"""`triton-gke bench model-analyzer` stopped by SIGTERM, SIGINT or SIGHUP stops Model Analyzer: MA runs in a session
of its own (bench/tuners/model_analyzer.py _run), so before the handler a killed command left it and its tritonserver
running (the red team's finding). Model Analyzer itself is a stand-in here (it takes a 150 MB install and minutes):
a process that runs until it is stopped, started by the real command through its real `_run`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.signals import hup_as_in_a_terminal
from triton_gke.sandbox.processes import wait_for

# The command's own main(), with the two steps that need the real MA and a built twin replaced: the "search" starts
# the stand-in through the real _run, which waits on it as on MA.
COMMAND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from triton_gke.bench.runners import runner
    from triton_gke.bench.tuners import model_analyzer as ma

    def search(twins, variant, **kwargs):
        stand_in = Path(sys.argv[1])
        ma._run(stand_in, Path("/dev/null"), stand_in.parent, stand_in.parent / "ma.log", 600)
        raise AssertionError("the stand-in ended by itself")

    runner.build_sandbox_repository = lambda *args: Path("/nonexistent")
    ma.search = search
    sys.exit(ma.main(["--out", sys.argv[2]]))
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["TERM", "INT", "HUP"])
def test_a_signalled_model_analyzer_command_stops_model_analyzer(signum: int, tmp_path: Path) -> None:
    stand_in, pid_file = tmp_path / "model-analyzer", tmp_path / "ma.pid"
    stand_in.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    stand_in.chmod(0o755)
    command = subprocess.Popen(
        [sys.executable, "-c", COMMAND, str(stand_in), str(tmp_path / "out")],
        cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=hup_as_in_a_terminal,
    )  # fmt: skip
    try:
        assert wait_for(lambda: pid_file.is_file() and pid_file.read_text().strip(), timeout_s=60, interval_s=0.1)
        ma_pid = int(pid_file.read_text())
        assert psutil.pid_exists(ma_pid)
        command.send_signal(signum)
        _, err = command.communicate(timeout=90)
        assert command.returncode == 128 + signum, err
        assert err.splitlines()[-1].startswith(f"interrupted by {signal.Signals(signum).name}: stopped Model Analyzer")
        assert wait_for(lambda: not psutil.pid_exists(ma_pid) or psutil.Process(ma_pid).status() == "zombie", 10, 0.1)
    finally:
        command.kill()
        command.wait()
        if pid_file.is_file():  # a failed test leaves no stand-in behind
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
