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

Writes gpu_check.json and README.md under --out (default bench/results/gpu-check-<GPU>-<YYYY-MM-DD>/). Exit 0 when
every plan built and ran, 1 when one did not (its step and the end of its output are in the files), 2 for bad input:
no NVIDIA GPU, no trtexec, a trtexec of another TensorRT major than the repository's release, no plan model.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.contracts.naming import COMPUTE_CAPABILITY
from triton_gke.contracts.paths import built_repository, project_dir
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


def run_step(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False)


def read_gpu(run: Runner = run_step) -> Gpu:
    """The first GPU nvidia-smi lists; GpuCheckError when there is none (or no nvidia-smi)."""
    if shutil.which(GPU_QUERY[0]) is None:
        raise GpuCheckError("no NVIDIA GPU here: nvidia-smi is not on PATH")
    done = run(GPU_QUERY, Path.cwd())
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise GpuCheckError(f"no NVIDIA GPU here: nvidia-smi exited {done.returncode}: {done.stderr.strip()[:200]}")
    return parse_gpu(lines[0])


def parse_gpu(line: str) -> Gpu:
    """One CSV line of GPU_QUERY: 'Tesla T4, 7.5, 580.95.05'."""
    parts = [part.strip() for part in line.split(",")]
    if len(parts) != 3 or not COMPUTE_CAPABILITY.fullmatch(parts[1]):
        raise GpuCheckError(f"nvidia-smi answered {line.strip()[:200]!r}, not NAME, MAJOR.MINOR, DRIVER")
    return Gpu(*parts)


def trtexec_major(run: Runner = run_step) -> int:
    """The TensorRT major of the trtexec on PATH, from its first line."""
    if shutil.which("trtexec") is None:
        raise GpuCheckError("no trtexec on PATH: run this in the TensorRT container of the repository's release")
    done = run(("trtexec", "--help"), Path.cwd())
    match = TRTEXEC_VERSION.search(done.stdout + done.stderr)
    if not match:
        raise GpuCheckError("trtexec --help printed no '[TensorRT vNNNNN]' version")
    return int(match.group(1)) // 10000


def parse_trtexec_summary(output: str) -> dict[str, object]:
    """trtexec's own throughput and latency figures from its performance summary (printEpilog)."""
    throughput = THROUGHPUT.search(output)
    latency = next((m.group(1) or m.group(2) for m in LATENCY_LINE.finditer(output)), None)
    if throughput is None or latency is None:
        raise ValueError("no performance summary (Throughput and Latency lines) in trtexec's output")
    median = MEDIAN.search(latency)
    return {
        "throughput_qps": float(throughput.group(1)),
        "median_ms": float(median.group(1)) if median else None,
        "percentiles_ms": {p: float(ms) for p, ms in PERCENTILE.findall(latency)},
    }


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
    shutil.copyfile(repository / model.name / "1" / "model.onnx", folder / "model.onnx")
    started = time.monotonic()
    for step in built.steps:
        done = run(step, folder)
        if done.returncode != 0:
            result.failed = f"{' '.join(step)}: exit {done.returncode}: {(done.stdout + done.stderr)[-OUTPUT_TAIL:]}"
            return result
    result.build_s = round(time.monotonic() - started, 1)
    result.plan_bytes = (folder / plan).stat().st_size
    for batch in sorted({1, model.max_batch_size}):
        step = ("trtexec", f"--loadEngine={plan}", f"--shapes={_shapes(model, batch)}")
        done = run(step, folder)
        try:
            if done.returncode != 0:
                raise ValueError(f"exit {done.returncode}")
            result.runs[str(batch)] = parse_trtexec_summary(done.stdout + done.stderr)
        except ValueError as err:
            result.failed = f"{' '.join(step)}: {err}: {(done.stdout + done.stderr)[-OUTPUT_TAIL:]}"
            return result
    return result


def default_out(gpu: Gpu, today: datetime.date) -> Path:
    short = re.sub(r"[^a-z0-9]+", "-", gpu.name.lower()).strip("-") or "gpu"
    return project_dir() / "bench" / "results" / f"gpu-check-{short}-{today.isoformat()}"


def readme(gpu: Gpu, tag: str, major: int, day: datetime.date, results: Sequence[PlanResult]) -> str:
    lines = [
        f"# GPU check: {gpu.name} (compute capability {gpu.compute_capability})",
        "",
        f"`triton-gke gpu-check` on {day.isoformat()}: Triton {tag} (TensorRT {major}), driver {gpu.driver}. Each plan "
        "built with the engine-build Job's recipe, then run by trtexec at batch 1 and at its largest batch; throughput "
        "and latency are trtexec's own figures (a query is one batch: images/s = qps x batch).",
        "",
        "| model | precision | build | plan | batch | trtexec throughput | median | p99 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if r.failed:
            lines.append(f"| {r.model} | {r.precision} | failed: {r.failed[:160]} | | | | | |")
            continue
        for batch, run in r.runs.items():
            qps = float(run["throughput_qps"])  # type: ignore[arg-type]
            p99 = run["percentiles_ms"].get("99", "")  # type: ignore[attr-defined]
            lines.append(
                f"| {r.model} | {r.precision} | {r.build_s} s | {r.plan_bytes:,} B | {batch} "
                f"| {qps:.1f} qps = {qps * int(batch):.0f} images/s | {run['median_ms']} ms | {p99} ms |"
            )
    return "\n".join(lines) + "\n"


def gpu_check(repository: Path, out: Path | None, run: Runner = run_step, today: datetime.date | None = None) -> int:
    models = plan_models(repository)
    tag = str(read_manifest(repository).get("triton_image_tag"))
    major = toolchain(tag).tensorrt_major
    gpu = read_gpu(run)
    found = trtexec_major(run)
    if found != major:
        raise GpuCheckError(
            f"trtexec is TensorRT {found}, but {tag} is TensorRT {major}: run in nvcr.io/nvidia/tensorrt:{tag}"
        )
    day = today or datetime.date.today()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        results = []
        for model in models:
            print(f"{model.name}: building {engine_filename(tag, gpu.compute_capability)} ...", flush=True)
            results.append(check_model(model, repository, tag, gpu, Path(scratch), run))
            print(f"{model.name}: {results[-1].failed or 'built and ran'}", flush=True)
    record = {
        "date": day.isoformat(),
        "gpu": asdict(gpu),
        "triton_image_tag": tag,
        "tensorrt_major": major,
        "plans": [asdict(r) for r in results],
    }
    folder = out or default_out(gpu, day)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gpu_check.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(readme(gpu, tag, major, day, results), encoding="utf-8")
    print(f"wrote {folder}/gpu_check.json and README.md")
    return EXIT_FAILED if any(r.failed for r in results) else 0


def _parser() -> OneLineParser:
    parser = OneLineParser(prog=f"{CONSOLE_SCRIPT} gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repository", type=Path, default=None, help="the built model repository (default build/model_repository)"
    )
    parser.add_argument("--out", type=Path, default=None, help="the results folder (default bench/results/...)")
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
