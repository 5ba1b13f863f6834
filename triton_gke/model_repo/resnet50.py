"""A ResNet-50 ONNX graph with RANDOM weights, built offline with onnx.helper.

Same layer structure as torchvision's resnet50 (v1.5: stride on the 3x3 conv), with
BatchNorm folded into conv biases as an exported inference graph would have it. Nothing can
be downloaded here, so the weights are seeded random numbers: the model is right for
speed, batching and plumbing tests, and its predictions mean nothing.
Expected input: RGB scaled to [0, 1], NHWC; the folded BatchNorm statistics come from
seeded synthetic images of that range (see synthetic_images). with_uint8_input() puts a
UINT8 front (cast, then /255) on such a model, so clients can send raw 8-bit pixels.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from triton_gke.model_repo import fixed_point

INPUT_NAME = "input"
OUTPUT_NAME = "probabilities"
IMAGE_SIZE = 224
NUM_CLASSES = 1000
DEFAULT_SEED = 50
OPSET = 17
# Bump when the graph or weight recipe changes: it is part of the build cache key. 2: exact statistics
# (model_repo/fixed_point.py) and uniform initialisation, so the file is the same on every machine.
BUILDER_VERSION = 2
# Bump when with_uint8_input changes: it is part of the cache key of UINT8-input files.
UINT8_FRONT_VERSION = 1
UINT8_SCALE = 1.0 / 255.0  # 8-bit pixel values to the [0, 1] range the model expects

_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride)
_EXPANSION = 4
# BatchNorm gamma of each block's last conv: small, as in trained ResNets, so the residual
# sum grows slowly with depth.
_RESIDUAL_GAMMA = 0.3
_FC_STD = 0.07
# Synthetic images that stand in for the data BatchNorm statistics come from.
_STATS_IMAGES = 4


class _GraphBuilder:
    """Builds the graph eagerly: every op also runs on a small batch of synthetic images.

    The running activations give each conv the batch statistics a BatchNorm would have
    seen, which are folded into the conv (scale and bias). Without this, random weights
    produce activations that barely depend on the input and do not survive INT8.
    The activations are computed by model_repo/fixed_point.py, exactly and so identically on every machine: the
    weights, and so the model file's bytes, depend on the recipe alone (not on the CPU's kernels or core count).
    """

    def __init__(self, seed: int, images: np.ndarray) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.weights: dict[str, np.ndarray] = {}
        self.values: dict[str, fixed_point.Fixed] = {INPUT_NAME: fixed_point.to_fixed(images)}
        self._count = 0

    def _name(self, kind: str) -> str:
        self._count += 1
        return f"{kind}_{self._count}"

    def const(self, kind: str, array: np.ndarray) -> str:
        name = self._name(kind)
        self.initializers.append(numpy_helper.from_array(array.astype(np.float32), name))
        self.weights[name] = array.astype(np.float32)
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: object) -> str:
        y = output or self._name(op_type.lower())
        node = helper.make_node(op_type, inputs, [y], **attrs)
        self.nodes.append(node)
        if op_type != "Softmax":  # the output: nothing reads it here (and exp is not computed exactly)
            self.values[y] = fixed_point.run_node(node, [self.weights.get(i, self.values.get(i)) for i in inputs])
        return y

    def uniform(self, shape: tuple[int, ...], std: float) -> np.ndarray:
        """Zero-mean uniform noise of this standard deviation, float32, from integer bits only (no libm call whose
        last bit could differ between machines, as Generator.standard_normal's exp/log tails could)."""
        half_width = np.float32(std * math.sqrt(3.0))
        return (self.rng.random(shape, dtype=np.float32) * np.float32(2.0) - np.float32(1.0)) * half_width

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, gamma: float = 1.0) -> str:
        """Conv with He-uniform weights and a BatchNorm (batch statistics) folded in."""
        w = self.uniform((c_out, c_in, k, k), math.sqrt(2.0 / (c_in * k * k)))
        attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": [k // 2] * 4}
        raw = fixed_point.conv(self.values[x], w, None, [stride, stride], [k // 2] * 4)
        mean, std = fixed_point.channel_mean_std(raw, axes=(0, 2, 3), eps=1e-5)
        scale = (gamma / std).astype(np.float32)
        beta = self.uniform((c_out,), 0.1 * gamma)
        w_name = self.const("w", w * scale[:, None, None, None])
        b_name = self.const("b", beta - mean * scale)
        return self.op("Conv", [x, w_name, b_name], **attrs)

    def bottleneck(self, x: str, c_in: int, width: int, stride: int) -> str:
        c_out = width * _EXPANSION
        y = self.op("Relu", [self.conv(x, c_in, width, 1)])
        y = self.op("Relu", [self.conv(y, width, width, 3, stride)])
        y = self.conv(y, width, c_out, 1, gamma=_RESIDUAL_GAMMA)
        shortcut = x if stride == 1 and c_in == c_out else self.conv(x, c_in, c_out, 1, stride)
        return self.op("Relu", [self.op("Add", [y, shortcut])])


def synthetic_images(count: int, seed: int) -> np.ndarray:
    """Seeded synthetic 'images' in [0, 1], NHWC FP32 (no real images offline).

    Coarse random colour blocks plus fine uniform noise (std 0.05): images differ in global content, as
    photos do. Pure i.i.d. noise would not: global pooling averages it away, leaving
    every image with (almost) the same features. Integer bits and exact float32 operations only, so the same
    images on every machine.
    """
    rng = np.random.default_rng(seed)
    coarse = rng.random((count, 8, 8, 3), dtype=np.float32)
    blocks = coarse.repeat(IMAGE_SIZE // 8, axis=1).repeat(IMAGE_SIZE // 8, axis=2)
    half_width = np.float32(0.05 * math.sqrt(3.0))
    noise = (rng.random(blocks.shape, dtype=np.float32) * np.float32(2.0) - np.float32(1.0)) * half_width
    return np.clip(blocks + noise, np.float32(0.0), np.float32(1.0))


def build_resnet50(seed: int = DEFAULT_SEED) -> onnx.ModelProto:
    """ResNet-50: NHWC FP32 `input` [-1,224,224,3] -> `probabilities` [-1,1000] (softmax)."""
    g = _GraphBuilder(seed, synthetic_images(_STATS_IMAGES, seed + 1))
    x = g.op("Transpose", [INPUT_NAME], perm=[0, 3, 1, 2])  # NHWC -> NCHW inside the graph
    x = g.op("Relu", [g.conv(x, 3, 64, 7, stride=2)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for width, blocks, stride in _STAGES:
        for i in range(blocks):
            x = g.bottleneck(x, c_in, width, stride if i == 0 else 1)
            c_in = width * _EXPANSION
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    logits = g.op("Gemm", [x, *_standardised_fc(g, x, c_in)], transB=1)
    g.op("Softmax", [logits], output=OUTPUT_NAME, axis=1)
    return _finish(g, seed)


def _standardised_fc(g: _GraphBuilder, features: str, c_in: int) -> tuple[str, str]:
    """Random fc whose inputs are standardised per channel (the last BatchNorm's job)."""
    mean, std = fixed_point.channel_mean_std(g.values[features], axes=(0,), eps=1e-3)
    weight = (g.uniform((NUM_CLASSES, c_in), _FC_STD) / std).astype(np.float32)
    return g.const("fc_w", weight), g.const("fc_b", -fixed_point.exact_dot_rows(weight, mean))


def _finish(g: _GraphBuilder, seed: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        g.nodes,
        "resnet50_random_weights",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", IMAGE_SIZE, IMAGE_SIZE, 3])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", NUM_CLASSES])],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="model_repo.resnet50",
        doc_string=f"ResNet-50 with random weights (seed {seed}); predictions are meaningless.",
    )
    model.ir_version = 8  # the IR of opset 17; readable by older ONNX Runtime builds in Triton
    onnx.checker.check_model(model)
    return model


def parameter_count(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def placeholder_labels(count: int) -> list[str]:
    """ImageNet class names are not available offline: honest placeholders instead."""
    return [f"class_{i:04d}" for i in range(count)]


def with_uint8_input(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model behind a UINT8 input of the same name and shape: Cast to FP32, then x/255.

    For models whose single FP32 input expects pixel values in [0, 1] (the built-in ResNet-50
    and its QDQ INT8 copy). Keeping the input name means configs, clients and TensorRT
    profiles need no other change; only the tensor type differs.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())  # never edit the caller's copy
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    (source,) = [i for i in graph.input if i.name not in initializers]
    if source.type.tensor_type.elem_type != TensorProto.FLOAT:
        raise ValueError(f"input {source.name!r} is not FP32")
    name, scaled = source.name, _unused_name(model, f"{source.name}_fp32")
    for node in graph.node:  # every consumer of the old FP32 input now reads the scaled tensor
        inputs = [scaled if i == name else i for i in node.input]
        del node.input[:]
        node.input.extend(inputs)
    cast_out, scale = _unused_name(model, f"{name}_cast"), _unused_name(model, f"{name}_uint8_scale")
    front = [
        helper.make_node("Cast", [name], [cast_out], name=_unused_name(model, "uint8_cast"), to=TensorProto.FLOAT),
        helper.make_node("Mul", [cast_out, scale], [scaled], name=_unused_name(model, "uint8_scale")),
    ]
    graph.initializer.append(numpy_helper.from_array(np.array(UINT8_SCALE, dtype=np.float32), scale))
    nodes = [*front, *graph.node]  # topological order: the front runs first
    del graph.node[:]
    graph.node.extend(nodes)
    source.type.tensor_type.elem_type = TensorProto.UINT8
    model.doc_string = f"{model.doc_string} UINT8 input (cast and /255 in the graph).".strip()
    onnx.checker.check_model(model)
    return model


def _unused_name(model: onnx.ModelProto, wanted: str) -> str:
    """`wanted`, or wanted_2, wanted_3... if a tensor or node already has that name."""
    graph = model.graph
    taken = {*(t.name for t in graph.initializer), *(v.name for v in (*graph.input, *graph.output))}
    taken |= {n.name for n in graph.node} | {o for n in graph.node for o in (*n.input, *n.output)}
    name, number = wanted, 1
    while name in taken:
        number += 1
        name = f"{wanted}_{number}"
    return name
