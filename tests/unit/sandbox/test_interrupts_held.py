"""A signal that lands while a process starts is raised once the caller holds the process (sandbox/processes.py
interrupts_held): raised inside Popen, after the child's exec, it left Model Analyzer running (seen once in a
fresh-clone run, tests/live/bench/test_model_analyzer_signals.py).

Signals come from signal.raise_signal, not os.kill(os.getpid()): the kernel may hand a process-directed signal to
any thread (signal(7)), whose handler may then run after the test put the handlers back (CI once printed a stray
KeyboardInterrupt in a later test). raise_signal is raise(3), to this thread, and runs the Python handler before it
returns (CPython signal_raise_signal_impl: PyErr_CheckSignals)."""

from __future__ import annotations

import signal

import pytest

from triton_gke.sandbox.processes import Interrupted, InterruptSignals, interrupts_held


def test_a_signal_while_held_is_raised_after_the_block_and_only_once() -> None:
    started = []
    with InterruptSignals().installed(), pytest.raises(Interrupted) as raised, interrupts_held():
        signal.raise_signal(signal.SIGTERM)  # its Python handler runs before raise_signal returns: inside the block
        signal.raise_signal(signal.SIGINT)  # a second one is remembered, not raised again
        started.append("process")  # what Popen's return would assign
    assert started == ["process"] and raised.value.signum == signal.SIGTERM


def test_without_a_signal_nothing_is_raised_and_nested_holds_release_at_the_outermost() -> None:
    handler = InterruptSignals()
    with handler.installed():
        with interrupts_held(), interrupts_held():
            pass
        with pytest.raises(Interrupted), interrupts_held():
            with interrupts_held():
                signal.raise_signal(signal.SIGINT)
            assert handler.received == signal.SIGINT  # still held: the outer block has not ended


def test_outside_a_hold_the_signal_is_raised_at_once() -> None:
    with InterruptSignals().installed(), pytest.raises(Interrupted):
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes: well before this ends
            pass
        raise AssertionError("not interrupted")


def test_a_signal_between_a_hold_s_last_steps_leaves_no_handler_behind() -> None:
    """Red team: a second signal landing after the depth went to 0 raised at once and left the first handler as the
    held one, so a later run's held signal went to that spent handler and was never raised."""
    from triton_gke.sandbox import processes

    spent = InterruptSignals()
    spent.shielded, spent.received = True, signal.SIGTERM
    processes._HOLD.fired = spent  # what that race leaves
    with InterruptSignals().installed(), pytest.raises(Interrupted) as raised, interrupts_held():
        signal.raise_signal(signal.SIGINT)
        started = "process"
    assert started == "process" and raised.value.signum == signal.SIGINT
    assert processes._HOLD.fired is None and processes._HOLD.depth == 0


def test_a_hold_in_another_thread_holds_nothing() -> None:
    import threading

    from triton_gke.sandbox import processes

    depths = []

    def worker() -> None:
        with interrupts_held():
            depths.append(processes._HOLD.depth)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert depths == [0]
