"""The GPU check: build every TensorRT plan of the model repository on the GPU at hand, with the very recipe the
engine-build Job runs, and record what each took and what trtexec measured of it.

    triton-gke gpu-check [--repository build/model_repository] [--out DIR]

Run it on a machine with an NVIDIA GPU, inside the TensorRT container of the repository's Triton release
(`nvcr.io/nvidia/tensorrt:<YY.MM>-py3`, the image of the Job's build step: it has trtexec, and ModelOpt's Python
steps where the recipe has them), on a repository built with `tritonBuildEngines: true` (its configs name the plans):

    docker run --gpus all -v $PWD:/w -w /w nvcr.io/nvidia/tensorrt:25.06-py3 .venv/bin/triton-gke gpu-check

For each plan model (model_repo/engines.py plan_models): its recipe (engine_recipe, as k8s/engine_build.py) in a
scratch folder holding a copy of its model.onnx, timed; the plan's size; then `trtexec --loadEngine` at batch 1 and at
the model's largest batch, whose own summary lines are recorded as trtexec printed them: "Throughput: N qps" and
"Latency: min = .. ms, max = .. ms, mean = .. ms, median = .. ms, percentile(P%) = .. ms" (printEpilog in
NVIDIA/TensorRT samples/common/sampleReporting.cpp), a figure of the tool, not of this code. A plan built for one
compute capability runs only there, so the GPU's own (nvidia-smi's compute_cap) names the plan file.

Writes gpu_check.json and README.md under --out (default results/bench/gpu-check-<GPU>-<YYYY-MM-DD>/). Exit 0 when
every plan built and ran, 1 when one did not (its step and the end of its output are in the files), 2 for bad input:
no NVIDIA GPU, no trtexec, a trtexec of another TensorRT major than the repository's release, no plan model.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from triton_gke.bounded_files import one_line, output_folder_problem
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.contracts.naming import COMPUTE_CAPABILITY
from triton_gke.contracts.paths import bench_results_dir, built_repository
from triton_gke.model_repo.engines import PlanModel, engine_filename, engine_recipe, plan_models
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import read_manifest
from triton_gke.model_repo.recipes import toolchain
from triton_gke.one_line import CONSOLE_SCRIPT, OneLineParser

# nvidia-smi's query fields (nvidia-smi --help-query-gpu: name, compute_cap, driver_version).
GPU_QUERY = ("nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader")
# trtexec's first line names its TensorRT as one number, major x 10000 + minor x 100 + patch: "&&&& RUNNING
# TensorRT.trtexec [TensorRT v100200]" for 10.2.0 (NVIDIA/TensorRT issue #4036 shows that line).
TRTEXEC_VERSION = re.compile(r"\[TensorRT v(\d{5,})\]")
THROUGHPUT = re.compile(r"Throughput: ([0-9.eE+-]+) qps")
LATENCY_LINE = re.compile(r"^.*\] Latency: (.*)$|^Latency: (.*)$", re.M)
PERCENTILE = re.compile(r"percentile\(([0-9.]+)%\) = ([0-9.eE+-]+) ms")
MEDIAN = re.compile(r"median = ([0-9.eE+-]+) ms")
MAX_GPU_NAME = 100  # "NVIDIA H100 80GB HBM3", "Tesla T4": a name, not a page
DRIVER = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){0,3}")
QUERY_TIMEOUT_S = 60  # nvidia-smi or trtexec --help answer in seconds
STEP_TIMEOUT_S = 3600  # one build: a TensorRT 10 ResNet-50 INT8 build takes minutes; an hour is a hang
OUTPUT_TAIL = 2000  # characters of a failed step's output kept in the record


class GpuCheckError(ValueError):
    """Bad input or a missing tool: one line."""


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str
    driver: str


@dataclass
class PlanResult:
    model: str
    precision: str
    plan_file: str
    build_s: float | None = None
    plan_bytes: int | None = None
    # batch -> what trtexec measured: throughput_qps (queries, each a batch), median_ms, percentiles_ms {P: ms}
    runs: dict[str, dict[str, object]] = field(default_factory=dict)
    failed: str | None = None  # the step that failed and the end of its output


Runner = Callable[[Sequence[str], Path], subprocess.CompletedProcess[str]]


def run_step(argv: Sequence[str], cwd: Path, timeout_s: float = STEP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    # errors="replace": a tool's bytes that are not UTF-8 become U+FFFD, never an exception
    return subprocess.run(
        list(argv), cwd=cwd, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
    )


def _ask(argv: Sequence[str], run: Runner) -> subprocess.CompletedProcess[str]:
    """A question to a tool (nvidia-smi, trtexec --help): an answer within QUERY_TIMEOUT_S, or GpuCheckError."""
    try:
        if run is run_step:
            return run_step(argv, Path.cwd(), QUERY_TIMEOUT_S)
        return run(argv, Path.cwd())
    except subprocess.TimeoutExpired:
        raise GpuCheckError(f"{argv[0]} did not answer within {QUERY_TIMEOUT_S} s") from None
    except OSError as err:
        raise GpuCheckError(f"{argv[0]} could not start: {err.strerror or err}") from None


def read_gpu(run: Runner = run_step) -> Gpu:
    """The first GPU nvidia-smi lists; GpuCheckError when there is none (or no nvidia-smi)."""
    if shutil.which(GPU_QUERY[0]) is None:
        raise GpuCheckError("no NVIDIA GPU here: nvidia-smi is not on PATH")
    done = _ask(GPU_QUERY, run)
    lines = [line for line in done.stdout.split("\n") if line.strip()]  # "\n" only: NEL in a name is no new GPU
    if done.returncode != 0 or not lines:
        said = one_line((done.stderr or done.stdout).strip()[:200])
        raise GpuCheckError(f"no NVIDIA GPU here: nvidia-smi exited {done.returncode}: {said}")
    if len(lines) > 1:
        # trtexec builds on CUDA's device 0, whose order need not be nvidia-smi's (CUDA_DEVICE_ORDER defaults to
        # FASTEST_FIRST, CUDA programming guide "CUDA Environment Variables"): one GPU, so the plan's name is its own.
        raise GpuCheckError(
            f"nvidia-smi lists {len(lines)} GPUs; make one visible (docker run --gpus device=0, or "
            "CUDA_VISIBLE_DEVICES with NVIDIA_VISIBLE_DEVICES) so the plan is named for the GPU that builds it"
        )
    return parse_gpu(lines[0])


def parse_gpu(line: str) -> Gpu:
    """One CSV line of GPU_QUERY: 'Tesla T4, 7.5, 580.95.05'."""
    parts = [part.strip() for part in line.split(",")]
    if (
        len(parts) != 3
        or not 0 < len(parts[0]) <= MAX_GPU_NAME
        or not parts[0].isprintable()
        or not COMPUTE_CAPABILITY.fullmatch(parts[1])
        or not DRIVER.fullmatch(parts[2])
    ):
        raise GpuCheckError(f"nvidia-smi answered {line.strip()[:200]!r}, not NAME, MAJOR.MINOR, DRIVER")
    return Gpu(*parts)


def trtexec_version(run: Runner = run_step) -> tuple[int, int, int]:
    """The TensorRT version (major, minor, patch) of the trtexec on PATH, from its first line."""
    if shutil.which("trtexec") is None:
        raise GpuCheckError("no trtexec on PATH: run this in the TensorRT container of the repository's release")
    done = _ask(("trtexec", "--help"), run)
    match = TRTEXEC_VERSION.search(done.stdout + done.stderr)
    if not match:
        raise GpuCheckError("trtexec --help printed no '[TensorRT vNNNNN]' version")
    number = int(match.group(1))
    return number // 10000, number // 100 % 100, number % 100


def parse_trtexec_summary(output: str) -> dict[str, object]:
    """trtexec's own throughput and latency figures from its performance summary (printEpilog)."""
    throughput = THROUGHPUT.search(output)
    latency = next((m.group(1) or m.group(2) for m in LATENCY_LINE.finditer(output)), None)
    if throughput is None or latency is None:
        raise ValueError("no performance summary (Throughput and Latency lines) in trtexec's output")
    median = MEDIAN.search(latency)
    figures = {
        "throughput_qps": _figure(throughput.group(1)),
        "median_ms": _figure(median.group(1)) if median else None,
        "percentiles_ms": {p: _figure(ms) for p, ms in PERCENTILE.findall(latency)},
    }
    if not figures["throughput_qps"]:
        raise ValueError("trtexec measured no throughput (0 qps)")
    if not figures["median_ms"] or not figures["percentiles_ms"]:
        raise ValueError("trtexec printed no latency median or percentile (or a 0 ms one)")
    return figures


