"""TensorRT engine recipes chosen by the Triton image tag: TensorRT 10 (trtexec precision flags and a calibration
cache) up to the last TensorRT 10 image, TensorRT 11 (NVIDIA ModelOpt: AutoCast for FP16, Q/DQ ONNX for INT8, then
trtexec --stronglyTyped) after it. The table image -> TensorRT -> CUDA -> driver is infra/data/triton_toolchain.csv,
with its sources.

Flags, with sources:
- TensorRT 10 trtexec: --onnx, --saveEngine, --minShapes/--optShapes/--maxShapes, --fp16, --int8 and --calib=CACHE
  (an INT8 calibration cache); TensorRT 11 removed --fp16, --int8, --calib and --best and no longer produces or reads
  calibration caches, keeping --stronglyTyped builds (TensorRT 11 migration guide "TensorRT 10.x to 11.x: trtexec",
  docs.nvidia.com/deeplearning/tensorrt/11.4.1/api/migration/tensorrt-10x-to-11x-trtexec.html, and triton-inference-
  server/server PR #8828 / #8836, as quoted in the shared toolchain reference of 2026-12).
- ModelOpt INT8: `python -m modelopt.onnx.quantization --onnx_path ... --quantize_mode int8 --calibration_data
  CALIB.npy --output_path ...` writes an ONNX model with Q/DQ nodes for TensorRT's explicit quantization (ModelOpt
  guide "ONNX Quantization - Linux", https://nvidia.github.io/TensorRT-Model-Optimizer/guides/_onnx_quantization.html;
  parameters of modelopt.onnx.quantization.quantize: onnx_path, quantize_mode 'int8', calibration_data, output_path).
- ModelOpt FP16: `python -m modelopt.onnx.autocast --onnx_path ... --output_path ... --keep_io_types` (the TensorRT 11
  migration guide above names AutoCast, `python -m modelopt.onnx.autocast`, for FP16; its command line, ModelOpt guide
  "AutoCast (ONNX)", https://nvidia.github.io/Model-Optimizer/guides/8_autocast.html, has --keep_io_types, and its
  Python API defaults keep_io_types to False: without the flag the inputs and outputs would turn FP16, and Triton
  would refuse the plan against its config's TYPE_FP32 tensors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from triton_gke.bounded_files import one_line, read_text_file
from triton_gke.contracts.paths import TOOLCHAIN_CSV
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import image_release, runs_on_driver

MAX_BYTES = 64 * 1024
COLUMNS = ("first_release", "last_release", "tensorrt_major", "cuda", "min_driver_branch", "forward_compat_branches")
# trtexec flags each TensorRT major accepts, of those a recipe here may use (sources above).
TRTEXEC_FLAGS = {
    10: frozenset(
        {"--onnx", "--saveEngine", "--minShapes", "--optShapes", "--maxShapes", "--fp16", "--int8", "--calib"}
    ),
    11: frozenset({"--onnx", "--saveEngine", "--minShapes", "--optShapes", "--maxShapes", "--stronglyTyped"}),
}
PRECISIONS = ("FP32", "FP16", "INT8")
_RELEASE = re.compile(r"([0-9]{2})\.([0-9]{2})")


@dataclass(frozen=True)
class Toolchain:
    first: tuple[int, int]
    last: tuple[int, int]
    tensorrt_major: int
    cuda: str
    min_driver_branch: int
    forward_compat_branches: tuple[int, ...]

    def runs_on(self, branch: int) -> bool:
        return branch >= self.min_driver_branch or branch in self.forward_compat_branches


def load_toolchains(path: Path = TOOLCHAIN_CSV) -> tuple[Toolchain, ...]:
    """The table's rows in order; ModelRepoError (one line naming the file) on a bad one."""
    text = read_text_file(path, MAX_BYTES, "the Triton toolchain table", ModelRepoError)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines or tuple(c.strip() for c in lines[0].split(",")) != COLUMNS:
        raise ModelRepoError(f"{one_line(path)}: expected the header {','.join(COLUMNS)}")
    rows = []
    for number, line in enumerate(lines[1:], start=1):
        cells = [c.strip() for c in line.split(",")]
        try:
            first, last = (_release(c) for c in cells[:2])
            row = Toolchain(first, last, int(cells[2]), cells[3], int(cells[4]),
                            tuple(int(b) for b in cells[5].split()))  # fmt: skip
        except (ValueError, IndexError):
            raise ModelRepoError(f"{one_line(path)}: data row {number} is not {','.join(COLUMNS)}") from None
        if row.tensorrt_major not in TRTEXEC_FLAGS or last < first or (rows and first <= rows[-1].last):
            raise ModelRepoError(f"{one_line(path)}: data row {number}: unknown TensorRT major or ranges out of order")
        rows.append(row)
    return tuple(rows)


