"""A busy machine on demand: one busy-looping process per core (or --workers N), until killed or --seconds pass.

For reproducing what a shared CI runner or a laptop doing other work does to the suite:

    .venv/bin/python -m tests.support.cpu_hog -- make test   # every core busy while `make test` runs
    .venv/bin/python -m tests.support.cpu_hog --workers 4 --seconds 600 &

The workers are plain processes at normal priority (no nice), so the scheduler shares each core between a worker
and whatever else wants it: a test's own process gets about half a core where it had a whole one. They stop when
the hog stops (SIGTERM, SIGINT, SIGHUP, --seconds) and also when it dies without cleaning up (SIGKILL): each worker
watches its parent. Tests use `hogging(n)`, a context manager that starts the workers and stops them at its end.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.process import BaseProcess

WATCH_EVERY = 200_000  # loop turns between two looks at the parent and the clock (~10 ms of one core)


def cores() -> int:
    """The cores this process may run on (sched_getaffinity), which is what a busy machine is made of."""
    return len(os.sched_getaffinity(0))


def spin(parent: int, until: float | None) -> None:
    """Burn one core until `until` (time.monotonic) or until `parent` is gone (re-parented: getppid changes)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C in the terminal reaches the workers too: just stop
    while os.getppid() == parent and (until is None or time.monotonic() < until):
        for _ in range(WATCH_EVERY):
            pass


def start(workers: int, seconds: float | None = None) -> list[BaseProcess]:
    """`workers` busy processes; they stop by themselves after `seconds` (None: when this process ends)."""
    until = None if seconds is None else time.monotonic() + seconds
    # fork: the workers need nothing but `spin`, and start at once (spawn would import an interpreter each).
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=spin, args=(os.getpid(), until), daemon=True) for _ in range(workers)]
    for process in processes:
        process.start()
    return processes


def stop(processes: list[BaseProcess]) -> None:
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()


@contextlib.contextmanager
def hogging(workers: int | None = None) -> Iterator[list[BaseProcess]]:
    """Every core (or `workers` processes) busy for the length of the block."""
    processes = start(workers or cores())
    try:
        yield processes
    finally:
        stop(processes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cpu_hog", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=cores(), help="busy processes (default: one per core)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until killed)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND: run it, busy until it ends; its status")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.workers < 1 or (args.seconds is not None and not args.seconds > 0):
        parser.error("--workers must be at least 1 and --seconds above 0")

    child: subprocess.Popen[bytes] | None = None

    def finish(signum: int, _frame: object) -> None:
        # With a command running, the command decides when to stop: SIGTERM and SIGHUP are passed on to it (a CI
        # cancel, `timeout`), SIGINT it got from the terminal itself; the hog waits for it and returns its status.
        # Raising here instead would end subprocess.run, which SIGKILLs the command (pytest's children left behind).
        if child is not None and child.poll() is None:
            if signum != signal.SIGINT:
                child.send_signal(signum)
            return
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, finish)
    processes = start(args.workers, args.seconds)
    length = f"for {args.seconds:g} s" if args.seconds else "until killed"
    print(f"cpu_hog: {args.workers} busy processes (pid {os.getpid()}), {length}", file=sys.stderr, flush=True)
    try:
        if command:  # in the foreground: Ctrl-C reaches the command and the hog alike, and both stop
            try:
                child = subprocess.Popen(command)
            except OSError as err:
                print(f"cpu_hog: cannot run {command[0]!r}: {err.strerror}", file=sys.stderr)
                return 127
            code = child.wait()
            return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it
        for process in processes:
            process.join()
    finally:
        stop(processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
