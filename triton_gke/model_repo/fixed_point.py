"""Exact, machine-independent evaluation of the ONNX ops the built-in ResNet-50 uses.

Why: the builder folds BatchNorm statistics measured on synthetic images into the weights, and the INT8 recipe
calibrates activation ranges on more of them. Measured with ONNX Runtime's float32 kernels, those numbers depend on
the CPU (MLAS picks AVX2, AVX-512 or AVX-VNNI kernels, each summing in its own order), so two machines wrote
different model files, and a `pulumi up` from another machine re-uploaded every model and restarted every Triton pod.

Here every tensor is fixed point: integers held in float64, times a power of two. A convolution or matrix product of
integers below 2**BITS with K terms stays below 2**53, so float64 BLAS computes it exactly in any order, with or
without FMA, on any core count; everything else is an exact operation (max, sums of integers, a power-of-two scale)
or one correctly rounded IEEE operation (IEEE 754 requires +, -, *, / and sqrt to be correctly rounded: the same
bits on every conforming machine). The result is an approximation of the float model (BITS significant bits per
tensor), computed identically everywhere. Transcendental functions (exp: Softmax) are not offered: libm's results
differ between its FMA and non-FMA code paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Significant bits kept per tensor (activations and weights). Exactness needs
# 2 * BITS + log2(K) + 1 <= 53 for the largest reduction, K = 3 x 3 x 512 = 4,608 in ResNet-50 (13 bits): 19 fits.
BITS = 19
_EXACT_LIMIT = 2.0**53


class Unsupported(ValueError):
    """The graph uses an op (or attribute) this evaluator does not compute exactly; str() names it."""


@dataclass(frozen=True)
class Fixed:
    """value = ints * 2**exp, ints integral float64 values of magnitude at most 2**BITS (rounding can reach it)."""

    ints: np.ndarray
    exp: int

    def value(self) -> np.ndarray:
        return np.ldexp(self.ints, self.exp)

    def bounds(self) -> tuple[float, float]:
        """(min, max) of the values: exact, and representable in float32 (BITS <= 24 significant bits)."""
        return math.ldexp(float(self.ints.min()), self.exp), math.ldexp(float(self.ints.max()), self.exp)


def _top_bit(magnitude: float) -> int:
    """e with magnitude < 2**e (frexp is exact)."""
    return math.frexp(magnitude)[1]


def to_fixed(values: np.ndarray) -> Fixed:
    """Round float values to BITS significant bits of the tensor's largest magnitude (np.rint: half to even)."""
    values = np.asarray(values, dtype=np.float64)
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    if peak == 0.0:
        return Fixed(np.zeros_like(values), 0)
    exp = _top_bit(peak) - BITS
    return Fixed(np.rint(np.ldexp(values, -exp)), exp)


def _fit(ints: np.ndarray, exp: int) -> Fixed:
    """Drop low bits (exactly, then round) so the largest magnitude is below 2**BITS."""
    peak = float(np.max(np.abs(ints))) if ints.size else 0.0
    shift = max(0, _top_bit(peak) - BITS) if peak else 0
    return Fixed(np.rint(np.ldexp(ints, -shift)) if shift else ints, exp + shift)


def _check_exact(bound: float) -> None:
    if bound >= _EXACT_LIMIT:
        raise Unsupported(f"a sum could reach 2**{math.log2(bound):.0f}, beyond float64's exact integers")


# ---------------------------------------------------------------- ops (NCHW, as ONNX)


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _auto_pad(attrs: dict[str, object]) -> bool:
    """Whether the node pads by auto_pad (not computed here) rather than by explicit pads."""
    return attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET")


def _activation(value: Fixed | np.ndarray) -> Fixed:
    """An op's data input: an activation, or an initializer (a bias added by Add) made fixed point."""
    return value if isinstance(value, Fixed) else to_fixed(value)


def _matmul(x: Fixed, k: int, w: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, int]:
    """x.ints [M, K] @ w^T (w float [N, K], cut to BITS bits) + bias on the product's grid: (integers, exponent)."""
    wf = to_fixed(w)
    acc_exp = x.exp + wf.exp
    bias_ints = None if bias is None else np.rint(np.ldexp(np.asarray(bias, np.float64), -acc_exp))
    bound = k * 2.0 ** (2 * BITS) + (float(np.max(np.abs(bias_ints))) if bias_ints is not None else 0.0)
    _check_exact(bound)
    out = x.ints @ wf.ints.T
    if bias_ints is not None:
        out = out + bias_ints
    return out, acc_exp