def _release(cell: str) -> tuple[int, int]:
    match = _RELEASE.fullmatch(cell)
    if not match:
        raise ValueError(cell)
    return int(match.group(1)), int(match.group(2))


def toolchain_row(release: tuple[int, int], table: tuple[Toolchain, ...] | None = None) -> Toolchain | None:
    """The row of infra/data/triton_toolchain.csv holding `release`; None for a release before the table."""
    return next((t for t in (load_toolchains() if table is None else table) if t.first <= release <= t.last), None)


def image_runs_on_driver(release: tuple[int, int], branch: int) -> bool:
    """Whether a Triton image of `release` runs on a T4 with driver `branch` (e.g. 535): the one rule, read from the
    toolchain table's row of the release (its minimum branch or a forward-compatible one), and for a release before
    the table by model_repo/settings.py runs_on_driver (CUDA 12's forward compatibility)."""
    row = toolchain_row(release)
    return row.runs_on(branch) if row else runs_on_driver(release, branch)


def driver_needed(release: tuple[int, int]) -> str:
    """The driver a release needs, as the toolchain table says it ("R580+", "R470+ (or R535 through forward
    compatibility)"); "a newer driver" for a release before the table."""
    row = toolchain_row(release)
    if row is None:
        return "a newer driver"
    forward = " or ".join(f"R{b}" for b in row.forward_compat_branches)
    return f"R{row.min_driver_branch}+" + (f" (or {forward} through forward compatibility)" if forward else "")


def toolchain(tag: str, table: tuple[Toolchain, ...] | None = None) -> Toolchain:
    release = image_release(tag)
    table = load_toolchains() if table is None else table
    found = next((t for t in table if t.first <= release <= t.last), None)
    if found is None:
        raise ModelRepoError(f"{tag!r} is not in infra/data/triton_toolchain.csv", field="triton_image_tag")
    return found


@dataclass(frozen=True)
class Recipe:
    tag: str
    tensorrt_major: int
    precision: str
    steps: tuple[tuple[str, ...], ...]  # argv of each command, in order

    def shell(self) -> str:
        return "\n".join(" ".join(step) for step in self.steps)


