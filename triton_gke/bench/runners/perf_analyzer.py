"""perf_analyzer (NVIDIA's load tool) as a second opinion on Locust's numbers.

The PyPI package `perf-analyzer` needs glibc 2.38 (Debian 12 has 2.36); the tritonclient 2.51.0
wheel ships a working bin/perf_analyzer. That wheel pins protobuf < 5 and an old
geventhttpclient, so it stays OUT of the project's environment: `pip download --no-deps` fetches
it into build/tools and only the binary is unpacked. It needs libb64.so.0d and libcudart.so.12,
which the nvidia-pytriton wheel (the local tritonserver) already ships under hashed names:
symlinks with the plain names make the loader find them.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

from triton_gke.contracts.paths import tools_dir as default_tools_dir
from triton_gke.sandbox.processes import without_proxies

WHEEL_REQUIREMENT = "tritonclient==2.51.0"
WHEEL_MEMBER = "tritonclient-2.51.0.data/data/bin/perf_analyzer"
LIBRARIES = {"libb64.so.0d": "libb64-*.so.0d", "libcudart.so.12": "libcudart-*.so.12*"}


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer is unavailable or its run failed; the message says why in one line."""


@dataclass(frozen=True)
class Load:
    """What perf_analyzer offers: a fixed concurrency (closed loop) or a request rate (open loop)."""

    concurrency: int | None = None
    request_rate: float | None = None  # requests/s, Poisson arrivals (independent clients)
    # Rate mode without --async sends each request from one of --max-threads threads (default 4 with
    # --request-rate-range), each waiting for its answer: at most 4 in flight, and a request that waits for a
    # thread is timed from when it is sent, not when it was due. --async keeps the arrivals independent.
    # https://github.com/triton-inference-server/client/blob/main/src/c%2B%2B/perf_analyzer/docs/cli.md (--max-threads)
    asynchronous: bool = False

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give either a concurrency or a request rate")

    def describe(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency}"
        return f"{self.request_rate:g} requests/s (Poisson{', async' if self.asynchronous else ''})"


@dataclass(frozen=True)
class PerfResult:
    load: Load
    rps: float  # inferences per second
    p50_ms: float
    p95_ms: float
    server_queue_ms: float
    server_compute_ms: float


def _pytriton_libs() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise PerfAnalyzerError("nvidia-pytriton is not installed: its libraries are needed by perf_analyzer")
    return Path(next(iter(spec.submodule_search_locations))).parent / "nvidia_pytriton.libs"


def ensure_binary(tools_dir: Path | None = None) -> Path:
    """build/tools/perf_analyzer/bin/perf_analyzer of the project folder (the current one, or tools_dir's),
    downloaded and unpacked on first use."""
    tools_dir = tools_dir or default_tools_dir()
    home = tools_dir / "perf_analyzer"
    binary = home / "bin" / "perf_analyzer"
    if not binary.is_file():
        _unpack(_download_wheel(tools_dir), binary)
    _link_libraries(home / "lib")
    return binary


