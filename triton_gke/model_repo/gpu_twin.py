"""GPU twins: models Triton serves on a machine without a GPU whose execution time follows a T4's service curve.

A GPU twin keeps its variant's name, dynamic batching and instance count, and waits (does not compute) for the
variant's T4 execution time at the batch it received times the time scale k, sharing one simulated GPU with every
other execution on the server (gpu_service.py states the rule; gpu_twin_model.py is its model.py).

Its input is small on purpose: one FP32 value per request instead of a 224x224x3 image. What it leaves out: the
wire (602,112 bytes per FP32 image, 150,528 per UINT8: ~10.8 Gbps at 2,236 img/s, docs/performance-anchors), the
server's copy of the input to the GPU and any preprocessing (resize, normalisation, the UINT8 cast). A client and
server that would be bound by those on a real T4 are not bound by them here: the twin measures batching and
instance choices, not the network.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import read_text_file
from triton_gke.contracts.paths import GPU_TWIN_MODEL_TEMPLATE, GPU_TWIN_SERVICE, T4_SERVICE_CURVES
from triton_gke.model_repo.configs import PYTHON_FILENAME, VERSION, render, validate_config_text
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.gpu_service import Curve, format_curve

INPUT_NAME = "input"  # one FP32 value per request: the small input
OUTPUT_NAME = "batch_size"  # the size of the batch the request was served in (gpu_twin_model.py)
KINDS = ("published", "derived", "interpolated")
CURVES_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class CurveRow:
    variant: str
    batch: int
    exec_ms: float
    kind: str
    source: str
    how: str


def read_rows(path: Path = T4_SERVICE_CURVES) -> list[CurveRow]:
    """The rows of a curves CSV (lines starting with # are its notes and source legend)."""
    text = read_text_file(path, CURVES_MAX_BYTES, "a service-curve table", ModelRepoError)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    rows = []
    for number, record in enumerate(csv.DictReader(io.StringIO("\n".join(lines))), start=2):
        try:
            row = CurveRow(
                record["variant"], int(record["batch"]), float(record["exec_ms"]), record["kind"],
                record["source"], record["how"],
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as err:
            raise ModelRepoError(f"{path}: row {number}: {err}") from None
        if row.kind not in KINDS or row.batch < 1 or not row.exec_ms > 0:
            raise ModelRepoError(f"{path}: row {number}: kind in {KINDS}, batch >= 1 and exec_ms > 0 expected")
        rows.append(row)
    return rows


def read_curves(path: Path = T4_SERVICE_CURVES) -> dict[str, Curve]:
    """variant -> {batch: exec_ms}, from the curves CSV."""
    curves: dict[str, dict[int, float]] = {}
    for row in read_rows(path):
        curve = curves.setdefault(row.variant, {})
        if row.batch in curve:
            raise ModelRepoError(f"{path}: {row.variant} batch {row.batch} listed twice")
        curve[row.batch] = row.exec_ms
    return curves


@dataclass(frozen=True)
class TwinSpec:
    """One GPU twin: its name, curve, time scale and Triton's batching/instance settings."""

    name: str
    curve: Curve
    time_scale: float
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    instances: int = 1
    sharing_speedup: tuple[float, ...] = ()
    gpu_state_file: str = ""  # empty: one simulated GPU per tritonserver process

    def __post_init__(self) -> None:
        if self.max_batch_size > max(self.curve, default=0):
            raise ModelRepoError(f"{self.name}: max_batch_size {self.max_batch_size} is beyond its curve")
        if not self.time_scale > 0:
            raise ModelRepoError(f"{self.name}: time scale {self.time_scale!r} must be > 0")


def twin_config(spec: TwinSpec) -> mc.ModelConfig:
    config = mc.ModelConfig(name=spec.name, backend="python", max_batch_size=spec.max_batch_size)
    config.default_model_filename = PYTHON_FILENAME
    config.input.add(name=INPUT_NAME, data_type=mc.TYPE_FP32, dims=[1])
    config.output.add(name=OUTPUT_NAME, data_type=mc.TYPE_FP32, dims=[1])
    config.dynamic_batching.preferred_batch_size.extend(spec.preferred_batch_sizes)
    config.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_us
    config.instance_group.add(count=spec.instances, kind=mc.ModelInstanceGroup.KIND_CPU)
    params = {
        "service_curve_ms": format_curve(spec.curve),
        "time_scale": repr(float(spec.time_scale)),
        "sharing_speedup": ",".join(repr(float(s)) for s in spec.sharing_speedup),
        "gpu_state_file": spec.gpu_state_file,
    }
    for key, value in params.items():
        if value:
            config.parameters[key].string_value = value
    return config


def write_twin(repository: Path, spec: TwinSpec) -> Path:
    """Write the twin's folder (config.pbtxt, 1/model.py, 1/gpu_service.py) under `repository`; its path."""
    folder = Path(repository) / spec.name
    version = folder / VERSION
    version.mkdir(parents=True)
    shutil.copyfile(GPU_TWIN_MODEL_TEMPLATE, version / PYTHON_FILENAME)
    shutil.copyfile(GPU_TWIN_SERVICE, version / GPU_TWIN_SERVICE.name)
    note = f"GPU twin {spec.name}: waits the T4 curve x k={spec.time_scale:g}, processor sharing"
    text = render(twin_config(spec), note)
    (folder / "config.pbtxt").write_text(text, encoding="utf-8")
    validate_config_text(text, folder / "config.pbtxt")
    return folder
