"""Small valid ONNX files for tests: the sync refuses a .onnx file that does not parse as ONNX."""

from __future__ import annotations


def onnx_model(payload: bytes) -> bytes:
    """A valid ONNX model (the sync checks .onnx files parse) whose only initializer holds `payload`."""
    from onnx import TensorProto, helper

    weights = helper.make_tensor("w", TensorProto.UINT8, [len(payload)], payload, raw=True)
    output = helper.make_tensor_value_info("y", TensorProto.UINT8, [len(payload)])
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [output], [weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
