"""CPU twins: the same models for a machine without a GPU.

A twin keeps the name, inputs/outputs, dynamic batching, warm-up and instance count of its
GPU model, but runs on CPU through Triton's python backend, whose model.py runs the same
ONNX file (the QDQ INT8 file for INT8 variants) with ONNX Runtime. The ONNX file is copied
into the twin's version folder because Triton downloads only a model's own folder from gs://.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from model_repo.configs import PYTHON_FILENAME, ModelIO, base_config
from model_repo.settings import VariantSettings

TEMPLATE = Path(__file__).with_name("twin_model.py")


def twin_config(variant: VariantSettings, io: ModelIO, labels: bool) -> mc.ModelConfig:
    config = base_config(variant, io, labels)
    config.backend = "python"
    config.default_model_filename = PYTHON_FILENAME
    config.instance_group.add(count=variant.instance_count, kind=mc.ModelInstanceGroup.KIND_CPU)
    return config


def twin_note(variant: VariantSettings) -> str:
    gpu = "an ONNX Runtime" if variant.precision == "none" else f"a TensorRT {variant.precision}"
    return f"CPU twin of {gpu} GPU model: python backend + ONNX Runtime on CPU"