def _download_wheel(tools_dir: Path) -> Path:
    found = sorted(tools_dir.glob("tritonclient-2.51.0-*.whl"))
    if found:
        return found[0]
    tools_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", WHEEL_REQUIREMENT, "-d", str(tools_dir)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    found = sorted(tools_dir.glob("tritonclient-2.51.0-*.whl"))
    if result.returncode or not found:
        last = (result.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise PerfAnalyzerError(f"pip download {WHEEL_REQUIREMENT} failed: {last}")
    return found[0]


def _unpack(wheel: Path, binary: Path) -> None:
    binary.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own: two benchmarks (or test workers) unpacking at once must not write into one file.
    fd, name = tempfile.mkstemp(dir=binary.parent, prefix=f".{binary.name}.", suffix=".partial")
    os.close(fd)
    partial = Path(name)
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(WHEEL_MEMBER) as src, partial.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    except (KeyError, zipfile.BadZipFile) as err:
        partial.unlink(missing_ok=True)
        raise PerfAnalyzerError(f"{wheel.name}: no usable {WHEEL_MEMBER} ({err})") from None
    partial.chmod(0o755)
    partial.replace(binary)


def _link_libraries(lib_dir: Path) -> None:
    lib_dir.mkdir(parents=True, exist_ok=True)
    libs = _pytriton_libs()
    for name, pattern in LIBRARIES.items():
        matches = sorted(libs.glob(pattern))
        if not matches:
            raise PerfAnalyzerError(f"{libs} has no {pattern} (needed by perf_analyzer as {name})")
        link = lib_dir / name
        if link.is_symlink() and os.readlink(link) == str(matches[0]):
            continue  # already right: a perf_analyzer running beside this one keeps its library
        # Made under a name of its own, then renamed over the old link: never a moment without the library.
        staged = lib_dir / f".{name}.{os.getpid()}.{threading.get_ident()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(matches[0])
        staged.replace(link)


MIN_WINDOW_REQUESTS = 20  # per measurement window, so that a window's p95 means something
WINDOW_S = 3  # a window's length at a rate the server keeps up with


def window_requests(request_rate: float) -> int:
    """Answers per window in rate mode: what WINDOW_S holds at `request_rate`, at least MIN_WINDOW_REQUESTS."""
    return max(MIN_WINDOW_REQUESTS, math.ceil(WINDOW_S * request_rate))


def command(
    binary: Path,
    model: str,
    url: str,
    protocol: str,
    load: Load,
    out_csv: Path,
    stability: int,
    window_s: float = WINDOW_S,
) -> list[str]:
    """A short, bounded measurement: 3 windows in a row within `stability` %, at most 6 windows.

    Concurrency mode: windows of `window_s` (WINDOW_S; the tuner's screen takes shorter ones). Rate mode: windows of
    window_requests() answers
    (--measurement-mode=count_windows), not of seconds. perf_analyzer counts a request in the window its answer
    arrives in and fails the run when a window holds none ("No valid requests recorded within time interval",
    inference_profiler.cc SummarizeLatency). A fixed time window fails that way whenever the server answers less
    often than once a window: with --async past the server's capacity the queue grows, the dynamic batcher runs
    batches of max_batch_size, and one such batch of the `original` CPU twin outlasted 3 s on two busy cores. A
    window that ends after N answers always holds them, and lasts about WINDOW_S while the server keeps up."""
    if load.concurrency is not None:
        window = [f"--measurement-interval={round(window_s * 1000)}"]
        load_args = [f"--concurrency-range={load.concurrency}"]
    else:
        load_args = [f"--request-rate-range={load.request_rate:g}", "--request-distribution=poisson"]
        load_args += ["--async"] if load.asynchronous else []
        count = window_requests(load.request_rate)
        window = ["--measurement-mode=count_windows", f"--measurement-request-count={count}"]
    return [
        str(binary),
        "-m",  # short options take their value as the next argument ("-m=x" would name model "=x")
        model,
        "-u",
        url,
        "-i",
        protocol,
        *load_args,
        *window,
        f"--stability-percentage={stability}",
        "--max-trials=6",
        "--percentile=95",
        "-f",
        str(out_csv),
    ]


def run(
    binary: Path, model: str, url: str, protocol: str, load: Load, out_csv: Path, window_s: float = WINDOW_S
) -> PerfResult:
    """Measure. Poisson arrivals at a few requests/s make every window's p95 differ: rate mode
    accepts any spread (stability 100 %). In concurrency mode, busy shared cores may also keep
    three windows in a row from agreeing within 50 %: then it measures again accepting any spread
    (the figures are still perf_analyzer's own)."""
    if load.request_rate is not None:
        return _run(command(binary, model, url, protocol, load, out_csv, stability=100), binary, load)
    try:
        return _run(command(binary, model, url, protocol, load, out_csv, 50, window_s), binary, load)
    except PerfAnalyzerError as err:
        if "stable" not in str(err):
            raise
    return _run(command(binary, model, url, protocol, load, out_csv, 100, window_s), binary, load)


def binary_env(binary: Path) -> dict[str, str]:
    """perf_analyzer's environment: its own libraries, and no proxy between it and the local server."""
    return without_proxies({**os.environ, "LD_LIBRARY_PATH": str(binary.parent.parent / "lib")})


def _run(args: list[str], binary: Path, load: Load) -> PerfResult:
    out_csv = Path(args[args.index("-f") + 1])
    out_csv.unlink(missing_ok=True)  # never read an earlier attempt's figures
    env = binary_env(binary)
    try:
        result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise PerfAnalyzerError("perf_analyzer ran over 300 s") from None
    if result.returncode or not out_csv.is_file():
        lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        raise PerfAnalyzerError(f"perf_analyzer failed: {' '.join(lines[-2:]) or f'exit code {result.returncode}'}")
    return parse_csv(out_csv, load)


def parse_csv(path: Path, load: Load) -> PerfResult:
    """perf_analyzer's -f CSV: one row per load level, latencies in microseconds."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise PerfAnalyzerError(f"{path}: no measurement rows")
    row = rows[-1]
    us = 1000.0
    return PerfResult(
        load=load,
        rps=float(row["Inferences/Second"]),
        p50_ms=float(row["p50 latency"]) / us,
        p95_ms=float(row["p95 latency"]) / us,
        server_queue_ms=float(row["Server Queue"]) / us,
        server_compute_ms=float(row["Server Compute Infer"]) / us,
    )


# ---------------------------------------------------------------- perf_analyzer's own open-loop search


@dataclass(frozen=True)
class RateRange:
    """perf_analyzer's binary search over request rates: from `low` to `high` requests/s, until the
    bracket is narrower than `step` (its --request-rate-range start:end:step with --binary-search,
    https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/perf_analyzer/docs/cli.html)."""

    low: float
    high: float
    step: float

    def __post_init__(self) -> None:
        if not (0 < self.low < self.high and self.step > 0):
            raise ValueError(f"rate range: expected 0 < low < high and step > 0, got {self}")

    def describe(self) -> str:
        return f"binary search {self.low:.3g}-{self.high:.3g} requests/s (Poisson, step {self.step:.2g})"


@dataclass(frozen=True)
class SearchResult:
    """perf_analyzer's answer: the highest request rate whose p95 met the threshold (None: none did)."""

    range: RateRange
    max_rate: float | None
    rps: float | None  # inferences/s it measured at that rate
    p95_ms: float | None
    levels: int  # passing levels it reported


def search_command(
    binary: Path, model: str, url: str, protocol: str, rates: RateRange, slo_ms: float, min_requests: int, out_csv: Path
) -> list[str]:
    """Open loop, Poisson arrivals, asynchronous requests (a rate is not bounded by client threads);
    windows of at least `min_requests` requests (count_windows: long enough at any rate), three of
    them per level, any spread accepted (Poisson windows of a few dozen requests never agree within
    a tight percentage); the search stops a level at p95 > slo_ms."""
    return [
        str(binary),
        "-m",
        model,
        "-u",
        url,
        "-i",
        protocol,
        "--async",
        f"--request-rate-range={rates.low:.4g}:{rates.high:.4g}:{rates.step:.3g}",
        "--binary-search",
        "--request-distribution=poisson",
        f"--latency-threshold={slo_ms:g}",
        "--percentile=95",
        "--measurement-mode=count_windows",
        f"--measurement-request-count={max(min_requests, 20)}",
        "--stability-percentage=999",
        "--max-trials=3",
        "-f",
        str(out_csv),
    ]


def search(
    binary: Path, model: str, url: str, protocol: str, rates: RateRange, slo_ms: float, min_requests: int, out_csv: Path
) -> SearchResult:
    args = search_command(binary, model, url, protocol, rates, slo_ms, min_requests, out_csv)
    out_csv.unlink(missing_ok=True)
    env = binary_env(binary)
    try:
        result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise PerfAnalyzerError("perf_analyzer's search ran over 900 s") from None
    if result.returncode:
        lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        raise PerfAnalyzerError(f"perf_analyzer failed: {' '.join(lines[-2:]) or f'exit code {result.returncode}'}")
    return parse_search_csv(out_csv, rates, slo_ms)


def parse_search_csv(path: Path, rates: RateRange, slo_ms: float) -> SearchResult:
    """The -f CSV of a rate search: one row per level that met the threshold (perf_analyzer leaves the
    failing ones out; checked again here). No file or no row: no rate met it."""
    rows = []
    if path.is_file():
        with path.open(newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if float(r["p95 latency"]) / 1000.0 <= slo_ms]
    if not rows:
        return SearchResult(rates, None, None, None, 0)
    best = max(rows, key=lambda r: float(r["Request Rate"]))
    rate, rps, p95_ms = float(best["Request Rate"]), float(best["Inferences/Second"]), float(best["p95 latency"]) / 1e3
    return SearchResult(rates, rate, rps, p95_ms, len(rows))
