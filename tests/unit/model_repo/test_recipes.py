"""TensorRT engine recipes chosen by the image tag: TensorRT 10 flags up to 26.05, ModelOpt + --stronglyTyped after."""

from __future__ import annotations

import pytest

from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.recipes import (
    TRTEXEC_FLAGS,
    Recipe,
    job_problem,
    load_toolchains,
    needs_modelopt,
    recipe,
    recipe_problem,
    toolchain,
)


def test_the_table_maps_tags_to_tensorrt_cuda_and_drivers():
    assert (toolchain("25.06-py3").tensorrt_major, toolchain("25.06-py3").cuda) == (10, "12.9")
    assert toolchain("26.05-py3").tensorrt_major == 10 and toolchain("26.05-py3").runs_on(535)
    newest = toolchain("26.10-py3")
    assert (newest.tensorrt_major, newest.min_driver_branch) == (11, 580)
    assert newest.runs_on(580) and not newest.runs_on(535) and not newest.runs_on(570)
    assert len(load_toolchains()) == 3


@pytest.mark.parametrize("precision", ["FP32", "FP16", "INT8"])
def test_a_tensorrt_10_tag_uses_trtexec_precision_flags(precision):
    built = recipe("25.06-py3", precision)
    assert built.tensorrt_major == 10 and len(built.steps) == 1 and recipe_problem(built) is None
    (trtexec,) = built.steps
    assert trtexec[:3] == ("trtexec", "--onnx=model.onnx", "--saveEngine=model.plan")
    flags = {arg.split("=")[0] for arg in trtexec[1:]}
    assert flags <= TRTEXEC_FLAGS[10]
    assert {"FP32": set(), "FP16": {"--fp16"}, "INT8": {"--int8", "--calib"}}[precision] == flags & {
        "--fp16", "--int8", "--calib"
    }  # fmt: skip


def test_a_tensorrt_11_int8_recipe_quantizes_with_modelopt_and_never_uses_int8_or_calib():
    built = recipe("26.10-py3", "INT8")
    assert built.tensorrt_major == 11 and recipe_problem(built) is None
    quantize, trtexec = built.steps
    assert quantize[:3] == ("python", "-m", "modelopt.onnx.quantization")
    assert "--quantize_mode" in quantize and "calibration.npy" in quantize
    assert trtexec[1] == "--onnx=model.int8.qdq.onnx" and trtexec[-1] == "--stronglyTyped"
    flags = {arg.split("=")[0] for arg in trtexec[1:]}
    assert not flags & {"--int8", "--calib", "--fp16"} and ".cache" not in built.shell()


def test_a_tensorrt_11_fp16_recipe_autocasts_first():
    autocast, trtexec = recipe("26.06-py3", "FP16").steps
    assert autocast[:3] == ("python", "-m", "modelopt.onnx.autocast")
    assert trtexec[1] == "--onnx=model.fp16.onnx" and "--stronglyTyped" in trtexec and "--fp16" not in trtexec


def test_the_validator_refuses_tensorrt_10_flags_on_tensorrt_11():
    old = recipe("25.06-py3", "INT8")
    moved = Recipe("26.10-py3", 11, "INT8", old.steps)
    assert "has no --int8" in recipe_problem(moved)


def test_an_unknown_precision_or_tag_is_refused():
    with pytest.raises(ModelRepoError):
        recipe("26.10-py3", "BF16")
    with pytest.raises(ModelRepoError):
        recipe("27.01-py3", "FP16")


@pytest.mark.parametrize("tag", ["25.06-py3", "26.05-py3", "26.06-py3", "26.10-py3"])
@pytest.mark.parametrize("precision", ["FP32", "FP16", "INT8"])
def test_the_engine_build_job_runs_only_recipes_without_a_modelopt_step(tag, precision):
    """The Job's build step has trtexec and no ModelOpt (not shown in the TensorRT image, no install step as uid
    1000): a recipe with a ModelOpt step is refused with that reason, every other one is accepted."""
    for calibration in ("calibration", None):
        built = recipe(tag, precision, calibration=calibration)
        problem = job_problem(built)
        modelopt = built.tensorrt_major == 11 and (precision == "FP16" or (precision == "INT8" and calibration))
        assert needs_modelopt(built) is bool(modelopt)
        assert (problem is not None) is bool(modelopt)
        if problem:
            assert "ModelOpt" in problem and f"TensorRT {built.tensorrt_major}" in problem