def recipe(
    tag: str,
    precision: str,
    onnx: str = "model.onnx",
    engine: str = "model.plan",
    shapes: str = "input:1x224x224x3",
    max_shapes: str = "input:64x224x224x3",
    calibration: str | None = "calibration",
) -> Recipe:
    """The commands that build `engine` from `onnx` at `precision` in the image `tag`'s TensorRT, on the target GPU.
    `calibration` is the TensorRT 10 calibration cache (calibration.cache) or TensorRT 11 ModelOpt's data
    (calibration.npy); None for an INT8 `onnx` that already carries Q/DQ nodes (model_repo/quantize.py writes such
    models), which TensorRT builds by explicit quantization, without calibration ("ModelOpt ONNX quantization
    generates new ONNX models with QDQ nodes following TensorRT rules" for "TensorRT Explicit Quantization", ModelOpt
    guide "ONNX Quantization - Linux", nvidia.github.io/TensorRT-Model-Optimizer/guides/_onnx_quantization.html):
    TensorRT 10 gets --int8 alone, TensorRT 11 builds it --stronglyTyped with no ModelOpt step."""
    if precision not in PRECISIONS:
        raise ModelRepoError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}", field="precision")
    major = toolchain(tag).tensorrt_major
    shape_flags = (f"--minShapes={shapes}", f"--optShapes={max_shapes}", f"--maxShapes={max_shapes}")
    steps: list[tuple[str, ...]] = []
    if major == 10:
        int8 = ("--int8",) if calibration is None else ("--int8", f"--calib={calibration}.cache")
        extra = {"FP32": (), "FP16": ("--fp16",), "INT8": int8}[precision]
        steps.append(("trtexec", f"--onnx={onnx}", f"--saveEngine={engine}", *shape_flags, *extra))
    else:
        source = onnx
        if precision == "FP16":
            source = onnx.removesuffix(".onnx") + ".fp16.onnx"
            steps.append(("python", "-m", "modelopt.onnx.autocast", "--onnx_path", onnx, "--output_path", source,
                          "--keep_io_types"))  # fmt: skip
        elif precision == "INT8" and calibration is not None:
            source = onnx.removesuffix(".onnx") + ".int8.qdq.onnx"
            steps.append(("python", "-m", "modelopt.onnx.quantization", "--onnx_path", onnx, "--quantize_mode", "int8",
                          "--calibration_data", f"{calibration}.npy", "--output_path", source))  # fmt: skip
        steps.append(("trtexec", f"--onnx={source}", f"--saveEngine={engine}", *shape_flags, "--stronglyTyped"))
    built = Recipe(tag, major, precision, tuple(steps))
    problem = recipe_problem(built)
    if problem:
        raise ModelRepoError(problem, field="triton_image_tag")
    return built


# What the engine-build Job (k8s/engine_build.py) can run: trtexec only. A ModelOpt step (TensorRT 11 FP16, or INT8 from
# a model without Q/DQ nodes) needs the `modelopt` package (PyPI nvidia-modelopt with its onnx extras), which no
# TensorRT container release note or frameworks support matrix read here lists among the image's contents, and the
# Job's build step runs as uid 1000 under the restricted profile with no install step, so it cannot add it: such a
# recipe is refused where a stack asks the Job for it (settings/serving.py) instead of failing on the GPU.
MODELOPT_MODULE_PREFIX = "modelopt."


def needs_modelopt(built: Recipe) -> bool:
    """Whether a step of `built` runs NVIDIA ModelOpt (`python -m modelopt....`)."""
    return any(step[:2] == ("python", "-m") and step[2].startswith(MODELOPT_MODULE_PREFIX) for step in built.steps)


def job_problem(built: Recipe) -> str | None:
    """Why the engine-build Job cannot run `built` (a ModelOpt step it has no package for); None when it can."""
    if not needs_modelopt(built):
        return None
    return (
        f"its TensorRT {built.tensorrt_major} builds {built.precision} plans only after an NVIDIA ModelOpt step "
        "(python -m modelopt...), which the TensorRT image is not shown to ship and the engine-build Job "
        "(non-root, no install step) cannot add"
    )


def recipe_problem(built: Recipe) -> str | None:
    """Why `built` cannot run on its TensorRT major (a trtexec flag it lacks, a calibration cache on TensorRT 11)."""
    allowed = TRTEXEC_FLAGS[built.tensorrt_major]
    for step in built.steps:
        if step[0] != "trtexec":
            continue
        for arg in step[1:]:
            flag = arg.split("=", 1)[0]
            if flag not in allowed:
                return f"trtexec of TensorRT {built.tensorrt_major} has no {flag} ({built.tag})"
    if built.tensorrt_major >= 11 and any(".cache" in arg for step in built.steps for arg in step):
        return f"TensorRT {built.tensorrt_major} reads no calibration cache ({built.tag})"
    return None
