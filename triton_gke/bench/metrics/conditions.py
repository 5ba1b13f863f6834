"""Was the machine quiet? Raw ONNX Runtime before and after a run, load average and CPU steal over it.

A benchmark on a shared machine measures the other work as much as the server: `make bench` on a busy 2-core
machine reported 5.7 req/s where the quiet figure is 27.4. So every run:

- measures a fixed baseline before the first server starts and after the last one stops: BASELINE_SECONDS of
  batch-1 inferences of a fixed small convolutional model (built in memory: the same work on every machine, every
  target and every run) with ONNX Runtime directly, no Triton, on all cores as the CPU twins run it; during each
  baseline, /proc/stat tells how much CPU the OTHER processes used (the machine's busy time less this process's);
- samples the 1-minute load average (/proc/loadavg) every LOAD_INTERVAL_S, and reads the CPU steal ticks of
  /proc/stat at both ends (time the hypervisor gave to other guests: proc(5),
  https://man7.org/linux/man-pages/man5/proc.5.html, the 8th value of the `cpu` line).

A run is NOISY when the baseline drifted (after/before outside DRIFT_TOLERANCE), other processes took more than
OTHERS_MAX_PCT of the machine during a baseline or over the run (the machine's busy ticks less the benchmark's own
CPU time: this process and its reaped children, tritonserver with its python stubs, Locust, perf_analyzer;
resource.getrusage), the load average over the run less the benchmark's own CPU use exceeded OTHERS_LOAD_MAX per
core, or steal exceeded STEAL_MAX_PCT. Its report
says so and its capacity records carry the reasons (bench/reports/record.py: `--record` then needs `--force`).
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from triton_gke.bench.metrics.probes import cpu_count

BASELINE_SECONDS = 2.5
LOAD_INTERVAL_S = 5.0
# Measured on this 2-core VM (AMD EPYC, 2026-12-01), 12 baselines of 2.5 s back to back, three series:
# - other processes ~0 % (/proc/stat), steal 0-3 %: 196-266 inferences/s (median 247), after/before of consecutive
#   baselines 0.80-1.29 (by throughput instead of the median inference: 162-262, 0.65-1.50);
# - another process holding one core (others 50 %), by throughput: 116-155 (median 122), 0.79-1.23.
# The host moves the figure by +-15 % with nothing visible in the guest (it alternates between ~200 and ~250), so
# a tolerance below ~30 % would mark quiet runs: a drift beyond 30 % is the machine changing under the run. The
# busy checks below (others, load, steal) catch the steady contention a drift cannot show.
DRIFT_TOLERANCE = 0.30
# Half a core of 2 taken by others costs the server ~25 % of its capacity: 5x the search's 5 % precision.
OTHERS_MAX_PCT = 25.0
# Runnable tasks beyond the benchmark's own CPU use, per core, averaged over the run. Lenient on purpose: the load
# average also counts the benchmark's own threads waiting for a core (2 ONNX Runtime threads, Locust and Triton's
# front end on 2 cores at saturation), which its CPU use does not show; the CPU accounting above is the exact check.
OTHERS_LOAD_MAX = 1.0
STEAL_MAX_PCT = 5.0  # the search's own precision: more time than that went to other guests


class ProcError(ValueError):
    """A /proc file of unexpected form; one line naming it."""


@dataclass(frozen=True)
class CpuTicks:
    """The `cpu` line of /proc/stat: clock ticks since boot, all cores."""

    busy: int  # user + nice + system + irq + softirq (guest time is inside user and nice)
    total: int  # busy + idle + iowait + steal
    steal: int


def parse_proc_stat(text: str) -> CpuTicks:
    """The first (`cpu`, all cores) line of /proc/stat; ProcError on anything else."""
    first = text.split("\n", 1)[0].split()
    if len(first) < 5 or first[0] != "cpu" or not all(f.isdigit() and f.isascii() for f in first[1:]):
        raise ProcError(f"/proc/stat: first line {' '.join(first)[:60]!r} is not the `cpu` line of proc(5)")
    values = [int(f) for f in first[1:]] + [0] * 8  # kernels before 2.6.11 had no steal column
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    busy = user + nice + system + irq + softirq
    return CpuTicks(busy, busy + idle + iowait + steal, steal)


def parse_loadavg(text: str) -> float:
    """The 1-minute load average, the first field of /proc/loadavg; ProcError otherwise."""
    try:
        value = float(text.split()[0])
    except (IndexError, ValueError):
        raise ProcError(f"/proc/loadavg: {text[:40]!r} does not start with a load average") from None
    if not (value >= 0 and value != float("inf")):
        raise ProcError(f"/proc/loadavg: {value!r} is not a load average")
    return value


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return None


def cpu_ticks() -> CpuTicks | None:
    text = _read("/proc/stat")
    return parse_proc_stat(text) if text is not None else None


def load_1min() -> float | None:
    text = _read("/proc/loadavg")
    return parse_loadavg(text) if text is not None else None


def own_cpu_s() -> float:
    """CPU seconds of this process and its finished children (tritonserver, Locust, perf_analyzer once reaped)."""
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def others_pct(before: CpuTicks, after: CpuTicks, own_s: float) -> float:
    """% of the machine the other processes used between two readings, given this process tree's CPU seconds."""
    ticks = after.total - before.total
    if ticks <= 0:
        return 0.0
    own_ticks = own_s * os.sysconf("SC_CLK_TCK")
    return max(0.0, 100 * (after.busy - before.busy - own_ticks) / ticks)