def conv(x: Fixed, w: np.ndarray, bias: np.ndarray | None, strides: list[int], pads: list[int]) -> Fixed:
    """2-D convolution (group 1, dilation 1) by im2col and one exact matrix product."""
    n, c, _, _ = x.ints.shape
    c_out, c_in, kh, kw = w.shape
    if c_in != c:
        raise Unsupported(f"Conv: {c} input channels for a {c_in}-channel kernel (groups are not computed)")
    padded = np.pad(x.ints, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    windows = windows[:, :, :: strides[0], :: strides[1]]  # [N, C, Ho, Wo, kh, kw]
    ho, wo = windows.shape[2:4]
    columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * kh * kw)
    out, exp = _matmul(Fixed(columns, x.exp), c * kh * kw, w.reshape(c_out, -1), bias)
    return _fit(out.reshape(n, ho, wo, c_out).transpose(0, 3, 1, 2), exp)


def _conv_node(node: onnx.NodeProto, inputs: list[Fixed | np.ndarray]) -> Fixed:
    a = _attrs(node)
    if a.get("group", 1) != 1 or any(d != 1 for d in a.get("dilations", [1, 1])) or _auto_pad(a):
        raise Unsupported(f"Conv {node.name or node.output[0]!r}: groups, dilations or auto_pad")
    x, w, *rest = inputs
    k = list(a.get("kernel_shape", w.shape[2:]))
    if len(k) != 2 or list(w.shape[2:]) != k:
        raise Unsupported(f"Conv {node.name or node.output[0]!r}: only 2-D kernels")
    return conv(x, w, rest[0] if rest else None, list(a.get("strides", [1, 1])), list(a.get("pads", [0, 0, 0, 0])))