def _figure(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"trtexec printed {text!r}, not a figure")
    return value


def _shapes(model: PlanModel, batch: int) -> str:
    return ",".join(f"{name}:{'x'.join(str(d) for d in (batch, *dims))}" for name, dims in model.inputs)


def check_model(
    model: PlanModel, repository: Path, tag: str, gpu: Gpu, scratch: Path, run: Runner = run_step
) -> PlanResult:
    """Build `model`'s plan in `scratch` with the Job's recipe, then run it at batch 1 and at its largest batch."""
    built = engine_recipe(tag, gpu.compute_capability, model)
    plan = engine_filename(tag, gpu.compute_capability)
    result = PlanResult(model.name, model.precision, plan)
    folder = scratch / model.name
    folder.mkdir(parents=True)
    source = repository / model.name / "1" / "model.onnx"
    if not stat.S_ISREG(os.lstat(source).st_mode):  # the build writes files, never links (sync_source refuses these)
        result.failed = f"{source}: not a regular file"
        return result
    shutil.copyfile(source, folder / "model.onnx")
    started = time.monotonic()
    for step in built.steps:
        output, why = _run(step, folder, run)
        if output is None:
            result.failed = why
            return result
    built_plan = folder / plan
    if not built_plan.is_file() or built_plan.stat().st_size == 0:
        result.failed = f"{' '.join(built.steps[-1])}: exit 0, but no plan (or an empty one) in {plan}"
        return result
    result.build_s = round(time.monotonic() - started, 1)
    result.plan_bytes = built_plan.stat().st_size
    for batch in sorted({1, model.max_batch_size}):
        step = ("trtexec", f"--loadEngine={plan}", f"--shapes={_shapes(model, batch)}")
        output, why = _run(step, folder, run)
        if output is None:
            result.failed = why
            return result
        try:
            result.runs[str(batch)] = parse_trtexec_summary(output)
        except ValueError as err:
            result.failed = f"{' '.join(step)}: {err}: {one_line(output[-OUTPUT_TAIL:])}"
            return result
    return result


