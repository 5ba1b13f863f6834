"""Arrival processes and load shapes of the load test: pure functions, no Locust, no gevent.

The locustfile imports this file as `arrivals` (Locust puts the locustfile's folder on sys.path
while it imports it; the cluster's ConfigMap carries both files); tests import it as
`loadtest.arrivals`.

An arrival process draws the time to the next request at a given rate (requests/s):
- poisson: independent arrivals, exponential gaps with mean 1/rate (many independent clients; what
  perf_analyzer offers with --request-distribution=poisson,
  https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/perf_analyzer/docs/cli.html);
- constant: a gap of exactly 1/rate;
- trace: recorded gaps, replayed in a loop, in perf_analyzer's --request-intervals format (microseconds,
  one per line), scaled so that their mean rate is the requested rate.
"""

from __future__ import annotations

import math
import os
import random
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

KINDS = ("poisson", "constant", "trace")
MAX_RATE = 1_000_000.0  # requests/s; far beyond one Locust process, a guard against typos
MAX_TRACE_LINES = 10_000_000
MAX_TRACE_BYTES = 128 * 1024 * 1024  # MAX_TRACE_LINES of gaps up to ~12 digits each
MAX_GAP_US = 3_600_000_000  # one hour between two requests: longer is a unit mistake, and the run would send nothing


class ArrivalError(ValueError):
    """A bad arrival setting or trace; the message says what is wrong."""


class ArrivalProcess:
    """Draws gaps between arrivals; one per Locust process (seeded by the caller for tests)."""

    def __init__(self, kind: str, rng: random.Random, trace: Sequence[float] = ()) -> None:
        if kind not in KINDS:
            raise ArrivalError(f"expected one of {', '.join(KINDS)}, got {kind!r}")
        if kind == "trace" and not trace:
            raise ArrivalError("arrival=trace needs a trace with at least one gap")
        self.kind, self.rng, self.trace = kind, rng, tuple(trace)
        self._next = rng.randrange(len(trace)) if trace else 0  # workers replaying one trace start apart
        self._trace_mean = sum(trace) / len(trace) if trace else 0.0

    def gap(self, rate: float) -> float:
        """Seconds to the next arrival at `rate` requests/s (> 0)."""
        if not 0 < rate <= MAX_RATE:
            raise ArrivalError(f"rate must be above 0 and at most {MAX_RATE:g}, got {rate!r}")
        if self.kind == "poisson":
            return self.rng.expovariate(rate)
        if self.kind == "constant":
            return 1.0 / rate
        recorded = self.trace[self._next]
        self._next = (self._next + 1) % len(self.trace)
        return recorded / (self._trace_mean * rate)  # the trace's shape at the requested mean rate


def rescaled_due(due: float, now: float, old_rate: float, new_rate: float) -> float:
    """When the pending arrival falls after the rate changes from old_rate to new_rate at `now`.

    The time still to wait scales by old_rate / new_rate: an unchanged rate changes nothing (a shape or
    the master repeats its rate every second), a constant or trace schedule keeps its phase, and an
    exponential residual stays exponential at the new rate. Drawing the gap afresh from `now` instead
    made a constant 1.5 requests/s, repeated every second, send one request per second."""
    if not (0 < old_rate <= MAX_RATE and 0 < new_rate <= MAX_RATE):
        raise ArrivalError(f"rates must be above 0 and at most {MAX_RATE:g}, got {old_rate!r} and {new_rate!r}")
    if new_rate == old_rate:
        return due
    return now + max(0.0, due - now) * old_rate / new_rate


def arrival_times(process: ArrivalProcess, rate: float, duration_s: float) -> list[float]:
    """Arrival instants in [0, duration_s) at a fixed rate (for tests and previews)."""
    times, t = [], process.gap(rate)
    while t < duration_s:
        times.append(t)
        t += process.gap(rate)
    return times


