"""The exact evaluator behind the reproducible model build: ONNX Runtime's results to its precision, and the same
bits whatever order a sum is taken in (which float32 kernels do not give: the cause of builds differing by CPU)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tests.support.onnx_models import small_onnx
from triton_gke.model_repo import fixed_point

# Each value keeps BITS significant bits of its tensor's largest magnitude, per step: a few steps lose a few more.
TOLERANCE = 2.0 ** -(fixed_point.BITS - 6)


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], output: str) -> np.ndarray:
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([output], feeds)[0]


def _close(exact: np.ndarray, reference: np.ndarray, magnitude: float) -> None:
    """Within TOLERANCE of `magnitude`, the largest sum of magnitudes that enters one result (the usual bound of a
    rounded sum, sum |terms| x unit roundoff). Not of the result's own size: a sum that cancels (CI drew a 3x3 conv
    whose 0.0489 came from terms summing to ~15 in magnitude) is exact only to its terms' precision."""
    assert np.max(np.abs(exact - reference)) <= TOLERANCE * max(magnitude, 1e-30)


conv_cases = st.fixed_dictionaries(
    {
        "n": st.integers(1, 2),
        "c": st.integers(1, 4),
        "c_out": st.integers(1, 4),
        "size": st.integers(3, 7),
        "k": st.sampled_from([1, 3]),
        "stride": st.integers(1, 2),
        "pad": st.integers(0, 1),
        "seed": st.integers(0, 2**32 - 1),
        "magnitude": st.sampled_from([1e-3, 1.0, 300.0]),
    }
)


def _conv_inputs(case: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    x = (rng.standard_normal((case["n"], case["c"], case["size"], case["size"])) * case["magnitude"]).astype(np.float32)
    w = rng.standard_normal((case["c_out"], case["c"], case["k"], case["k"])).astype(np.float32)
    b = rng.standard_normal(case["c_out"]).astype(np.float32)
    return x, w, b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases)
def test_conv_agrees_with_onnx_runtime(case: dict) -> None:
    x, w, b = _conv_inputs(case)
    strides, pads = [case["stride"]] * 2, [case["pad"]] * 4
    exact = fixed_point.conv(fixed_point.to_fixed(x), w, b, strides, pads).value()
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=strides, pads=pads)
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    reference = _ort(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"x": x}, "y")
    assert exact.shape == reference.shape
    # Every output sums k x k x c products of an input (each kept to BITS bits of the tensor's largest) and a weight.
    _close(exact, reference, float(np.max(np.abs(x)) * np.abs(w).sum(axis=(1, 2, 3)).max() + np.abs(b).max()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases, st.randoms(use_true_random=False))
def test_conv_gives_the_same_bits_whatever_order_the_channels_are_summed_in(case: dict, random) -> None:
    """Permuting input channels (in the input and the kernel alike) reorders every sum: exact sums do not notice."""
    x, w, b = _conv_inputs(case)
    order = list(range(case["c"]))
    random.shuffle(order)
    strides, pads = [case["stride"]] * 2, [case["pad"]] * 4
    first = fixed_point.conv(fixed_point.to_fixed(x), w, b, strides, pads)
    again = fixed_point.conv(fixed_point.to_fixed(x[:, order]), w[:, order], b, strides, pads)
    assert first.exp == again.exp
    assert np.array_equal(first.ints, again.ints)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=2, max_size=64),
    st.integers(0, 2**32 - 1),
)
def test_channel_statistics_are_numpys_and_do_not_depend_on_the_order_of_the_values(values: list, seed: int) -> None:
    x = fixed_point.to_fixed(np.array(values, dtype=np.float32).reshape(1, -1))
    mean, std = fixed_point.channel_mean_std(x, axes=(1,), eps=0.0)
    rounded = x.value()
    scale = max(float(np.max(np.abs(rounded))), 1e-30)
    assert abs(mean[0] - rounded.mean()) <= 2.0**-18 * scale
    assert abs(std[0] - rounded.std()) <= 2.0**-9 * scale  # sqrt of a variance cut to 20 bits
    shuffled = np.random.default_rng(seed).permutation(x.ints.ravel()).reshape(x.ints.shape)
    again = fixed_point.channel_mean_std(fixed_point.Fixed(shuffled, x.exp), axes=(1,), eps=0.0)
    assert (mean[0], std[0]) == (again[0][0], again[1][0])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(-60, 60))
def test_add_is_commutative_and_close_to_the_float_sum_at_any_relative_scale(seed: int, shift: int) -> None:
    rng = np.random.default_rng(seed)
    a = fixed_point.to_fixed(rng.standard_normal(16))
    b = fixed_point.to_fixed(rng.standard_normal(16) * 2.0**shift)
    ab, ba = fixed_point._add(a, b), fixed_point._add(b, a)
    assert ab.exp == ba.exp and np.array_equal(ab.ints, ba.ints)
    _close(ab.value(), a.value() + b.value(), float(np.max(np.abs(a.value())) + np.max(np.abs(b.value()))))
    assert np.max(np.abs(ab.ints)) < 2**fixed_point.BITS


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_exact_dot_rows_is_the_correctly_rounded_sum_in_any_order(rows: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((rows, width)).astype(np.float32)
    vector = rng.standard_normal(width) * 1e3
    order = rng.permutation(width)
    got = fixed_point.exact_dot_rows(matrix, vector)
    assert np.array_equal(got, fixed_point.exact_dot_rows(matrix[:, order], vector[order]))
    assert np.array_equal(got, [math.fsum(r) for r in (matrix.astype(np.float64) * vector).tolist()])


def test_a_small_conv_net_has_onnx_runtimes_ranges(tmp_path) -> None:
    """tensor_bounds on a whole graph (Conv, Relu, GlobalAveragePool, Flatten, Gemm) against ONNX Runtime's outputs."""
    model = onnx.load(str(small_onnx(tmp_path / "small.onnx")))
    images = np.random.default_rng(3).random((4, 3, 32, 32), dtype=np.float32)
    bounds = fixed_point.tensor_bounds(model, {"pixels": images})
    for node in model.graph.node:
        name = node.output[0]
        probe = onnx.ModelProto.FromString(model.SerializeToString())
        probe.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
        reference = _ort(probe, {"pixels": images}, name)
        scale = float(np.max(np.abs(reference)))
        assert abs(bounds[name][0] - reference.min()) <= TOLERANCE * scale, name
        assert abs(bounds[name][1] - reference.max()) <= TOLERANCE * scale, name


def test_an_op_it_does_not_compute_is_refused_by_name() -> None:
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"], name="squash")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    with pytest.raises(fixed_point.Unsupported, match="'Sigmoid'.*'squash'"):
        fixed_point.tensor_bounds(helper.make_model(graph), {"x": np.ones((1, 2), np.float32)})