def _run(step: Sequence[str], folder: Path, run: Runner) -> tuple[str | None, str]:
    """(output, "") when the step ran to exit 0; (None, why) when it failed, hung past STEP_TIMEOUT_S or could not
    start: one line, with the end of its output."""
    try:
        done = run(step, folder)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(step)}: still running after {STEP_TIMEOUT_S} s, stopped"
    except OSError as err:
        return None, f"{' '.join(step)}: could not start: {err.strerror or err}"
    output = done.stdout + done.stderr
    if done.returncode != 0:
        return None, f"{' '.join(step)}: exit {done.returncode}: {one_line(output[-OUTPUT_TAIL:])}"
    return output, ""


def results_folder(out: Path | None, gpu: Gpu, day: datetime.date) -> Path:
    """The folder the record goes to, made empty before any build (a bad one is refused while nothing has run): --out
    must be a new or empty folder, not a link (the record never writes through one, nor over a user's files); the
    default, results/bench/gpu-check-<GPU>-<date>, takes the next free -2, -3 ... when that day's exists."""
    if out is None:
        short = re.sub(r"[^a-z0-9]+", "-", gpu.name.lower()).strip("-")[:40] or "gpu"
        base = bench_results_dir() / f"gpu-check-{short}-{day.isoformat()}"
        out = base
        for n in range(2, 1000):
            if not os.path.lexists(out):
                break
            out = base.with_name(f"{base.name}-{n}")
    shown = one_line(str(out))
    if os.path.islink(out):  # False, never an error, for a path too long or holding a NUL byte
        raise GpuCheckError(f"--out {shown}: a link; name a new or empty folder")
    # Tried, not read from the permission bits (os.access says yes to root for a read-only folder): the one check.
    problem = output_folder_problem(out)
    taken = os.path.lexists(out) and not os.path.isdir(out)  # os.path's tests: False, never an error, on any path
    if taken or problem is None and os.path.isdir(out) and any(out.iterdir()):
        raise GpuCheckError(f"--out {shown}: exists and is not an empty folder; name a new one")
    if problem is not None:
        raise GpuCheckError(f"--out {shown}: {problem}")
    out.mkdir(parents=True, exist_ok=True)
    return out


