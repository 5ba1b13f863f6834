"""CPU twins: the same models for a machine without a GPU.

A twin keeps the name, inputs/outputs, dynamic batching, warm-up and instance count of its
GPU model, but runs on CPU through Triton's python backend, whose model.py runs the same
ONNX file (the QDQ INT8 file for INT8 variants, the UINT8-input file for UINT8 variants) with
ONNX Runtime. The ONNX file is copied into the twin's version folder because Triton downloads
only a model's own folder from gs://.

A twin can be made deliberately slow (config parameter `inject_delay_ms`, honoured by its
model.py) to test latency alerts against a real server: delayed_copy().
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import read_text_file
from triton_gke.contracts.paths import TWIN_MODEL_TEMPLATE
from triton_gke.model_repo.configs import (
    PYTHON_FILENAME,
    ModelIO,
    base_config,
    render,
    validate_config_text,
)
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import VariantSettings
from triton_gke.model_repo.sync_source import CONFIG_MAX_BYTES

TEMPLATE = TWIN_MODEL_TEMPLATE
DELAY_PARAMETER = "inject_delay_ms"  # read by twin_model.py
MAX_DELAY_MS = 600_000


def twin_config(variant: VariantSettings, io: ModelIO, labels: bool, inject_delay_ms: int = 0) -> mc.ModelConfig:
    config = base_config(variant, io, labels)
    config.backend = "python"
    config.default_model_filename = PYTHON_FILENAME
    config.instance_group.add(count=variant.instance_count, kind=mc.ModelInstanceGroup.KIND_CPU)
    if inject_delay_ms:
        inject_delay(config, inject_delay_ms)
    return config


def inject_delay(config: mc.ModelConfig, delay_ms: int) -> None:
    """Make the twin sleep delay_ms in every execution (after running the model)."""
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or not 0 <= delay_ms <= MAX_DELAY_MS:
        raise ModelRepoError(
            f"{DELAY_PARAMETER}: expected a whole number of ms from 0 to {MAX_DELAY_MS}, got {delay_ms!r}"
        )
    config.parameters[DELAY_PARAMETER].string_value = str(delay_ms)


def delayed_copy(twin_dir: Path, target_dir: Path, delay_ms: int) -> Path:
    """Copy a built twin folder to target_dir (its name becomes the model name), delay_ms slower."""

    def slower(config: mc.ModelConfig) -> None:
        config.name = Path(target_dir).name
        inject_delay(config, delay_ms)

    return edited_copy(twin_dir, target_dir, slower, f"CPU twin {Path(twin_dir).name}, {delay_ms} ms slower on purpose")


def edited_copy(twin_dir: Path, target_dir: Path, edit: Callable[[mc.ModelConfig], None], note: str) -> Path:
    """Copy a built twin folder to target_dir with its configuration changed by `edit` (checked as Triton would
    check it) and `note` in its header; the ONNX file is hard-linked (read only), the rest copied."""
    twin_dir, target_dir = Path(twin_dir), Path(target_dir)
    config_path = twin_dir / "config.pbtxt"
    text = read_text_file(config_path, CONFIG_MAX_BYTES, "a Triton model configuration", ModelRepoError)
    config = validate_config_text(text, config_path)
    if config.backend != "python" or not (twin_dir / "1" / PYTHON_FILENAME).is_file():
        raise ModelRepoError(f"{twin_dir}: not a CPU twin (python backend with 1/{PYTHON_FILENAME})")
    shutil.copytree(twin_dir, target_dir, copy_function=_link_or_copy)
    edit(config)
    text = render(config, note)
    (target_dir / "config.pbtxt").write_text(text, encoding="utf-8")
    validate_config_text(text, target_dir / "config.pbtxt")
    return target_dir


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link the ONNX file (~100 MB, read-only); copy the rest, which may be rewritten."""
    if src.endswith(".onnx"):
        with contextlib.suppress(OSError):
            os.link(src, dst)
            return
    shutil.copy2(src, dst)


def twin_note(variant: VariantSettings) -> str:
    gpu = "an ONNX Runtime" if variant.precision == "none" else f"a TensorRT {variant.precision}"
    # The UINT8 front (cast, /255) is in the ONNX graph itself, so model.py passes the bytes through.
    dtype = ", UINT8 input" if variant.uint8_input else ""
    return f"CPU twin of {gpu} GPU model{dtype}: python backend + ONNX Runtime on CPU"