def _gemm_node(node: onnx.NodeProto, inputs: list[Fixed | np.ndarray]) -> Fixed:
    a = _attrs(node)
    if a.get("transA", 0) or not a.get("transB", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
        raise Unsupported(f"Gemm {node.name or node.output[0]!r}: only A @ B^T + C")
    x, w, *rest = inputs
    out, exp = _matmul(x, w.shape[1], w, rest[0] if rest else None)
    return _fit(out, exp)


def _max_pool_node(node: onnx.NodeProto, inputs: list[Fixed | np.ndarray]) -> Fixed:
    a = _attrs(node)
    x = inputs[0]
    kh, kw = a["kernel_shape"]
    pads, strides = list(a.get("pads", [0, 0, 0, 0])), list(a.get("strides", [1, 1]))
    if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])) or _auto_pad(a):
        raise Unsupported(f"MaxPool {node.name or node.output[0]!r}: ceil_mode, dilations or auto_pad")
    padded = np.pad(x.ints, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    return Fixed(windows[:, :, :: strides[0], :: strides[1]].max(axis=(4, 5)), x.exp)


def _add(x: Fixed, y: Fixed) -> Fixed:
    """Both on the finer grid (the coarser one shifted up by at most 2**(52 - BITS - 1), so the sum stays an exact
    integer below 2**52), summed, then fitted."""
    low, high = (x, y) if x.exp <= y.exp else (y, x)
    shift, limit = high.exp - low.exp, 52 - BITS - 1
    if shift > limit:  # the finer one's lowest bits cannot matter beside the other: coarsen it first
        low = Fixed(np.rint(np.ldexp(low.ints, limit - shift)), low.exp + shift - limit)
        shift = limit
    return _fit(low.ints + np.ldexp(high.ints, shift), low.exp)


def _global_average_pool(x: Fixed) -> Fixed:
    """Exact integer sums over H x W, then one correctly rounded division per value."""
    sums = x.ints.sum(axis=(2, 3), keepdims=True)  # integers below 2**(BITS + 13): exact in any order
    count = x.ints.shape[2] * x.ints.shape[3]
    peak = float(np.max(np.abs(sums)))
    shift = BITS - _top_bit(peak / count) if peak else 0
    return Fixed(np.rint(np.ldexp(sums, shift) / count), x.exp - shift)


_OPS: dict[str, Callable[[onnx.NodeProto, list], Fixed]] = {
    "Conv": _conv_node,
    "Gemm": _gemm_node,
    "MaxPool": _max_pool_node,
    "Relu": lambda node, inputs: Fixed(np.maximum(inputs[0].ints, 0.0), inputs[0].exp),
    "Add": lambda node, inputs: _add(_activation(inputs[0]), _activation(inputs[1])),
    "GlobalAveragePool": lambda node, inputs: _global_average_pool(inputs[0]),
    # Transpose without perm reverses the axes (ONNX operator spec, Transpose).
    "Transpose": lambda node, inputs: Fixed(np.transpose(inputs[0].ints, _attrs(node).get("perm")), inputs[0].exp),
    "Flatten": lambda node, inputs: _flatten(node, inputs[0]),
}


def _flatten(node: onnx.NodeProto, x: Fixed) -> Fixed:
    axis = int(_attrs(node).get("axis", 1))
    return Fixed(x.ints.reshape(math.prod(x.ints.shape[:axis]), -1), x.exp)


def run_node(node: onnx.NodeProto, inputs: list[Fixed | np.ndarray]) -> Fixed:
    """One node; activations as Fixed, initializers (weights, biases) as float arrays."""
    op = _OPS.get(node.op_type)
    if op is None or node.domain not in ("", "ai.onnx"):
        raise Unsupported(f"op {node.op_type!r} (node {node.name or node.output[0]!r}) is not computed exactly")
    if node.op_type not in ("Conv", "Gemm", "Add") and not isinstance(inputs[0], Fixed):
        raise Unsupported(f"{node.op_type} {node.name or node.output[0]!r} of a constant is not computed here")
    try:
        return op(node, inputs)
    except (ValueError, KeyError, IndexError, TypeError) as err:  # shapes or attributes this module does not follow
        raise Unsupported(f"{node.op_type} {node.name or node.output[0]!r}: {err}") from None


def tensor_bounds(model: onnx.ModelProto, feeds: dict[str, np.ndarray], skip: Iterable[str] = ()) -> dict:
    """(min, max) of the graph input and every node output for these inputs, exactly.

    Nodes whose op type is in `skip` are not evaluated (their outputs get no bounds); anything that needs one of
    their outputs raises Unsupported, as does any other op outside this module's set.
    """
    skipped = set(skip)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values: dict[str, Fixed | np.ndarray] = dict(weights)
    bounds: dict[str, tuple[float, float]] = {}
    for name, array in feeds.items():
        values[name] = to_fixed(array)
        bounds[name] = values[name].bounds()
    for node in model.graph.node:
        if node.op_type in skipped:
            continue
        missing = [i for i in node.input if i and i not in values]
        if missing:
            raise Unsupported(f"node {node.name or node.output[0]!r} needs {missing[0]!r}, which was not computed")
        result = run_node(node, [values[i] for i in node.input if i])
        values[node.output[0]] = result
        bounds[node.output[0]] = result.bounds()
    return bounds


# ---------------------------------------------------------------- statistics, exact


def channel_mean_std(x: Fixed, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation over `axes`, from exact integer sums.

    The values are first cut to 20 bits so their squares sum inside int64 (2**40 x 2**17 positions); sum and sum of
    squares are then exact whatever the order, and mean and variance are each one correctly rounded Python division.
    """
    coarse = _fit_bits(x, 20)
    ints = coarse.ints.astype(np.int64)
    count = math.prod(ints.shape[a] for a in axes)
    if count >= 1 << 22:
        raise Unsupported(f"statistics over {count} values would overflow int64")
    sums = ints.sum(axis=axes)
    squares = (ints * ints).sum(axis=axes)
    means, stds = [], []
    for total, square in zip(sums.ravel().tolist(), squares.ravel().tolist(), strict=True):
        means.append(math.ldexp(total / count, coarse.exp))
        variance = (count * square - total * total) / (count * count)  # exact integers, one rounding
        stds.append(math.ldexp(math.sqrt(variance), coarse.exp) + eps)
    return np.array(means).reshape(sums.shape), np.array(stds).reshape(sums.shape)


def _fit_bits(x: Fixed, bits: int) -> Fixed:
    peak = float(np.max(np.abs(x.ints))) if x.ints.size else 0.0
    shift = max(0, _top_bit(peak) - bits) if peak else 0
    return Fixed(np.rint(np.ldexp(x.ints, -shift)), x.exp + shift)


def exact_dot_rows(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector, each row's sum exactly rounded (math.fsum) from exactly rounded products."""
    products = np.asarray(matrix, np.float64) * np.asarray(vector, np.float64)
    return np.array([math.fsum(row) for row in products.tolist()])
