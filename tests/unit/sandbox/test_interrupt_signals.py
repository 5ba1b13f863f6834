"""sandbox.processes.InterruptSignals: a closed terminal (SIGHUP) stops a run like Ctrl-C does, unless nohup."""

from __future__ import annotations

import signal

import pytest

from triton_gke.sandbox.processes import Interrupted, InterruptSignals


def test_sighup_stops_the_run_unless_nohup_ignored_it() -> None:
    """A closed terminal (SIGHUP) stops a run like Ctrl-C does; under nohup (SIGHUP ignored) it keeps running."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with InterruptSignals().installed():
            signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens

        def outside(_signum: int, _frame: object) -> None:  # stands for the default, which would end pytest
            pass

        signal.signal(signal.SIGHUP, outside)
        with pytest.raises(Interrupted, match="SIGHUP"), InterruptSignals().installed():
            signal.raise_signal(signal.SIGHUP)
        assert signal.getsignal(signal.SIGHUP) is outside  # put back as it was
    finally:
        signal.signal(signal.SIGHUP, previous)
