"""NVIDIA Triton Model Analyzer's own configuration search on a CPU twin; its pick as the project's stack keys.

    pick = search(Path("build/model_repository_cpu"), "original", latency_ms=100, out_dir=Path("ma-run"))
    pick.stack_values()  # {"modelMaxQueueDelayUs": ..., "modelPreferredBatchSize": ..., ...}

Model Analyzer (https://github.com/triton-inference-server/model_analyzer, `triton-model-analyzer` on PyPI) is
installed pinned into its own virtualenv under build/tools/model-analyzer/ (its dependencies, numba, matplotlib,
optuna, cuda-python, tritonclient 2.73 among them, stay out of the project's environment), on first use, like
bench.runners.perf_analyzer.ensure_binary() fetches perf_analyzer. MA_CONSTRAINTS pins everything it resolved to.

How it runs here. The options are MA's (https://github.com/triton-inference-server/model_analyzer/blob/main/docs/
config.md, .../docs/config_search.md, .../docs/launch_modes.md); the source files named below are under
https://github.com/triton-inference-server/model_analyzer/tree/main/model_analyzer/, read in the installed 1.58.0:
- triton_launch_mode `local`: MA starts the nvidia-pytriton wheel's tritonserver itself (triton_server_path), with
  the python backend folder, 127.0.0.1 addresses and the wheel's libraries passed as triton_server_flags and
  triton_server_environment, as sandbox.triton.TritonServer passes them.
- perf_analyzer_path: the tritonclient 2.51.0 perf_analyzer of bench.runners.perf_analyzer. MA starts it with the
  server's triton_server_environment too (record/metrics_manager.py: perf_analyzer.run(env=run_config.
  triton_environment())), so that LD_LIBRARY_PATH names both library folders. The flags MA passes (-m -b -u -i -f
  --verbose-csv --measurement-mode count_windows --collect-metrics --metrics-url --metrics-interval
  --concurrency-range; perf_config.py update_config_from_profile_config) are all perf_analyzer 2.51's: it only warns
  that it finds no GPU metrics ("Unable to parse 'nv_gpu_utilization' metric").
- No GPU: MA's GPU list (gpus: all) comes out empty where numba finds no CUDA device (device/gpu_device_factory.py:
  DCGM is only started when numba.cuda.is_available()); MA then marks the model cpu_only (config_command_profile.py
  _autofill_values) so its variants use KIND_CPU. (dcgm_disable is refused outside triton_launch_mode remote.)
- run_config_search_mode `brute`, automatic (its default for a single model, docs/config_search.md): it first
  measures the model's own configuration ("<model>_config_default"), then sweeps instance_group count
  (run_config_search_min/max_instance_count) x max_batch_size in powers of 2 (…_model_batch_size), with
  dynamic_batching enabled, and for each a concurrency sweep in powers of 2 (…_concurrency): a closed loop
  (perf_analyzer --concurrency-range), one request of batch 1 each. A concurrency sweep stops early once 4 steps
  in a row gain < 5 % throughput (constants.py THROUGHPUT_MINIMUM_GAIN, …_CONSECUTIVE_PARAMETER_TRIES); the
  max_batch_size walk stops once a larger batch brings no more throughput (config/generate/
  automatic_model_config_generator.py _done_walking_max_batch_size: "throughput has plateaued").
  It does not search max_queue_delay_microseconds or preferred_batch_size in this mode: every variant keeps the
  twin's own queue delay.
- constraints: `perf_latency_p<N>: {max: ms}` for N in 90, 95, 99 (config_command_profile.py constraints_scheme;
  the `latency_budget` shorthand always means p99), a whole number of ms; objectives: perf_throughput (MA's
  default). The best is the configuration whose best measurement meeting the constraints has the most throughput
  (result/run_config_result_comparator.py); where none meets them MA still ranks and reports the failing ones.
- Results: export_path/results/metrics-model-inference.csv, one row per measurement (not in MA's ranking order);
  export_path/reports/summaries/<model>/result_summary.html (HTML because wkhtmltopdf is not installed:
  reports/report_factory.py), whose table ranks the configurations, MA's pick first; the variants' config.pbtxt
  under output_model_repository_path/<model>_config_<n>/, copied to out_dir/configs/.
- After the brute search MA measures its top configurations and the default again over the concurrency range
  (brute_plus_binary_parameter_search_run_config_generator.py), binary-searching between the last concurrency that
  met the constraints and the first that did not, down to concurrency 0 when even 1 failed.

The twin's preferred_batch_size is cleared in the copy MA reads: MA's automatic variants keep every other field
of the model's configuration (base_model_config_generator.py _apply_value_to_dict merges `dynamic_batching: {}`
into it), and Triton refuses a preferred size above max_batch_size ("dynamic batching preferred size must be <=
max batch size", triton-inference-server/core src/model_config_utils.cc ValidateModelConfig), so every variant
with max_batch_size below the twin's preferred 64 would fail to load. Without one the dynamic batcher forms "batches
as large as possible up to the maximum batch size" (https://docs.nvidia.com/deeplearning/triton-inference-server/
user-guide/docs/batcher.html#dynamic-batcher): the same as the twin's preferred = max_batch_size = 64.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import one_line, parse_json, read_text_file
from triton_gke.contracts.naming import MODEL_NAME_RE
from triton_gke.contracts.paths import MODEL_ANALYZER_CONSTRAINTS
from triton_gke.contracts.paths import tools_dir as default_tools_dir
from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.model_repo.sync_source import CONFIG_MAX_BYTES
from triton_gke.sandbox.processes import interrupts_held, without_proxies

if TYPE_CHECKING:
    from triton_gke.bench.command import BenchParser

MA_REQUIREMENT = "triton-model-analyzer==1.58.0"
MA_CONSTRAINTS = MODEL_ANALYZER_CONSTRAINTS
PERCENTILES = (90, 95, 99)  # the latency constraints MA accepts besides avg (constraints_scheme)
STACK_KEYS = ("modelMaxQueueDelayUs", "modelPreferredBatchSize", "modelMaxBatchSize", "modelInstanceCount")
# Model config field bounds (model_repo.settings.FIELD_MAXIMUM): int32 sizes and counts, a uint64 delay.
INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1
INFERENCE_CSV = "metrics-model-inference.csv"
SUMMARY_HTML = "result_summary.html"
# The command's options for SearchLimits' fields (its LimitError names the field).
LIMIT_OPTIONS = {"max_concurrency": "--max-concurrency", "max_instance_count": "--max-instances",
                 "max_model_batch_size": "--max-batch"}  # fmt: skip
CONFIG_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")  # MA's configuration names: no path, no ".."
PICK_JSON = "pick.json"  # what search() asked for and how long it took, beside MA's own files (load_pick)
# Caps for MA's files: a few KB each in real runs (tests/unit/bench/fixtures/model_analyzer/), far below these.
SUMMARY_MAX_BYTES = 16 << 20  # the HTML embeds its plots as base64 images
INFERENCE_CSV_MAX_BYTES = 16 << 20
PICK_MAX_BYTES = 64 << 10


class ModelAnalyzerError(RuntimeError):
    """Model Analyzer could not be installed, run or read; the message says why in one line."""


class LimitError(ModelAnalyzerError):
    """A search limit out of range; `field` names it (the command line names its option instead)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