def steal_pct(before: CpuTicks, after: CpuTicks) -> float:
    ticks = after.total - before.total
    return 100 * (after.steal - before.steal) / ticks if ticks > 0 else 0.0


# ---------------------------------------------------------------- the baseline


def baseline_model() -> bytes:
    """A fixed model: four 3x3 convolutions of 64 channels on 56x56 (ResNet-50's second stage, ~0.9 GFLOP), as
    ONNX bytes. Weights are constants (no randomness): the same work every run."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.full((64, 64, 3, 3), 1e-3, dtype=np.float32), "w")
    nodes, last = [], "x"
    for i in range(4):
        nodes.append(helper.make_node("Conv", [last, "w"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        last = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "baseline",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, 64, 56, 56])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # read by every ONNX Runtime this project pins
    return model.SerializeToString()


@dataclass(frozen=True)
class Baseline:
    inferences_per_s: float
    others_pct: float | None  # % of the machine other processes used meanwhile (None: no /proc/stat)
    steal_pct: float | None


def measure_baseline(seconds: float = BASELINE_SECONDS) -> Baseline:
    """Batch-1 inferences of baseline_model() for `seconds`, ONNX Runtime on all cores (no spinning, as
    bench/runners/raw_ort.py runs the twins): 1 / the median inference time, and the other processes' CPU share over the
    same time."""
    import numpy as np
    import onnxruntime as ort  # the 'local' extra

    options = ort.SessionOptions()
    options.intra_op_num_threads = cpu_count()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    session = ort.InferenceSession(baseline_model(), options, providers=["CPUExecutionProvider"])
    feed = {"x": np.full((1, 64, 56, 56), 0.5, dtype=np.float32)}
    session.run(None, feed)  # warm-up: first-run allocations
    ticks, own, started = cpu_ticks(), own_cpu_s(), time.perf_counter()
    times: list[float] = []
    while time.perf_counter() - started < seconds:
        begun = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - begun)
    after, own = cpu_ticks(), own_cpu_s() - own
    rate = 1 / statistics.median(times)  # the median inference: a few slow wake-ups of ORT's threads do not move it
    if ticks is None or after is None:
        return Baseline(rate, None, None)
    return Baseline(rate, others_pct(ticks, after, own), steal_pct(ticks, after))


# ---------------------------------------------------------------- the run


@dataclass
class RunConditions:
    """What bench/__main__ stores in results.json (`machine.conditions`) and each record quotes."""

    cores: int
    baseline_before: float | None = None  # inferences/s of the baseline model
    baseline_after: float | None = None
    others_pct: float | None = None  # the larger of the two baselines' other-process shares, % of the machine
    others_run_pct: float | None = None  # other processes over the run: machine busy less the benchmark's own, %
    load_average: float | None = None  # mean 1-minute load average over the run
    own_cores: float | None = None  # the benchmark's own CPU use over the run, in cores
    steal_pct: float | None = None  # CPU steal over the run, % of all ticks
    noisy: list[str] = field(default_factory=list)  # why the run is marked; empty: a quiet run

    @property
    def drift(self) -> float | None:
        """after / before - 1."""
        if not self.baseline_before or self.baseline_after is None:
            return None
        return self.baseline_after / self.baseline_before - 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(c: RunConditions) -> list[str]:
    """Why a run's figures cannot be trusted (one short clause each); empty when nothing says so."""
    reasons = []
    drift = c.drift
    if drift is not None and abs(drift) > DRIFT_TOLERANCE:
        reasons.append(
            f"raw onnxruntime baseline drifted {drift:+.0%} ({c.baseline_before:.1f} -> {c.baseline_after:.1f} "
            f"inferences/s; tolerance +-{DRIFT_TOLERANCE:.0%})"
        )
    if c.others_pct is not None and c.others_pct > OTHERS_MAX_PCT:
        reasons.append(
            f"other processes used {c.others_pct:.0f} % of the machine during a baseline (limit {OTHERS_MAX_PCT:g} %)"
        )
    if c.others_run_pct is not None and c.others_run_pct > OTHERS_MAX_PCT:
        reasons.append(
            f"other processes used {c.others_run_pct:.0f} % of the machine during the run (limit {OTHERS_MAX_PCT:g} %)"
        )
    if c.load_average is not None and c.own_cores is not None:
        others = c.load_average - c.own_cores
        if others > OTHERS_LOAD_MAX * c.cores:
            reasons.append(
                f"load average {c.load_average:.2f} on {c.cores} cores, {others:.2f} above the benchmark's own CPU "
                f"use ({c.own_cores:.2f} cores; limit {OTHERS_LOAD_MAX:g} x the cores)"
            )
    if c.steal_pct is not None and c.steal_pct > STEAL_MAX_PCT:
        reasons.append(f"CPU steal {c.steal_pct:.1f} % (limit {STEAL_MAX_PCT:g} %)")
    return reasons


