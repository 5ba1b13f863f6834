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
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.resnet50 import IMAGE_SIZE, synthetic_images

CALIBRATION_IMAGES = 16
CALIBRATION_BATCH = 4
CALIBRATION_SEED = 2024
# Bump when the recipe below changes: it is part of the build cache key.
QUANTIZER_VERSION = 1

_NUMPY_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
}


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
            f"{path}: INT8 calibration needs a float input with fixed non-batch dims, input {inputs[0].name!r} has none"
        )
    return inputs[0].name, tuple(dims), _NUMPY_TYPES[tensor.elem_type]


def quantize_int8(fp32_path: Path, out_path: Path) -> None:
    """Write a QDQ INT8 model (per-channel symmetric weights, symmetric activations)."""
    model = onnx.load(str(fp32_path), load_external_data=False)
    name, shape, dtype = _calibration_input(model, fp32_path)
    logging.disable(logging.WARNING)  # ORT's root-logger advice to pre-process; noise for us
    try:
        _quantize(fp32_path, out_path, _SyntheticReader(name, shape, dtype))
    finally:
        logging.disable(logging.NOTSET)


def _quantize(fp32_path: Path, out_path: Path, reader: CalibrationDataReader) -> None:
    quantize_static(
        str(fp32_path),
        str(out_path),
        reader,
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
    )