@dataclass(frozen=True)
class SearchLimits:
    """The search space of MA's automatic brute search (its run_config_search_* options) and the wall clock.

    The defaults fit the `original` CPU twin into ~5-15 minutes on 2 shared cores (two runs on 2026-12-02: 5.7 min
    on a quiet machine, 13.5 min at a load average of ~4.8): the default configuration and up to 2 instances x
    max_batch_size 1, 2, 4, each at concurrency 1, 2, 4 (its p95 meets 100 ms at 1 or 2 only), plus MA's closing
    sweep of its best three. MA's own defaults (1-5 instances, batch 1-128, concurrency 1-1024) would take hours."""

    max_concurrency: int = 4
    max_instance_count: int = 2
    max_model_batch_size: int = 4
    min_model_batch_size: int = 1
    budget_s: float = 20 * 60  # a hard stop: MA is interrupted past it and the search fails

    def __post_init__(self) -> None:
        for name in ("max_concurrency", "max_instance_count", "max_model_batch_size", "min_model_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
                raise LimitError(name, f"expected a whole number from 1 to 1024, got {value!r}")
        if self.min_model_batch_size > self.max_model_batch_size:
            raise LimitError(
                "min_model_batch_size",
                f"{self.min_model_batch_size} exceeds max_model_batch_size {self.max_model_batch_size}",
            )
        if not 60 <= self.budget_s <= 24 * 3600:  # NaN fails this too
            raise LimitError("budget_s", f"expected seconds from 60 to 86400, got {self.budget_s!r}")


@dataclass(frozen=True)
class Measurement:
    """One row of MA's inference table: a configuration at one concurrency (latencies in ms)."""

    config_name: str
    concurrency: int  # perf_analyzer --concurrency-range (0: see _measurement)
    throughput: float  # inferences/s (the table rounds to 0.1)
    latency_ms: dict[int, float]  # percentile -> ms, the ones MA wrote
    satisfies: bool


@dataclass(frozen=True)
class Pick:
    """MA's best configuration, as the stack's keys, with MA's own figures for it and for the default."""

    config_name: str
    max_queue_delay_us: int
    preferred_batch_size: int
    max_batch_size: int
    instance_count: int
    best: Measurement  # MA's best measurement of that configuration
    default: Measurement | None  # MA's best measurement of the model's own configuration
    satisfies_constraints: bool
    percentile: int
    latency_ms: int
    measurements: int
    configurations: int
    search_s: float | None = None
    out_dir: Path | None = None
    variant: str = ""  # the model searched (pick.json's variant)

    def stack_values(self) -> dict[str, int]:
        values = (self.max_queue_delay_us, self.preferred_batch_size, self.max_batch_size, self.instance_count)
        return dict(zip(STACK_KEYS, values, strict=True))

    def describe(self) -> str:
        latency = self.best.latency_ms.get(self.percentile)
        shown = "n/a" if latency is None else f"{latency:.1f} ms"
        verdict = "meets" if self.satisfies_constraints else "does NOT meet"
        return (
            f"{one_line(self.config_name)}: delay {self.max_queue_delay_us} us, batch {self.preferred_batch_size}/"
            f"{self.max_batch_size}, {self.instance_count} instance(s); {self.best.throughput:.2f} infer/s at "
            f"concurrency {self.best.concurrency}, p{self.percentile} {shown} ({verdict} p{self.percentile} <= "
            f"{self.latency_ms} ms)"
        )


# ---------------------------------------------------------------- install


def tools_home(tools_dir: Path | None = None) -> Path:
    return (tools_dir or default_tools_dir()) / "model-analyzer"


def ensure_installed(tools_dir: Path | None = None) -> Path:
    """build/tools/model-analyzer/venv/bin/model-analyzer, installed on first use (pip, pinned by MA_CONSTRAINTS).

    A marker names the requirement and the constraints' hash: when either changes, the install is redone."""
    home = tools_home(tools_dir)
    venv = home / "venv"
    binary = venv / "bin" / "model-analyzer"
    marker = home / "installed.txt"
    if not MA_CONSTRAINTS.is_file():  # never an unpinned install (a wheel of the project without its data file)
        raise ModelAnalyzerError(f"{MA_CONSTRAINTS}: missing; it pins Model Analyzer's dependencies")
    wanted = f"{MA_REQUIREMENT} {_constraints_hash()}\n"
    if binary.is_file() and marker.is_file() and marker.read_text() == wanted:
        return binary
    home.mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "python").is_file():
        _pip_step([sys.executable, "-m", "venv", str(venv)], "python -m venv")
    command = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _pip_step([*command, MA_REQUIREMENT, "-c", str(MA_CONSTRAINTS)], f"pip install {MA_REQUIREMENT}")
    if not binary.is_file():
        raise ModelAnalyzerError(f"pip install {MA_REQUIREMENT} left no {binary}")
    marker.write_text(wanted)
    return binary


