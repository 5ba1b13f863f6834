"""Generate and validate Triton config.pbtxt files.

Configs are built as tritonclient's ModelConfig protobuf and rendered to text, then every
text is parsed back and checked against the semantic rules Triton enforces at load time
(protobuf parsing alone catches only syntax and enum errors).

TensorRT parameter names are those the ONNX Runtime backend accepts
(triton-inference-server/onnxruntime_backend README, "ONNX Runtime with TensorRT
optimization", and src/onnxruntime.cc, which rejects unknown keys); the TF-TRT ones are
from tensorflow_backend src/tensorflow.cc.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnxruntime
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import read_capped_file
from triton_gke.contracts.naming import COMPUTE_CAPABILITY
from triton_gke.model_repo.engines import plan_input_problem
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import VariantSettings
from triton_gke.model_repo.sync_source import MAX_ONNX_BYTES

ONNX_FILENAME = "model.onnx"
PYTHON_FILENAME = "model.py"
SAVEDMODEL_DIRNAME = "model.savedmodel"
LABELS_FILENAME = "labels.txt"
VERSION = "1"
TRT_WORKSPACE_BYTES = 1 << 30  # per instance; 4 instances fit a 16 GB T4 with room to spare

# platform/backend -> the file or folder Triton loads from each version folder by default.
_DEFAULT_FILENAMES = {
    "onnxruntime_onnx": ONNX_FILENAME,
    "onnxruntime": ONNX_FILENAME,
    "python": PYTHON_FILENAME,
    "tensorflow_savedmodel": SAVEDMODEL_DIRNAME,
    "tensorflow": SAVEDMODEL_DIRNAME,
    # A TensorRT plan (server docs/user_guide/model_repository.md "TensorRT Models": model.plan by default).
    "tensorrt_plan": "model.plan",
    "tensorrt": "model.plan",
}
_ORT_TRT_KEYS = {
    "precision_mode": ("FP32", "FP16", "INT8", "BF16"),
    "max_workspace_size_bytes": int,
    "trt_engine_cache_enable": ("0", "1", "true", "false"),
    "trt_engine_cache_path": str,
    "trt_timing_cache_enable": ("0", "1", "true", "false"),
    "trt_timing_cache_path": str,
    "trt_profile_min_shapes": str,
    "trt_profile_opt_shapes": str,
    "trt_profile_max_shapes": str,
}
_TF_TRT_KEYS = {
    "precision_mode": ("FP32", "FP16"),
    "max_workspace_size_bytes": int,
    "minimum_segment_size": int,
    "max_cached_engines": int,
}

_ONNX_TO_TRITON = {
    onnx.TensorProto.FLOAT: "TYPE_FP32",
    onnx.TensorProto.FLOAT16: "TYPE_FP16",
    onnx.TensorProto.BFLOAT16: "TYPE_BF16",
    onnx.TensorProto.DOUBLE: "TYPE_FP64",
    onnx.TensorProto.INT8: "TYPE_INT8",
    onnx.TensorProto.INT16: "TYPE_INT16",
    onnx.TensorProto.INT32: "TYPE_INT32",
    onnx.TensorProto.INT64: "TYPE_INT64",
    onnx.TensorProto.UINT8: "TYPE_UINT8",
    onnx.TensorProto.UINT16: "TYPE_UINT16",
    onnx.TensorProto.UINT32: "TYPE_UINT32",
    onnx.TensorProto.UINT64: "TYPE_UINT64",
    onnx.TensorProto.BOOL: "TYPE_BOOL",
    onnx.TensorProto.STRING: "TYPE_STRING",
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    data_type: str  # Triton TYPE_* name
    dims: tuple[int, ...]  # without the batch dimension; -1 = variable

    @property
    def fixed(self) -> bool:
        return all(d > 0 for d in self.dims)


@dataclass(frozen=True)
class ModelIO:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


# ---------------------------------------------------------------- reading the model
def _model_file_size(path: Path) -> int:
    """The size of a model file within MAX_ONNX_BYTES (sync_source.py), or one line saying why not: checked before the
    bounded reader, which would read up to its cap before it could say "more than". A folder, FIFO or device is the
    reader's to refuse (it does so before opening)."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise ModelRepoError(f"{path}: cannot read model file ({err.strerror or err})") from None
    if info.st_size > MAX_ONNX_BYTES:
        raise ModelRepoError(f"{path}: {info.st_size} bytes, over the 2 GiB one ONNX file can hold")
    return info.st_size