def readme(gpu: Gpu, tag: str, version: str, day: datetime.date, results: Sequence[PlanResult]) -> str:
    lines = [
        f"# GPU check: {gpu.name} (compute capability {gpu.compute_capability})",
        "",
        f"`triton-gke gpu-check` on {day.isoformat()}: Triton {tag}, trtexec of TensorRT {version}, driver "
        f"{gpu.driver}. Each plan built with the engine-build Job's recipe, then run by trtexec at batch 1 and at "
        "its largest batch; throughput and latency are trtexec's own figures (a query is one batch: images/s = qps x "
        "batch).",
        "",
        "| model | precision | build | plan | batch | trtexec throughput | median | p99 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    failures = []
    for r in results:
        if r.failed:
            lines.append(f"| {r.model} | {r.precision} | failed (below) | | | | | |")
            failures.append(f"- {r.model}: {r.failed}")
            continue
        for batch, run in r.runs.items():
            qps = float(run["throughput_qps"])  # type: ignore[arg-type]
            p99 = run["percentiles_ms"].get("99", "")  # type: ignore[attr-defined]
            lines.append(
                f"| {r.model} | {r.precision} | {r.build_s} s | {r.plan_bytes:,} B | {batch} "
                f"| {qps:.6g} qps = {qps * int(batch):.6g} images/s | {run['median_ms']} ms | {p99} ms |"
            )
    if failures:
        lines += ["", "## Failures", "", *failures]
    return "\n".join(lines) + "\n"


def gpu_check(repository: Path, out: Path | None, run: Runner = run_step, today: datetime.date | None = None) -> int:
    models = plan_models(repository)
    if out is not None and out.resolve().is_relative_to(repository.resolve()):
        raise GpuCheckError(f"--out {one_line(str(out))}: inside the repository, which must hold what its build wrote")
    tag = str(read_manifest(repository).get("triton_image_tag"))
    major = toolchain(tag).tensorrt_major
    gpu = read_gpu(run)
    found = trtexec_version(run)
    if found[0] != major:
        raise GpuCheckError(
            f"trtexec is TensorRT {found[0]}, but {tag} is TensorRT {major}: run in nvcr.io/nvidia/tensorrt:{tag}"
        )
    day = today or datetime.date.today()
    folder = results_folder(out, gpu, day)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        results = []
        for model in models:
            print(f"{model.name}: building {engine_filename(tag, gpu.compute_capability)} ...", flush=True)
            results.append(check_model(model, repository, tag, gpu, Path(scratch), run))
            print(f"{model.name}: {results[-1].failed or 'built and ran'}", flush=True)
    version = ".".join(str(n) for n in found)
    record = {
        "date": day.isoformat(),
        "gpu": asdict(gpu),
        "triton_image_tag": tag,
        "tensorrt_version": version,  # a plan loads only in the TensorRT version that built it
        "plans": [asdict(r) for r in results],
    }
    # "x": never over a file that appeared meanwhile; the folder is ours and was empty (results_folder).
    with (folder / "gpu_check.json").open("x", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=2, allow_nan=False) + "\n")
    with (folder / "README.md").open("x", encoding="utf-8") as handle:
        handle.write(readme(gpu, tag, version, day, results))
    print(f"wrote {one_line(str(folder))}/gpu_check.json and README.md")
    return EXIT_FAILED if any(r.failed for r in results) else 0


def _parser() -> OneLineParser:
    parser = OneLineParser(prog=f"{CONSOLE_SCRIPT} gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repository", type=Path, default=None, help="the built model repository (default build/model_repository)"
    )
    parser.add_argument("--out", type=Path, default=None, help="the results folder (default results/bench/...)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return gpu_check(args.repository or built_repository(), args.out)
    except (GpuCheckError, ModelRepoError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