def _constraints_hash() -> str:
    return hashlib.sha256(MA_CONSTRAINTS.read_bytes()).hexdigest()[:16]


def _pip_step(command: list[str], what: str) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise ModelAnalyzerError(f"{what}: ran over 30 minutes") from None
    if result.returncode:
        last = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        raise ModelAnalyzerError(f"{what} failed: {last}")


# ---------------------------------------------------------------- inputs


def check_inputs(repository: Path, variant: str, latency_ms: int, percentile: int) -> Path:
    """The twin folder repository/variant, checked before anything is installed or started."""
    if isinstance(latency_ms, bool) or not isinstance(latency_ms, int) or not 1 <= latency_ms <= MAX_SLO_LATENCY_MS:
        # MA's constraint takes whole milliseconds (constraints_scheme: ConfigPrimitive(int)); the ceiling is the
        # stack's SLO bound (contracts/slo.py), so an SLO the stack accepts is one MA can be tuned for.
        raise ModelAnalyzerError(
            f"latency_ms: expected whole milliseconds from 1 to {MAX_SLO_LATENCY_MS}, got {latency_ms!r}"
        )
    if percentile not in PERCENTILES:
        raise ModelAnalyzerError(f"percentile: MA constrains p90, p95 or p99 latency, got {percentile!r}")
    if not variant or "/" in variant or variant in (".", ".."):
        raise ModelAnalyzerError(f"variant {variant!r}: expected a model folder name")
    twin = Path(repository) / variant
    if not (twin / "config.pbtxt").is_file():
        raise ModelAnalyzerError(f"{twin}: no config.pbtxt (build the CPU twins with `triton-gke model-repo`)")
    return twin


# ---------------------------------------------------------------- MA's configuration


@dataclass(frozen=True)
class Endpoints:
    http: int
    grpc: int
    metrics: int


# The tritonserver flags MA sets itself in local launch mode, over its triton_server_flags
# (model_analyzer/triton/server/server_factory.py _get_local_server_handle: model-repository, strict-model-config,
# the three ports from the endpoints, model-control-mode explicit, metrics-interval-ms).
MA_OWN_FLAGS = frozenset(
    {"model-repository", "strict-model-config", "http-port", "grpc-port", "metrics-port", "model-control-mode"}
    | {"metrics-interval-ms"}
)