class Watch:
    """The conditions of one run: start() before anything is measured, finish() after the last server stopped.
    A daemon thread samples the load average meanwhile."""

    def __init__(self, baseline_s: float = BASELINE_SECONDS, interval_s: float = LOAD_INTERVAL_S) -> None:
        self.baseline_s, self.interval_s = baseline_s, interval_s
        self.conditions = RunConditions(cores=cpu_count())
        self._loads: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-average", daemon=True)
        self._ticks: CpuTicks | None = None
        self._own = self._wall = 0.0

    def start(self) -> Baseline:
        before = measure_baseline(self.baseline_s)
        self.conditions.baseline_before = round(before.inferences_per_s, 2)
        self._others = [before.others_pct]
        self._ticks, self._own, self._wall = cpu_ticks(), own_cpu_s(), time.monotonic()
        self._thread.start()
        return before

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            load = load_1min()
            if load is not None:
                self._loads.append(load)

    def finish(self) -> RunConditions:
        self._stop.set()
        c = self.conditions
        wall, own, ticks = time.monotonic() - self._wall, own_cpu_s() - self._own, cpu_ticks()
        after = measure_baseline(self.baseline_s)
        c.baseline_after = round(after.inferences_per_s, 2)
        shares = [x for x in (*self._others, after.others_pct) if x is not None]
        c.others_pct = round(max(shares), 1) if shares else None
        c.load_average = round(statistics.mean(self._loads), 2) if self._loads else None
        c.own_cores = round(own / wall, 2) if wall > 0 else None
        if self._ticks and ticks:
            c.others_run_pct = round(others_pct(self._ticks, ticks, own), 1)
            c.steal_pct = round(steal_pct(self._ticks, ticks), 2)
        c.noisy = verdict(c)
        return c
