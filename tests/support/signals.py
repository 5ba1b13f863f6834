"""Signals as a terminal session hands them to a command."""

from __future__ import annotations

import signal


def hup_as_in_a_terminal() -> None:
    """preexec_fn: SIGHUP back to its default disposition in the child. Ignored signals stay ignored across fork and
    execve (signal(7): https://man7.org/linux/man-pages/man7/signal.7.html), so a suite started under nohup (or by a
    runner that ignores SIGHUP) handed its commands SIGHUP ignored, and they rightly kept running as nohup asks: the
    SIGHUP tests, about a closed terminal, then failed after 90 s (seen in a `make test` started with nohup)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