def model_analyzer_flags(backends: Path, shm_prefix: str) -> dict[str, str]:
    """MA's triton_server_flags: the local flags every wheel tritonserver starts with (sandbox.triton wheel_flags),
    in MA's spelling. MA keeps one value per flag (triton/server/server_config.py TritonServerConfig: a dict filled by
    update_config, written as --flag=value by to_cli_string), so a repeatable flag may carry one value here; a flag
    MA sets itself would be replaced without a word, so it is refused."""
    from triton_gke.sandbox.triton import wheel_flags

    flags = wheel_flags(backends, shm_prefix)
    if MA_OWN_FLAGS & set(flags):
        raise ValueError(f"Model Analyzer sets these flags itself: {', '.join(sorted(MA_OWN_FLAGS & set(flags)))}")
    single = {flag: value if isinstance(value, str) else _one(flag, value) for flag, value in flags.items()}
    return {flag.replace("-", "_"): value for flag, value in single.items()}


def _one(flag: str, values: tuple[str, ...]) -> str:
    if len(values) != 1:
        raise ValueError(f"Model Analyzer passes one value per tritonserver flag; {flag} has {len(values)}")
    return values[0]


def profile_config(
    *,
    model: str,
    repository: Path,
    workdir: Path,
    out_dir: Path,
    latency_ms: int,
    percentile: int,
    limits: SearchLimits,
    ports: Endpoints,
    server: Mapping[str, str],
) -> dict[str, Any]:
    """MA's profile configuration (YAML; written as JSON, which YAML reads). `server`: tritonserver's path, its
    backend folder, library folder, PATH and shm prefix."""
    return {
        "model_repository": str(repository),
        "profile_models": {model: {"cpu_only": True}},
        "triton_launch_mode": "local",
        "triton_server_path": server["binary"],
        "triton_server_flags": model_analyzer_flags(Path(server["backends"]), server["shm_prefix"]),
        "triton_server_environment": {
            "LD_LIBRARY_PATH": server["libraries"],  # the wheel's, then perf_analyzer's plain-named links
            "PATH": server["path"],
            "TMPDIR": str(workdir / "tmp"),
        },
        "triton_http_endpoint": f"127.0.0.1:{ports.http}",
        "triton_grpc_endpoint": f"127.0.0.1:{ports.grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{ports.metrics}/metrics",
        "triton_output_path": str(out_dir / "tritonserver.log"),
        "perf_analyzer_path": server["perf_analyzer"],
        "perf_output": True,
        "perf_output_path": str(out_dir / "perf_analyzer.log"),
        "run_config_search_mode": "brute",
        "run_config_search_min_concurrency": 1,
        "run_config_search_max_concurrency": limits.max_concurrency,
        "run_config_search_min_instance_count": 1,
        "run_config_search_max_instance_count": limits.max_instance_count,
        "run_config_search_min_model_batch_size": limits.min_model_batch_size,
        "run_config_search_max_model_batch_size": limits.max_model_batch_size,
        "objectives": {"perf_throughput": 10},
        "constraints": {f"perf_latency_p{percentile}": {"max": latency_ms}},
        "inference_output_fields": [
            "model_name",
            "batch_size",
            "concurrency",
            "model_config_path",
            "instance_group",
            "max_batch_size",
            "satisfies_constraints",
            "perf_throughput",
            "perf_latency_p90",
            "perf_latency_p95",
            "perf_latency_p99",
            "perf_server_queue",
            "perf_server_compute_infer",
        ],
        "checkpoint_directory": str(out_dir / "checkpoints"),  # every measurement, JSON: kept with the tables
        "output_model_repository_path": str(workdir / "output_model_repository"),
        "override_output_model_repository": True,
        "export_path": str(out_dir),
        "skip_detailed_reports": True,
    }


def ma_input_twin(twin: Path, root: Path) -> Path:
    """root/<variant>: the twin with preferred_batch_size cleared (see the module's docstring), ONNX hard-linked."""
    from triton_gke.model_repo.cpu_twin import edited_copy

    def clear_preferred(config: Any) -> None:
        del config.dynamic_batching.preferred_batch_size[:]

    return edited_copy(twin, root / twin.name, clear_preferred, "Model Analyzer's input: no preferred batch size")


# ---------------------------------------------------------------- the run