def read_onnx_io(path: Path) -> ModelIO:
    """Inputs/outputs of an ONNX file, batch dimension removed (it must be dynamic)."""
    size = _model_file_size(path)
    # Through the one bounded reader (a regular file, read to its size at most), parsed as a binary protobuf whatever
    # the file's name: onnx.load picks a JSON or text parser from a .json or .txt suffix.
    data = read_capped_file(path, size, "an ONNX model", ModelRepoError)
    try:
        model = onnx.load_model_from_string(data, format="protobuf")
    except (DecodeError, ValueError, RuntimeError):
        raise ModelRepoError(f"{path}: not an ONNX model (protobuf decoding failed)") from None
    del data
    graph = model.graph
    if not graph.node or not graph.output:
        raise ModelRepoError(f"{path}: not an ONNX model (no graph nodes or outputs)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer):
        raise ModelRepoError(f"{path}: weights are in external data files; save the model as a single .onnx file")
    try:
        onnx.checker.check_model(str(path))  # by path: no second copy of the weights in memory
    except onnx.checker.ValidationError as err:
        raise ModelRepoError(f"{path}: invalid ONNX model: {str(err).splitlines()[0]}") from None
    _check_onnxruntime_loads(path)
    initializers = {t.name for t in graph.initializer}
    inputs = tuple(_tensor_spec(v, path) for v in graph.input if v.name not in initializers)
    outputs = tuple(_tensor_spec(v, path) for v in graph.output)
    if not inputs:
        raise ModelRepoError(f"{path}: the ONNX graph has no inputs")
    return ModelIO(inputs, outputs)


def _check_onnxruntime_loads(path: Path) -> None:
    """Triton's onnxruntime backend must load it: catches IR versions, opsets and operators it lacks."""
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors come back as the exception below, not as log noise
    try:
        onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for every load failure
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelRepoError(f"{path}: onnxruntime cannot load it: {first}") from None


def _tensor_spec(value: onnx.ValueInfoProto, path: Path) -> TensorSpec:
    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type") or tensor.elem_type not in _ONNX_TO_TRITON:
        raise ModelRepoError(f"{path}: tensor {value.name!r} has a type Triton cannot serve")
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    if not dims or dims[0] > 0:
        first = dims[0] if dims else "none"
        raise ModelRepoError(
            f"{path}: tensor {value.name!r} has a fixed first dimension ({first}); "
            "dynamic batching needs a dynamic batch dimension (e.g. 'batch' or -1)"
        )
    if len(dims) == 1:
        raise ModelRepoError(f"{path}: tensor {value.name!r} has only a batch dimension; Triton needs dims")
    return TensorSpec(value.name, _ONNX_TO_TRITON[tensor.elem_type], tuple(dims[1:]))


# ---------------------------------------------------------------- building configs


def base_config(variant: VariantSettings, io: ModelIO, labels: bool) -> mc.ModelConfig:
    """Name, I/O, dynamic batching and warm-up: identical for a GPU model and its CPU twin."""
    config = mc.ModelConfig(name=variant.name, max_batch_size=variant.max_batch_size)
    for spec in io.inputs:
        config.input.add(name=spec.name, data_type=spec.data_type, dims=spec.dims)
    for spec in io.outputs:
        label = LABELS_FILENAME if labels and spec is io.outputs[0] else ""
        config.output.add(name=spec.name, data_type=spec.data_type, dims=spec.dims, label_filename=label)
    config.dynamic_batching.preferred_batch_size.append(variant.preferred_batch_size)
    config.dynamic_batching.max_queue_delay_microseconds = variant.max_queue_delay_us
    _add_warmup(config, io)
    return config


def _add_warmup(config: mc.ModelConfig, io: ModelIO) -> None:
    """One batch-1 request at load: the model turns READY only once it can answer (for
    TensorRT, once the engine is built or read from the cache)."""
    if not all(s.fixed and s.data_type != "TYPE_STRING" for s in io.inputs):
        return  # Triton needs concrete shapes to synthesise warm-up data
    warmup = config.model_warmup.add(name="warmup_batch1", batch_size=1)
    for spec in io.inputs:
        warmup.inputs[spec.name].CopyFrom(
            mc.ModelWarmup.Input(data_type=spec.data_type, dims=spec.dims, zero_data=True)
        )


def onnx_gpu_config(variant: VariantSettings, io: ModelIO, labels: bool, trt_cache_path: str | None) -> mc.ModelConfig:
    """ONNX Runtime on the GPU; TensorRT execution accelerator unless precision is 'none'."""
    config = base_config(variant, io, labels)
    config.platform = "onnxruntime_onnx"
    config.backend = "onnxruntime"
    config.default_model_filename = ONNX_FILENAME
    config.instance_group.add(count=variant.instance_count, kind=mc.ModelInstanceGroup.KIND_GPU)
    if variant.uses_tensorrt:
        params = {
            "precision_mode": variant.precision,
            "max_workspace_size_bytes": str(TRT_WORKSPACE_BYTES),
            **_trt_cache_params(trt_cache_path),
            **_trt_profiles(variant, io),
        }
        _add_accelerator(config, params)
    return config


def _trt_cache_params(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    return {
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": path,
        "trt_timing_cache_enable": "1",
        "trt_timing_cache_path": path,
    }


def _trt_profiles(variant: VariantSettings, io: ModelIO) -> dict[str, str]:
    """One explicit profile for batch 1..max: without it ORT rebuilds the engine whenever a
    bigger batch than seen before arrives (minutes of stall under load)."""
    if not all(s.fixed and not set(s.name) & set(":,") for s in io.inputs):
        return {}

    def shapes(batch: int) -> str:
        return ",".join(f"{s.name}:{'x'.join(str(d) for d in (batch, *s.dims))}" for s in io.inputs)

    return {
        "trt_profile_min_shapes": shapes(1),
        "trt_profile_opt_shapes": shapes(variant.preferred_batch_size),
        "trt_profile_max_shapes": shapes(variant.max_batch_size),
    }


def _add_accelerator(config: mc.ModelConfig, params: dict[str, str]) -> None:
    accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    accelerator.parameters.update(params)


def tensorrt_plan_config(
    variant: VariantSettings, io: ModelIO, labels: bool, cc_filenames: dict[str, str]
) -> mc.ModelConfig:
    """A TensorRT plan per compute capability (model_repo/engines.py cc_model_filenames), built on the cluster by the
    engine-build Job (k8s/engine_build.py) from the ONNX model beside them; warm-up as every model (base_config).
    ModelRepoError when the inputs cannot be built into a plan (plan_input_problem)."""
    problem = plan_input_problem(tuple((spec.name, spec.dims) for spec in io.inputs))
    if problem:
        raise ModelRepoError(f"{problem} (tritonBuildEngines); serve it through ONNX Runtime instead", field="source")
    config = base_config(variant, io, labels)
    config.platform = "tensorrt_plan"
    config.backend = "tensorrt"
    config.instance_group.add(count=variant.instance_count, kind=mc.ModelInstanceGroup.KIND_GPU)
    config.cc_model_filenames.update(cc_filenames)
    return config


def savedmodel_gpu_config(variant: VariantSettings) -> mc.ModelConfig:
    """TF SavedModel (Triton <= 25.02). Inputs/outputs are left to Triton's auto-complete,
    which reads them from the SavedModel signature (TensorFlow cannot be loaded here)."""
    config = mc.ModelConfig(name=variant.name, max_batch_size=variant.max_batch_size)
    config.platform = "tensorflow_savedmodel"
    config.backend = "tensorflow"
    config.default_model_filename = SAVEDMODEL_DIRNAME
    config.dynamic_batching.preferred_batch_size.append(variant.preferred_batch_size)
    config.dynamic_batching.max_queue_delay_microseconds = variant.max_queue_delay_us
    config.instance_group.add(count=variant.instance_count, kind=mc.ModelInstanceGroup.KIND_GPU)
    if variant.uses_tensorrt:
        params = {"precision_mode": variant.precision, "max_workspace_size_bytes": str(TRT_WORKSPACE_BYTES)}
        _add_accelerator(config, params)
    return config


def render(config: mc.ModelConfig, note: str) -> str:
    header = f"# Generated by model_repo ({note}). Edit the settings, not this file.\n"
    return header + text_format.MessageToString(config)


# ---------------------------------------------------------------- validation


def validate_config_text(text: str, path: Path) -> mc.ModelConfig:
    """Parse a config.pbtxt and apply Triton's load-time rules; ModelRepoError names the file."""
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as err:
        raise ModelRepoError(f"{path}: {err}") from None
    problem = _first_problem(config, Path(path).parent)
    if problem:
        raise ModelRepoError(f"{path}: {problem}")
    return config


def _first_problem(config: mc.ModelConfig, model_dir: Path) -> str | None:
    checks = (_check_identity, _check_batching, _check_io, _check_instances, _check_files, _check_accelerators)
    for check in checks:
        problem = check(config, model_dir)
        if problem:
            return problem
    return None


def _check_identity(config: mc.ModelConfig, model_dir: Path) -> str | None:
    if config.name != model_dir.name:
        return f"name {config.name!r} does not match its folder {model_dir.name!r}"
    if config.platform not in _DEFAULT_FILENAMES and config.backend not in _DEFAULT_FILENAMES:
        return f"unknown platform/backend {config.platform or config.backend!r}"
    return None


def _check_batching(config: mc.ModelConfig, model_dir: Path) -> str | None:
    if config.max_batch_size < 0:
        return f"max_batch_size must be >= 0, got {config.max_batch_size}"
    if not config.HasField("dynamic_batching"):
        return None
    if config.max_batch_size == 0:
        return "dynamic_batching needs max_batch_size >= 1"
    for size in config.dynamic_batching.preferred_batch_size:
        if not 1 <= size <= config.max_batch_size:
            return f"dynamic batching preferred size must be <= max batch size ({size} > {config.max_batch_size})"
    return None


def _check_io(config: mc.ModelConfig, model_dir: Path) -> str | None:
    autocompleted = config.platform == "tensorflow_savedmodel" and not config.input and not config.output
    if not autocompleted and (not config.input or not config.output):
        return "at least one input and one output are required"
    names = [t.name for t in (*config.input, *config.output)]
    if len(set(names)) != len(names) or not all(names):
        return f"tensor names must be non-empty and unique, got {names}"
    for tensor in (*config.input, *config.output):
        if tensor.data_type == mc.TYPE_INVALID:
            return f"tensor {tensor.name!r} has no data_type"
        if not tensor.dims or any(d == 0 or d < -1 for d in tensor.dims):
            return f"tensor {tensor.name!r} dims must be positive or -1, got {list(tensor.dims)}"
    for output in config.output:
        if output.label_filename and not (model_dir / output.label_filename).is_file():
            return f"label_filename {output.label_filename!r} not found in {model_dir}"
    return _check_warmup(config)


def _check_warmup(config: mc.ModelConfig) -> str | None:
    inputs = {t.name for t in config.input}
    for warmup in config.model_warmup:
        if not 1 <= warmup.batch_size <= max(config.max_batch_size, 1):
            return f"model_warmup {warmup.name!r} batch_size must be between 1 and max_batch_size"
        if set(warmup.inputs) != inputs:
            return f"model_warmup {warmup.name!r} must provide exactly the inputs {sorted(inputs)}"
        if any(d <= 0 for w in warmup.inputs.values() for d in w.dims):
            return f"model_warmup {warmup.name!r} dims must be concrete"
    return None


def _check_instances(config: mc.ModelConfig, model_dir: Path) -> str | None:
    for group in config.instance_group:
        if group.count < 1:
            return f"instance_group count must be >= 1, got {group.count}"
    return None


def _check_files(config: mc.ModelConfig, model_dir: Path) -> str | None:
    if config.cc_model_filenames:
        return _check_cc_files(config, model_dir)
    filename = config.default_model_filename or _DEFAULT_FILENAMES.get(config.platform or config.backend, "")
    if not filename:
        return "default_model_filename is missing"
    versions = [p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()] if model_dir.is_dir() else []
    if not versions:
        return f"no version folder (e.g. {VERSION}/) in {model_dir}"
    for version in versions:
        if not (version / filename).exists():
            return f"{version.name}/{filename} is missing"
    return None


def _check_cc_files(config: mc.ModelConfig, model_dir: Path) -> str | None:
    """cc_model_filenames: compute capability ("7.5") -> a plain file name, one per capability, each in every version
    folder or built there on the cluster from the folder's ONNX model (k8s/engine_build.py)."""
    names = list(config.cc_model_filenames.values())
    for cc, name in config.cc_model_filenames.items():
        if not COMPUTE_CAPABILITY.fullmatch(cc):
            return f"cc_model_filenames key {cc!r} is not a compute capability MAJOR.MINOR (e.g. 7.5)"
        if not name or "/" in name or name.startswith("."):
            return f"cc_model_filenames[{cc!r}] {name!r} is not a plain file name"
    if len(set(names)) != len(names):
        return f"cc_model_filenames names one file for two compute capabilities: {sorted(names)}"
    versions = [p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()] if model_dir.is_dir() else []
    if not versions:
        return f"no version folder (e.g. {VERSION}/) in {model_dir}"
    for version in versions:
        missing = [n for n in names if not (version / n).exists()]
        if missing and not (version / ONNX_FILENAME).exists():
            return f"{version.name}/{missing[0]} is missing, and no {ONNX_FILENAME} to build it from"
    return None


def _check_accelerators(config: mc.ModelConfig, model_dir: Path) -> str | None:
    allowed = _TF_TRT_KEYS if config.platform == "tensorflow_savedmodel" else _ORT_TRT_KEYS
    for accelerator in config.optimization.execution_accelerators.gpu_execution_accelerator:
        if accelerator.name != "tensorrt":
            continue
        for key, value in accelerator.parameters.items():
            problem = _check_parameter(allowed, key, value)
            if problem:
                return f"tensorrt parameter {problem}"
    return None


def _check_parameter(allowed: dict[str, object], key: str, value: str) -> str | None:
    rule = allowed.get(key)
    if rule is None:
        return f"{key!r} is unknown to the backend (allowed: {', '.join(sorted(allowed))})"
    if isinstance(rule, tuple) and value not in rule:
        return f"{key}={value!r} is not one of {', '.join(rule)}"
    if rule is int and not value.isdigit():
        return f"{key}={value!r} must be a non-negative integer"
    if rule is str and not value:
        return f"{key} must not be empty"
    return None
