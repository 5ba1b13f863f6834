"""INT8 QDQ quantisation with ONNX Runtime, for the trt_int8* variants.

TensorRT reads the QuantizeLinear/DequantizeLinear pairs as explicit INT8 quantisation
(no calibration table needed, and none may be given for a QDQ model). TensorRT only
supports symmetric INT8, hence symmetric activations and weights. The calibration images
are SYNTHETIC (seeded, see resnet50.synthetic_images): no real data set is available
offline, so the scales fit those images, not real photos.

With the built-in RANDOM-weight ResNet-50, INT8 top-1 classes mostly differ from FP32: an
untrained net amplifies quantisation noise layer by layer, a trained one does not. Compare
an INT8 model with its own FP32 twin only for trained weights.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.calibrate import TensorData, TensorsData, save_tensors_data

from triton_gke.model_repo import fixed_point
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.resnet50 import IMAGE_SIZE, synthetic_images

CALIBRATION_IMAGES = 16
CALIBRATION_BATCH = 4
CALIBRATION_SEED = 2024
# Bump when the recipe below changes: it is part of the build cache key. 2: exact calibration ranges
# (model_repo/fixed_point.py) where the model allows, Softmax left in float.
QUANTIZER_VERSION = 2

# FP32 only: an FP16 model's QDQ copy carries FP16 scales, which DequantizeLinear refuses (red team: ORT could not
# load it); a DOUBLE one is not served by TensorRT.
_NUMPY_TYPES = {onnx.TensorProto.FLOAT: np.float32}


class _SyntheticReader(CalibrationDataReader):
    """Feeds seeded uniform noise shaped like the model's single input."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: type) -> None:
        self._batches = _batches(shape, dtype)
        self._name = name

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._batches, None)
        return None if batch is None else {self._name: batch}


def _batches(shape: tuple[int, ...], dtype: type) -> Iterator[np.ndarray]:
    """Image-like blocks for NHWC 224x224x3 inputs, plain uniform [0, 1) noise otherwise."""
    rng = np.random.default_rng(CALIBRATION_SEED)
    for i in range(CALIBRATION_IMAGES // CALIBRATION_BATCH):
        if shape == (IMAGE_SIZE, IMAGE_SIZE, 3):
            batch = synthetic_images(CALIBRATION_BATCH, CALIBRATION_SEED + i)
        else:
            batch = rng.random((CALIBRATION_BATCH, *shape), dtype=np.float32)
        yield batch.astype(dtype)


def _calibration_input(model: onnx.ModelProto, path: Path) -> tuple[str, tuple[int, ...], type]:
    """Name, per-sample shape and numpy dtype of the single input the reader can synthesise."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ModelRepoError(f"{path}: INT8 calibration supports models with one input, found {len(inputs)}")
    tensor = inputs[0].type.tensor_type
    dims = [d.dim_value for d in tensor.shape.dim[1:]]
    if tensor.elem_type not in _NUMPY_TYPES or any(d <= 0 for d in dims):
        raise ModelRepoError(
            f"{path}: INT8 calibration needs an FP32 input with fixed non-batch dims, input {inputs[0].name!r} has none"
        )
    return inputs[0].name, tuple(dims), _NUMPY_TYPES[tensor.elem_type]


def quantize_int8(fp32_path: Path, out_path: Path) -> bool:
    """Write a QDQ INT8 model (per-channel symmetric weights, symmetric activations, Softmax left in float).

    True when its calibration ranges were computed exactly (the same file on every machine), False when ONNX
    Runtime's calibration measured them (the file's last bits can depend on the CPU).
    """
    model = onnx.load(str(fp32_path))
    name, shape, dtype = _calibration_input(model, fp32_path)
    for tensor in model.graph.initializer:  # ORT's quantizer asserts on them ("scale issue"): say which one
        values = onnx.numpy_helper.to_array(tensor)
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            why = f"initializer {tensor.name!r} holds NaN or infinity; INT8 needs finite weights"
            raise ModelRepoError(f"{fp32_path}: {why}")
    # Softmax stays float: quantised, a 1,000-class output keeps only multiples of its largest probability / 127.
    op_types = sorted({node.op_type for node in model.graph.node} - {"Softmax"})
    logging.disable(logging.WARNING)  # ORT's root-logger advice to pre-process; noise for us
    try:
        with tempfile.TemporaryDirectory(prefix="calibration-") as folder:
            ranges = _exact_ranges(model, name, shape, dtype, Path(folder) / "ranges.json")
            reader = None if ranges else _SyntheticReader(name, shape, dtype)
            try:
                _quantize(fp32_path, out_path, reader, op_types, ranges)
            except Exception as err:  # ORT's quantizer on a model it cannot handle: asserts, numpy errors (red team)
                raise ModelRepoError(f"{fp32_path}: INT8 quantisation failed: {_first_line(err)}") from None
        _check_quantized(fp32_path, out_path)
        return ranges is not None
    finally:
        logging.disable(logging.NOTSET)


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}".strip()


def _check_quantized(fp32_path: Path, out_path: Path) -> None:
    """The INT8 copy must be a valid model with its types and shapes inferred (full_check), or nothing is served."""
    try:
        onnx.checker.check_model(str(out_path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise ModelRepoError(f"{fp32_path}: its INT8 copy is not a valid model: {_first_line(err)}") from None


def _exact_ranges(model: onnx.ModelProto, name: str, shape: tuple[int, ...], dtype: type, path: Path) -> Path | None:
    """Every tensor's calibration range, computed exactly (model_repo/fixed_point.py), as ORT's calibration cache.

    None when the model uses an op fixed_point does not compute: ORT's own calibration then measures the ranges with
    its float32 kernels, whose last bits depend on the CPU, so such a model's INT8 file can differ between machines
    (docs/model-repository.md says so; the built-in ResNet-50 always takes the exact path).
    """
    images = np.concatenate(list(_batches(shape, dtype)))
    try:
        bounds = fixed_point.tensor_bounds(model, {name: images}, skip={"Softmax"})
    except fixed_point.Unsupported:
        return None
    # MinMax calibration's result is each tensor's lowest and highest value over the calibration data (onnxruntime
    # quantization/calibrate.py MinMaxCalibrater); the cache file is the one quantize_static(calibration_cache_path=)
    # reads instead of calibrating (its save_tensors_data / load_tensors_data).
    data = {
        tensor: TensorData(lowest=np.array(low, dtype=np.float32), highest=np.array(high, dtype=np.float32))
        for tensor, (low, high) in bounds.items()
    }
    save_tensors_data(TensorsData(CalibrationMethod.MinMax, data), path)
    return path


def _quantize(
    fp32_path: Path, out_path: Path, reader: CalibrationDataReader | None, op_types: list[str], ranges: Path | None
) -> None:
    quantize_static(
        str(fp32_path),
        str(out_path),
        reader,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=op_types,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
        calibration_cache_path=None if ranges is None else str(ranges),
    )