def read_trace(path: Path) -> tuple[float, ...]:
    """Gaps in seconds from a file of microseconds, one per line (blank lines and # comments skipped)."""
    lines = _read_trace_text(Path(path)).splitlines()
    gaps = []
    for number, line in enumerate(lines[:MAX_TRACE_LINES], start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            micros = float(text)
        except ValueError:
            micros = math.nan
        if not (math.isfinite(micros) and micros >= 0):
            raise ArrivalError(f"{path}:{number}: expected microseconds >= 0, got {text!r}")
        if micros > MAX_GAP_US:
            raise ArrivalError(f"{path}:{number}: gap of {text!r} microseconds is over 1 hour")
        gaps.append(micros / 1e6)
    if not gaps or sum(gaps) <= 0:
        raise ArrivalError(f"{path}: no gaps (expected microseconds, one per line, not all 0)")
    return tuple(gaps)


def _read_trace_text(path: Path) -> str:
    """The trace's text, read as triton_gke/bounded_files.py read_text_file reads every other file (this file ships
    alone in the load generator's ConfigMap and cannot import it): a regular file only (a FIFO would block open(2)
    until a writer comes, /dev/zero never ends; fifo(7), https://man7.org/linux/man-pages/man7/fifo.7.html), checked
    before the open and again after it, at most MAX_TRACE_BYTES, no NUL byte, UTF-8; refused in one line naming it."""
    # bounded_files.one_line's rule, written out: this file ships alone into the Locust image (no other room)
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ArrivalError(f"{shown}: not a regular file; a trace is a text file of microseconds")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ArrivalError(f"{shown}: not a regular file; a trace is a text file of microseconds")
            data = handle.read(MAX_TRACE_BYTES + 1)
    except OSError as err:
        raise ArrivalError(f"cannot read {shown}: {err.strerror or err}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise ArrivalError(f"{shown}: more than {MAX_TRACE_BYTES:,} bytes; not a trace")
    nul = data.find(b"\0")
    if nul >= 0:
        raise ArrivalError(f"{shown}: binary data (a NUL byte at {nul}); not a trace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ArrivalError(f"{shown}: not UTF-8 text (byte {err.start}); not a trace") from None


# ---------------------------------------------------------------- load shapes: steps and ramps


@dataclass(frozen=True)
class Segment:
    """A stretch of a load shape: `start` requests/s rising (or falling) linearly to `end` over `seconds`."""

    start: float
    end: float
    seconds: float


_ITEM = re.compile(r"^\s*([0-9.eE+]+)\s*(?:-\s*([0-9.eE+]+)\s*)?:\s*([0-9.eE+]+)\s*$")


def parse_steps(text: str) -> tuple[Segment, ...]:
    """`RATE:SECONDS` holds and `FROM-TO:SECONDS` ramps, comma-separated, e.g. `10:60,10-40:120`."""
    segments = []
    for item in text.split(","):
        found = _ITEM.match(item)
        try:
            start, end, seconds = (float(found[1]), float(found[2] or found[1]), float(found[3])) if found else (0,) * 3
        except ValueError:
            found = None
        if not found or not all(math.isfinite(v) for v in (start, end, seconds)):
            raise ArrivalError(f"{item.strip()!r}: expected RATE:SECONDS or FROM-TO:SECONDS")
        if not (0 <= start <= MAX_RATE and 0 <= end <= MAX_RATE and seconds > 0):
            raise ArrivalError(f"{item.strip()!r}: rates from 0 to {MAX_RATE:g} requests/s, seconds > 0")
        segments.append(Segment(start, end, seconds))
    return tuple(segments)


def rate_at(segments: Sequence[Segment], elapsed_s: float) -> float | None:
    """The shape's rate `elapsed_s` after the start; None once the last segment is over."""
    for segment in segments:
        if elapsed_s < segment.seconds:
            return segment.start + (segment.end - segment.start) * max(0.0, elapsed_s) / segment.seconds
        elapsed_s -= segment.seconds
    return None


def duration_s(segments: Sequence[Segment]) -> float:
    return sum(s.seconds for s in segments)
