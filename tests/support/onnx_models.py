"""Small valid ONNX files for tests (the sync refuses a .onnx file that does not parse as ONNX), and the variant
settings of a UINT8-input copy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from triton_gke.model_repo.settings import VariantSettings


def onnx_model(payload: bytes) -> bytes:
    """A valid ONNX model (the sync checks .onnx files parse) whose only initializer holds `payload`."""
    from onnx import TensorProto, helper

    weights = helper.make_tensor("w", TensorProto.UINT8, [len(payload)], payload, raw=True)
    output = helper.make_tensor_value_info("y", TensorProto.UINT8, [len(payload)])
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [output], [weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def small_onnx(path: Path, input_name: str = "pixels", output_name: str = "scores", batch: str | int = "n") -> Path:
    """A tiny conv net with its own tensor names (NCHW 3x32x32 -> 10 scores)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc"),
        numpy_helper.from_array(np.zeros(10, np.float32), "fc_b"),
    ]
    nodes = [
        helper.make_node("Conv", [input_name, "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fc_b"], [output_name], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [batch, 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def uint8_copy(variant: VariantSettings) -> VariantSettings:
    return dataclasses.replace(variant, name=f"{variant.name}_uint8", input_dtype="UINT8")