def search(
    repository: Path,
    variant: str = "original",
    *,
    latency_ms: int = 100,
    percentile: int = 95,
    limits: SearchLimits | None = None,
    out_dir: Path,
    tools_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> Pick:
    """Run MA's search on the CPU twin repository/variant under p<percentile> <= latency_ms; return its pick.

    MA's files (its CSV table, HTML summary, plots, checkpoint, log, perf_analyzer's and tritonserver's logs, and
    every variant's config.pbtxt in configs/) land in out_dir (~300 KB); its model copies stay in a temporary
    folder, removed with whatever MA left running there."""
    from triton_gke.bench.runners import perf_analyzer
    from triton_gke.sandbox.processes import free_port
    from triton_gke.sandbox.triton_wheel import TritonStartError, library_dir, prepare_backends, tritonserver_binary

    limits = limits or SearchLimits()
    twin = check_inputs(repository, variant, latency_ms, percentile)
    out_dir = Path(out_dir).absolute()  # MA runs in a folder of its own: every path it is given is absolute
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ModelAnalyzerError(f"{out_dir}: not empty; MA writes its results into a new or empty folder")
    ma = ensure_installed(tools_dir)
    try:
        pa = perf_analyzer.ensure_binary(tools_dir)
    except perf_analyzer.PerfAnalyzerError as err:
        raise ModelAnalyzerError(str(err)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="model-analyzer-"))
    try:
        (workdir / "tmp").mkdir()
        try:
            backends = prepare_backends(workdir / "backends")
            server = {
                "binary": str(tritonserver_binary()),
                "backends": str(backends),
                "libraries": os.pathsep.join([str(library_dir()), str(pa.parent.parent / "lib")]),
                "path": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
                "shm_prefix": f"model_analyzer_{os.getpid()}_",
                "perf_analyzer": str(pa),
            }
        except TritonStartError as err:
            raise ModelAnalyzerError(str(err)) from None
        ma_input_twin(twin, workdir / "repository")
        ports = Endpoints(free_port(), free_port(), free_port())
        config = profile_config(
            model=variant,
            repository=workdir / "repository",
            workdir=workdir,
            out_dir=out_dir,
            latency_ms=latency_ms,
            percentile=percentile,
            limits=limits,
            ports=ports,
            server=server,
        )
        config_path = out_dir / "config.yaml"
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        log(f"Model Analyzer: brute search of {variant} at p{percentile} <= {latency_ms} ms, log in {out_dir}")
        started = time.monotonic()
        _run(ma, config_path, workdir, out_dir / "model_analyzer.log", limits.budget_s)
        search_s = time.monotonic() - started
        _keep_configs(workdir / "output_model_repository", out_dir)
        drop_unmeasured_plots(out_dir)
        pick = parse_results(out_dir, variant, percentile, latency_ms)
        asked = {"variant": variant, "percentile": percentile, "latency_ms": latency_ms, "search_s": round(search_s, 1)}
        (out_dir / PICK_JSON).write_text(json.dumps({**asked, "limits": asdict(limits)}, indent=2) + "\n")
        return replace(pick, search_s=asked["search_s"], out_dir=out_dir)
    finally:
        _stop_leftovers(workdir)
        shutil.rmtree(workdir, ignore_errors=True)


# MA's "simple" plots of a CPU-only model include RAM vs latency (cpu_used_ram). MA collects CPU metrics only
# with collect_cpu_metrics (off by default; its log says "One or more models are running on the CPU, but CPU
# metric(s) are not being collected"), so that plot draws every point at 0 MB: values never measured, not data.
UNMEASURED_PLOTS = ("cpu_mem_v_latency.png",)
PLOTS_NOTE = (
    "# Model Analyzer's plots\n\n"
    "`throughput_v_latency.png` is MA's own. Its CPU memory plot (`cpu_mem_v_latency.png`) is removed after each "
    'run: MA collects CPU metrics only with `collect_cpu_metrics` (off here; its log says "CPU metric(s) are not '
    'being collected"), so every point of that plot was 0 MB, a value never measured, and there is no GPU whose '
    "memory it could show. MA's HTML summary still embeds it.\n"
)


def drop_unmeasured_plots(out_dir: Path) -> list[Path]:
    """Remove MA's plots of metrics it did not collect (UNMEASURED_PLOTS) from out_dir/plots/, leaving a note
    there that says why; returns what was removed."""
    plots = out_dir / "plots"
    removed = sorted(p for name in UNMEASURED_PLOTS for p in plots.rglob(name) if p.is_file())
    for path in removed:
        path.unlink()
    if plots.is_dir():
        (plots / "README.md").write_text(PLOTS_NOTE, encoding="utf-8")
    return removed


def _run(ma: Path, config: Path, workdir: Path, log_path: Path, budget_s: float) -> None:
    """`model-analyzer -m online profile -f config`, in workdir (perf_analyzer writes its CSV into the current
    folder), within budget_s: past it SIGINT (MA stops its server and saves a checkpoint), then SIGKILL."""
    env = without_proxies(dict(os.environ))
    command = [str(ma), "-m", "online", "profile", "-f", str(config)]
    with log_path.open("wb") as log:
        process: subprocess.Popen[bytes] | None = None
        try:
            with interrupts_held():  # a signal during the start is raised here, with `process` ours to stop
                process = subprocess.Popen(
                    command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            code = process.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            _interrupt(process)
            raise ModelAnalyzerError(
                f"Model Analyzer did not finish within {budget_s / 60:.0f} min (stopped it; see {log_path}): "
                "lower the search limits or raise the budget"
            ) from None
        except BaseException:
            if process is not None:
                _interrupt(process)
            raise
    if code:
        raise ModelAnalyzerError(f"Model Analyzer failed (exit code {code}): {_last_error(log_path)}")


def _interrupt(process: subprocess.Popen[bytes]) -> None:
    """SIGINT as a user's Ctrl-C (MA's handler ends the current run and stops its server), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _stop_leftovers(workdir: Path) -> None:
    """SIGKILL what MA started in workdir and left running (tritonserver and perf_analyzer get sessions of their
    own: server_local.py, perf_analyzer.py Popen(start_new_session=True)): processes whose cwd is workdir."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(proc / "cwd")) == workdir:
                os.kill(int(proc.name), signal.SIGKILL)


def _last_error(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "exception" in line.lower()]
    return ((errors or lines or ["no output"])[-1])[:300]


def _keep_configs(variants: Path, out_dir: Path) -> None:
    """Every variant's config.pbtxt into out_dir/configs/<name>.config.pbtxt (a few KB; the model copies go)."""
    kept = out_dir / "configs"
    kept.mkdir(exist_ok=True)
    for config in sorted(variants.glob("*/config.pbtxt")):
        shutil.copyfile(config, kept / f"{config.parent.name}.config.pbtxt")


# ---------------------------------------------------------------- reading MA's results


def load_pick(out_dir: Path) -> Pick:
    """The pick of an earlier search() from its out_dir: pick.json says what was asked, MA's files say the rest."""
    path = Path(out_dir) / PICK_JSON
    asked = parse_json(read_text_file(path, PICK_MAX_BYTES, "a Model Analyzer run's pick.json", ModelAnalyzerError),
                       path, ModelAnalyzerError)  # fmt: skip
    fields = {"variant": str, "percentile": int, "latency_ms": int, "search_s": (int, float)}
    if not isinstance(asked, dict) or any(
        isinstance(asked.get(k), bool) or not isinstance(asked.get(k), t) for k, t in fields.items()
    ):
        raise ModelAnalyzerError(f"{path}: not a Model Analyzer run's pick.json (variant, percentile, latency_ms)")
    if not 0 <= asked["search_s"] < math.inf:  # it is shown as minutes beside the tuner's: no inf, NaN or negative
        raise ModelAnalyzerError(f"{path}: search_s is the search's seconds, got {asked['search_s']!r}")
    if not MODEL_NAME_RE.fullmatch(asked["variant"]):  # it names MA's folders under out_dir: no path, no ".."
        raise ModelAnalyzerError(f"{path}: variant {one_line(asked['variant'])[:80]!r} is not a model name")
    pick = parse_results(Path(out_dir), asked["variant"], asked["percentile"], asked["latency_ms"])
    return replace(pick, search_s=float(asked["search_s"]), out_dir=Path(out_dir), variant=asked["variant"])


def parse_results(export_dir: Path, model: str, percentile: int, latency_ms: int) -> Pick:
    """MA's pick: the first configuration of its summary report (MA's ranking), that configuration's measurement
    the report shows (found in the inference table by its throughput) and its config.pbtxt (configs/, as search()
    keeps them). The inference table is NOT in MA's order (seen in a real run: failing configurations with more
    throughput came first), so the summary decides."""
    export_dir = Path(export_dir)
    ranked = read_summary(export_dir / "reports" / "summaries" / model / SUMMARY_HTML)
    rows = read_inference_csv(export_dir / "results" / INFERENCE_CSV, model)
    name, throughput = ranked[0]
    summary = export_dir / "reports" / "summaries" / model / SUMMARY_HTML
    if not CONFIG_NAME.fullmatch(name):  # MA's <model>_config_<n|default>: it names a file under configs/
        raise ModelAnalyzerError(f"{summary}: the pick {one_line(name)[:80]!r} is not a configuration name")
    best = shown_measurement(rows, name, throughput)
    config_path = export_dir / "configs" / f"{name}.config.pbtxt"
    if not config_path.is_file():
        raise ModelAnalyzerError(f"MA's pick {name}: no {config_path}")
    config = read_config(config_path)  # its errors name the file
    try:
        keys = stack_keys(config)
    except ModelAnalyzerError as err:
        raise ModelAnalyzerError(f"{config_path}: {err}") from None
    default_name = f"{model}_config_default"
    shown = dict(ranked)
    default = shown_measurement(rows, default_name, shown[default_name]) if default_name in shown else None
    return Pick(
        config_name=name,
        **keys,
        best=best,
        default=default,
        satisfies_constraints=best.satisfies,
        percentile=percentile,
        latency_ms=latency_ms,
        measurements=len(rows),
        configurations=len({r.config_name for r in rows}),
    )


class _SummaryTable(HTMLParser):
    """The rows of the table in MA's summary report (reports/report_manager.py _build_summary_table)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def read_summary(path: Path) -> list[tuple[str, float]]:
    """(configuration, throughput) per row of MA's summary table, best first: "each configuration at the
    measurement that optimizes the desired metrics under the given constraints"."""
    text = read_text_file(path, SUMMARY_MAX_BYTES, "MA's summary report", ModelAnalyzerError)
    table = _SummaryTable()
    table.feed(text)
    header = next((row for row in table.rows if "Model Config Name" in row), None)
    if header is None or "Throughput (infer/sec)" not in header:
        raise ModelAnalyzerError(f"{path}: no summary table (not MA's result_summary.html?)")
    name_at, throughput_at = header.index("Model Config Name"), header.index("Throughput (infer/sec)")
    ranked = []
    for row in table.rows[table.rows.index(header) + 1 :]:
        try:
            ranked.append((row[name_at], float(row[throughput_at])))
        except (IndexError, ValueError):
            raise ModelAnalyzerError(f"{path}: a summary row MA never writes: {row[:3]}") from None
    if not ranked:
        raise ModelAnalyzerError(f"{path}: the summary table names no configuration")
    return ranked


def shown_measurement(rows: list[Measurement], name: str, throughput: float) -> Measurement:
    """The row of configuration `name` the summary shows: the nearest throughput (the table rounds to 0.1), a
    row meeting the constraints first on a tie."""
    mine = [r for r in rows if r.config_name == name]
    if not mine:
        raise ModelAnalyzerError(f"MA's summary names {name}, which its inference table does not hold")
    return min(mine, key=lambda r: (round(abs(r.throughput - throughput), 6), not r.satisfies))


# MA's column titles: result_table_manager.py headers, and each record's header() (record/types/*.py).
_COLUMNS = {
    "config": "Model Config Path",
    "concurrency": "Concurrency",
    "satisfies": "Satisfies Constraints",
    "throughput": "Throughput (infer/sec)",
}
_LATENCY_COLUMNS = {90: "p90 Latency (ms)", 95: "p95 Latency (ms)", 99: "p99 Latency (ms)"}


def read_inference_csv(path: Path, model: str) -> list[Measurement]:
    """MA's metrics-model-inference.csv: the rows of `model`, in MA's order (best configuration first)."""
    text = read_text_file(path, INFERENCE_CSV_MAX_BYTES, "MA's inference table", ModelAnalyzerError)
    try:
        # restval "": a short row's missing cells read as empty, never None
        table = list(csv.DictReader(io.StringIO(text, newline=""), restval=""))
    except csv.Error as err:  # e.g. a field over the csv module's 131,072-character limit
        raise ModelAnalyzerError(f"{path}: not MA's inference table ({err})") from None
    missing = [title for title in _COLUMNS.values() if table and title not in table[0]]
    if missing:
        raise ModelAnalyzerError(f"{path}: no column {missing[0]!r} (not MA's inference table?)")
    rows = [_measurement(path, row) for row in table if (row.get("Model") or "").strip() == model]
    if not rows:
        raise ModelAnalyzerError(f"{path}: no measurement of model {model!r}")
    return rows


def _measurement(path: Path, row: dict[str, str]) -> Measurement:
    try:
        latencies = {p: float(row[t]) for p, t in _LATENCY_COLUMNS.items() if (row.get(t) or "").strip()}
        concurrency = int(row[_COLUMNS["concurrency"]])
        throughput = float(row[_COLUMNS["throughput"]])
    except (TypeError, ValueError) as err:
        raise ModelAnalyzerError(f"{path}: a row MA's tables never hold ({err})") from None
    # Concurrency 0 is real: MA's binary search between 0 and a first concurrency that already failed the
    # constraints measures it (result/parameter_search.py _was_constraint_violated: last passing parameter 0).
    if not all(math.isfinite(v) and v >= 0 for v in (throughput, *latencies.values())) or concurrency < 0:
        raise ModelAnalyzerError(f"{path}: a negative or non-finite figure in row {row[_COLUMNS['config']]!r}")
    return Measurement(
        config_name=row[_COLUMNS["config"]].strip(),
        concurrency=concurrency,
        throughput=throughput,
        latency_ms=latencies,
        satisfies=row[_COLUMNS["satisfies"]].strip().lower() == "yes",
    )


def read_config(path: Path) -> mc.ModelConfig:
    text = read_text_file(path, CONFIG_MAX_BYTES, "a Triton model configuration", ModelAnalyzerError)
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as err:
        raise ModelAnalyzerError(f"{path}: not a readable Triton model configuration ({err})") from None


def stack_keys(config: mc.ModelConfig) -> dict[str, int]:
    """A model configuration as the project's four serving keys (Pulumi.yaml; settings/serving.py bounds them).

    Triton's defaults fill what MA left out: no max_queue_delay_microseconds is 0 ("will not delay when forming
    batches"), no preferred_batch_size means batches "as large as possible up to the maximum batch size"
    (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/batcher.html#dynamic-batcher):
    modelPreferredBatchSize = max_batch_size. Several preferred sizes: the batcher forms the largest it can
    (same page), and the stack holds one: the largest. Instances: all groups' counts (KIND_CPU on the twin)."""
    name = config.name or "the model"
    if not config.HasField("dynamic_batching"):
        raise ModelAnalyzerError(f"{name}: no dynamic_batching; the stack's keys always enable it")
    if not 1 <= config.max_batch_size <= INT32_MAX:
        raise ModelAnalyzerError(f"{name}: max_batch_size {config.max_batch_size}: expected 1 to {INT32_MAX}")
    batching = config.dynamic_batching
    preferred = max(batching.preferred_batch_size, default=config.max_batch_size)
    if not 1 <= preferred <= config.max_batch_size:
        raise ModelAnalyzerError(
            f"{name}: preferred_batch_size {preferred}: expected 1 to max_batch_size {config.max_batch_size}"
        )
    counts = [group.count or 1 for group in config.instance_group] or [1]  # count 0 or no group: Triton's one
    instances = sum(counts)
    if instances > INT32_MAX:
        raise ModelAnalyzerError(f"{name}: {instances} instances: expected at most {INT32_MAX}")
    return {
        "max_queue_delay_us": int(batching.max_queue_delay_microseconds),
        "preferred_batch_size": int(preferred),
        "max_batch_size": int(config.max_batch_size),
        "instance_count": int(instances),
    }


# ---------------------------------------------------------------- triton-gke bench model-analyzer

PROG = "triton-gke bench model-analyzer"


OUT_PREFIX = "model-analyzer-"  # --out's default: results/bench/model-analyzer-<stack>-<date>


def main(argv: list[str] | None = None) -> int:
    """Model Analyzer's search on the stack's CPU twin at the stack's SLO; its pick and `pulumi config set` lines.
    SIGINT, SIGTERM or SIGHUP stop MA and what it started (its own session would outlive us) and exit 128 + N."""
    from triton_gke.bench import command  # the runner's modules: only when the command runs

    return command.run(
        argv, _main, stopped="stopped Model Analyzer and the servers it started", refuse=(ModelAnalyzerError,)
    )


def parser() -> BenchParser:
    from triton_gke.bench import command

    p = command.BenchParser(
        prog=PROG,
        description="Run Triton Model Analyzer's own configuration search (closed loop, perf_analyzer concurrency "
        "mode) on the stack's CPU twin at p95 <= sloLatencyMs; writes its files and pick.json into --out.",
        epilog="Exit 0 done, 2 bad input or Model Analyzer failed.",
    )
    p.add_stack("variant and SLO")
    p.add_variant()
    p.add_argument("--max-concurrency", type=int, default=SearchLimits.max_concurrency)
    p.add_argument("--max-instances", type=int, default=SearchLimits.max_instance_count)
    p.add_argument("--max-batch", type=int, default=SearchLimits.max_model_batch_size)
    p.add_argument("--budget-minutes", type=float, default=SearchLimits.budget_s / 60, help="hard stop (20)")
    p.add_out(OUT_PREFIX, new_or_empty=True)
    p.add_build_dir()
    return p


def _main(argv: list[str]) -> int:
    import datetime

    from triton_gke.bench.reports import record
    from triton_gke.bench.runners import runner
    from triton_gke.bench.tuners import tune

    stamp = datetime.datetime.now().astimezone()
    p = parser()
    args = p.parse_args(argv)
    runner.refuse_empty_paths(args, "--out", "--build-dir")
    runner.check_writable(Path(args.build_dir), "--build-dir")  # the twin is built there before MA starts
    try:
        limits = SearchLimits(args.max_concurrency, args.max_instances, args.max_batch, 1, args.budget_minutes * 60)
    except LimitError as err:
        if err.field == "budget_s":
            raise runner.BenchError(f"--budget-minutes {args.budget_minutes}: expected 1 to 1440") from None
        raise runner.BenchError(f"{LIMIT_OPTIONS[err.field]}: {err.problem}") from None
    settings = record.stack_settings(args.stack, "--stack")
    variant = tune.pick_variant(args.variant, settings)
    out = p.default_out(args, stamp)
    runner.check_new_or_empty(out, "Model Analyzer")
    twins = runner.build_sandbox_repository(settings.model_repo, [variant], Path(args.build_dir) / args.stack)
    pick = search(
        twins, variant.name, latency_ms=settings.monitoring.slo.latency_ms,
        percentile=round(settings.monitoring.slo.quantile * 100),  # the stack's SLO (p95): what compare-tuners asks
        limits=limits, out_dir=out, log=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    print(out / PICK_JSON)
    print(f"Model Analyzer's pick after {pick.search_s or 0:.0f} s: {pick.describe()}")
    current = tune.Candidate.of(variant).stack_values()
    changed = {k: v for k, v in pick.stack_values().items() if current[k] != v}
    for key, value in changed.items():
        print(f"pulumi config set triton-gke:{key} {value} -s {shlex.quote(args.stack)}")
    if not changed:
        print("the pick's stack keys are the stack's: no stack setting to change")
    return 0
