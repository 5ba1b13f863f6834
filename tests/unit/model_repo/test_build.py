"""The model repository builder: configs Triton accepts, the reference tuning, and refusals."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.onnx_models import small_onnx, uint8_copy
from triton_gke.infra.model_upload import built_repository_digest
from triton_gke.model_repo.__main__ import main
from triton_gke.model_repo.build import BuildResult, build_repository
from triton_gke.model_repo.configs import validate_config_text
from triton_gke.model_repo.engines import engine_recipe, plan_models
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.resnet50 import with_uint8_input
from triton_gke.model_repo.settings import (
    REFERENCE_VARIANTS,
    ModelRepoSettings,
    VariantSettings,
    default_settings,
    validate_settings,
)
from triton_gke.settings import ConfigError

pytest_plugins = ("tests.support.triton_fixtures", "tests.support.model_builds")


REFERENCE = {  # name: (precision, max batch, preferred, queue delay us, instances)
    "original": (None, 64, 64, 20000, 1),
    "trt_fp32": ("FP32", 64, 64, 20000, 1),
    "trt_fp16": ("FP16", 64, 64, 20000, 1),
    "trt_int8": ("INT8", 64, 64, 20000, 1),
    "trt_int8_bs16_count4": ("INT8", 16, 16, 20000, 4),
}


def load_config(folder: Path) -> mc.ModelConfig:
    return text_format.Parse((folder / "config.pbtxt").read_text(), mc.ModelConfig())


def tensorrt_params(config: mc.ModelConfig) -> dict[str, str] | None:
    accelerators = config.optimization.execution_accelerators.gpu_execution_accelerator
    trt = [a for a in accelerators if a.name == "tensorrt"]
    return dict(trt[0].parameters) if trt else None


# ---------------------------------------------------------------- the built repository
def test_every_config_parses_and_passes_validation(model_repos: BuildResult) -> None:
    configs = sorted([*model_repos.out.glob("*/config.pbtxt"), *model_repos.cpu_out.glob("*/config.pbtxt")])
    assert len(configs) == 10
    for path in configs:
        config = text_format.Parse(path.read_text(), mc.ModelConfig())
        assert config.name == path.parent.name
        validate_config_text(path.read_text(), path)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_variant_has_the_reference_tuning(model_repos: BuildResult, name: str) -> None:
    _, max_batch, preferred, delay, instances = REFERENCE[name]
    for root, kind in (
        (model_repos.out, mc.ModelInstanceGroup.KIND_GPU),
        (model_repos.cpu_out, mc.ModelInstanceGroup.KIND_CPU),
    ):
        config = load_config(root / name)
        assert config.max_batch_size == max_batch
        assert list(config.dynamic_batching.preferred_batch_size) == [preferred]
        assert config.dynamic_batching.max_queue_delay_microseconds == delay
        assert [(g.count, g.kind) for g in config.instance_group] == [(instances, kind)]
        assert [(i.name, list(i.dims)) for i in config.input] == [("input", [224, 224, 3])]
        assert [(o.name, list(o.dims)) for o in config.output] == [("probabilities", [1000])]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_tensorrt_accelerator_matches_the_variant(model_repos: BuildResult, name: str) -> None:
    precision, max_batch, preferred, *_ = REFERENCE[name]
    gpu = load_config(model_repos.out / name)
    assert (gpu.platform, gpu.backend) == ("onnxruntime_onnx", "onnxruntime")
    params = tensorrt_params(gpu)
    if precision is None:
        assert params is None
        return
    assert params["precision_mode"] == precision
    assert int(params["max_workspace_size_bytes"]) > 0
    assert params["trt_engine_cache_enable"] == "1"
    assert params["trt_engine_cache_path"].startswith(f"/trt-cache/{name}/")
    assert params["trt_profile_min_shapes"] == "input:1x224x224x3"
    assert params["trt_profile_opt_shapes"] == f"input:{preferred}x224x224x3"
    assert params["trt_profile_max_shapes"] == f"input:{max_batch}x224x224x3"
    twin = load_config(model_repos.cpu_out / name)
    assert twin.backend == "python" and tensorrt_params(twin) is None


def test_model_folders_hold_version_labels_and_the_right_onnx(model_repos: BuildResult) -> None:
    for name, (precision, *_) in REFERENCE.items():
        gpu, twin = model_repos.out / name, model_repos.cpu_out / name
        labels = (gpu / "labels.txt").read_text().splitlines()
        assert len(labels) == 1000 and labels[0] == "class_0000"
        assert load_config(gpu).output[0].label_filename == "labels.txt"
        assert (twin / "labels.txt").read_text() == (gpu / "labels.txt").read_text()
        assert (twin / "1" / "model.py").is_file()
        model = onnx.load(str(gpu / "1" / "model.onnx"))
        quantized = any(n.op_type == "QuantizeLinear" for n in model.graph.node)
        assert quantized == (precision == "INT8"), name
        assert (twin / "1" / "model.onnx").read_bytes() == (gpu / "1" / "model.onnx").read_bytes()


def test_builtin_model_is_a_resnet50_with_dynamic_batch(model_repos: BuildResult) -> None:
    model = onnx.load(str(model_repos.out / "original" / "1" / "model.onnx"))
    onnx.checker.check_model(model)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert 25_000_000 < params < 26_000_000
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 53  # 49 + 4 downsample shortcuts
    dims = [(d.dim_param or d.dim_value) for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 224, 224, 3]
    assert model.graph.output[0].name == "probabilities"


def test_rebuild_with_fewer_variants_replaces_the_repository(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    build_repository(default_settings(), out)
    result = build_repository(ModelRepoSettings(variants=default_settings().variants[:1]), out)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["original"]
    assert result.models == ("original",)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_a_rebuild_with_the_same_settings_keeps_the_built_folder_and_a_changed_one_is_replaced(tmp_path: Path) -> None:
    """A same-settings rebuild (every `make plan`/`make sandbox` runs one) leaves the folder in place, so a reader
    beside it never meets the moment between the swap's two renames; a tampered or extra file is still rebuilt."""
    source = small_onnx(tmp_path / "small.onnx")
    settings = ModelRepoSettings(variants=REFERENCE_VARIANTS[:2], source=str(source))
    out, cache = tmp_path / "repo", tmp_path / "cache"
    build_repository(settings, out, cache_dir=cache)
    first = out.stat().st_ino
    build_repository(settings, out, cache_dir=cache)
    assert out.stat().st_ino == first
    (out / "original" / "labels.txt").write_text("tampered\n")
    build_repository(settings, out, cache_dir=cache)
    assert out.stat().st_ino != first and (out / "original" / "labels.txt").read_text() != "tampered\n"
    second = out.stat().st_ino
    (out / "stray.txt").write_text("not the build's\n")
    build_repository(settings, out, cache_dir=cache)
    assert out.stat().st_ino != second and not (out / "stray.txt").exists()
    third = out.stat().st_ino
    build_repository(ModelRepoSettings(variants=REFERENCE_VARIANTS[:1], source=str(source)), out, cache_dir=cache)
    assert out.stat().st_ino != third and sorted(p.name for p in out.iterdir() if p.is_dir()) == ["original"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging or lock left


def _bytes_written() -> int:
    """Bytes this process has written so far (wchar of proc_pid_io(5))."""
    return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("wchar:"))[6:])


def test_a_same_settings_rebuild_copies_no_model_and_no_build_shares_a_file_with_the_cache(tmp_path: Path) -> None:
    """Every `make plan` rebuilds: it copied each model (100 MB for ResNet-50) to compare and throw away. Now only a
    build that changes the folder copies them; the built files never are the cache's (an edit would reach it)."""
    model = onnx.load(str(small_onnx(tmp_path / "small.onnx")))
    padding = np.zeros(1 << 20, np.float32)  # 4 MB the graph does not use: a model large enough to see its copies
    model.graph.initializer.append(numpy_helper.from_array(padding, "padding"))
    source = tmp_path / "padded.onnx"
    onnx.save(model, str(source))
    settings = ModelRepoSettings(variants=REFERENCE_VARIANTS[:3], source=str(source))  # all three serve one file
    out, cache = tmp_path / "repo", tmp_path / "cache"
    build_repository(settings, out, cache_dir=cache)
    model_bytes = (out / "original" / "1" / "model.onnx").stat().st_size
    before = _bytes_written()
    build_repository(settings, out, cache_dir=cache)
    assert _bytes_written() - before < model_bytes  # configs and the manifest only
    (out / "trt_fp16" / "config.pbtxt").write_text("tampered\n")
    build_repository(settings, out, cache_dir=cache)  # rebuilt: copies again
    cached = {p.stat().st_ino for p in cache.glob("*.onnx")}
    built = [p.stat() for p in out.rglob("model.onnx")]
    assert len(built) == 3 and not cached & {st.st_ino for st in built}
    assert len({(st.st_ino, st.st_size) for st in built if st.st_size == model_bytes}) == 1  # one copy, linked
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


# ---------------------------------------------------------------- UINT8 input


def test_uint8_variants_declare_a_uint8_input_everywhere(uint8_repos: BuildResult) -> None:
    for root in (uint8_repos.out, uint8_repos.cpu_out):
        for name in ("original_uint8", "trt_int8_uint8"):
            config = load_config(root / name)
            assert [(i.name, mc.DataType.Name(i.data_type), list(i.dims)) for i in config.input] == [
                ("input", "TYPE_UINT8", [224, 224, 3])
            ]
            assert [mc.DataType.Name(w.data_type) for w in config.model_warmup[0].inputs.values()] == ["TYPE_UINT8"]
            model = onnx.load(str(root / name / "1" / "model.onnx"), load_external_data=False)
            assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.UINT8
        assert mc.DataType.Name(load_config(root / "original").input[0].data_type) == "TYPE_FP32"
    params = tensorrt_params(load_config(uint8_repos.out / "trt_int8_uint8"))
    assert params["precision_mode"] == "INT8" and params["trt_profile_max_shapes"] == "input:64x224x224x3"
    int8 = onnx.load(str(uint8_repos.out / "trt_int8_uint8" / "1" / "model.onnx"))
    assert any(n.op_type == "QuantizeLinear" for n in int8.graph.node)


def test_uint8_front_works_on_a_user_onnx_with_its_own_names(tmp_path: Path) -> None:
    source = small_onnx(tmp_path / "small.onnx")
    variants = (uint8_copy(REFERENCE_VARIANTS[0]),)
    settings = ModelRepoSettings(variants=variants, source=str(source))
    build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache")
    config = load_config(tmp_path / "repo" / "original_uint8")
    assert [(i.name, mc.DataType.Name(i.data_type), list(i.dims)) for i in config.input] == [
        ("pixels", "TYPE_UINT8", [3, 32, 32])
    ]


def test_uint8_front_leaves_the_callers_model_alone(tmp_path: Path) -> None:
    model = onnx.load(str(small_onnx(tmp_path / "small.onnx")))
    before = model.SerializeToString()
    wrapped = with_uint8_input(model)
    assert model.SerializeToString() == before
    assert [n.op_type for n in wrapped.graph.node[:2]] == ["Cast", "Mul"]
    assert wrapped.graph.node[2].input[0] == wrapped.graph.node[1].output[0]  # the conv reads the scaled pixels
    with pytest.raises(ValueError, match="not FP32"):
        with_uint8_input(wrapped)


# ---------------------------------------------------------------- other sources
def test_user_onnx_gets_configs_with_its_own_names(tmp_path: Path) -> None:
    source = small_onnx(tmp_path / "small.onnx")
    out, cpu = tmp_path / "repo", tmp_path / "cpu"
    rc = main(["--out", str(out), "--cpu-out", str(cpu), "--onnx", str(source), "--variants", "original,trt_int8",
               "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    assert rc == 0
    for root in (out, cpu):
        for name in ("original", "trt_int8"):
            config = load_config(root / name)
            assert [(i.name, list(i.dims)) for i in config.input] == [("pixels", [3, 32, 32])]
            assert [(o.name, list(o.dims)) for o in config.output] == [("scores", [10])]
            assert len((root / name / "labels.txt").read_text().splitlines()) == 10
    assert tensorrt_params(load_config(out / "trt_int8"))["trt_profile_max_shapes"] == "pixels:64x3x32x32"
    int8 = onnx.load(str(out / "trt_int8" / "1" / "model.onnx"))
    assert any(n.op_type == "QuantizeLinear" for n in int8.graph.node)


def test_plans_for_every_compute_capability_replace_onnx_runtime_for_the_tensorrt_variants(tmp_path: Path) -> None:
    """plan_compute_capabilities (the stack's tritonBuildEngines): one config serves a T4 and an L4, each its own plan;
    the model.onnx stays as the Job's source; the manifest says so, and the upload refuses the build for settings
    without plans (their Triton pods would load configs that name plans no Job builds)."""
    source = small_onnx(tmp_path / "small.onnx")
    variants = tuple(v for v in REFERENCE_VARIANTS if v.name in ("original", "trt_fp16", "trt_int8"))
    settings = ModelRepoSettings(variants=variants, source=str(source), plan_compute_capabilities=("8.9", "7.5"))
    out = build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache").out
    for name in ("trt_fp16", "trt_int8"):
        config = load_config(out / name)
        assert config.platform == "tensorrt_plan" and tensorrt_params(config) is None
        assert dict(config.cc_model_filenames) == {"7.5": "model.25.06.cc75.plan", "8.9": "model.25.06.cc89.plan"}
        assert (out / name / "1" / "model.onnx").is_file() and not list((out / name / "1").glob("*.plan"))
    assert load_config(out / "original").backend == "onnxruntime"
    assert json.loads((out / ".model_repo.json").read_text())["plan_compute_capabilities"] == ["7.5", "8.9"]
    assert built_repository_digest(settings, "dev", out)
    with pytest.raises(ConfigError, match="built from other model settings"):
        built_repository_digest(dataclasses.replace(settings, plan_compute_capabilities=()), "dev", out)
    # What the Job builds each plan for: the precision built, the config's own input names and shapes (this ONNX's
    # `pixels`, 3x32x32), one profile from batch 1 to the variant's max.
    models = {m.name: m for m in plan_models(out)}
    assert sorted(models) == ["trt_fp16", "trt_int8"] and models["trt_int8"].precision == "INT8"
    (trtexec,) = engine_recipe("25.06-py3", "7.5", models["trt_int8"]).steps
    assert trtexec == ("trtexec", "--onnx=model.onnx", "--saveEngine=model.25.06.cc75.plan",
                       "--minShapes=pixels:1x3x32x32", "--optShapes=pixels:64x3x32x32",
                       "--maxShapes=pixels:64x3x32x32", "--int8")  # fmt: skip


@given(st.text(max_size=6))
def test_a_compute_capability_that_is_not_major_minor_is_refused_in_one_line(cc: str) -> None:
    settings = ModelRepoSettings(plan_compute_capabilities=(cc,))
    if re.fullmatch(r"[1-9][0-9]?\.[0-9]", cc):  # what Triton's cc_model_filenames keys look like ("7.5")
        validate_settings(settings)
        return
    with pytest.raises(ModelRepoError, match="not a compute capability MAJOR.MINOR") as refused:
        validate_settings(settings)
    assert str(refused.value).startswith("plan_compute_capabilities: ") and "\n" not in str(refused.value)


def test_saved_model_is_served_by_the_tensorflow_backend_on_old_images(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    (saved / "variables").mkdir(parents=True)
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")
    out = tmp_path / "repo"
    rc = main(
        ["--out", str(out), "--saved-model", str(saved), "--image-tag", "25.02-py3", "--variants", "original,trt_fp16"]
    )
    assert rc == 0
    config = load_config(out / "trt_fp16")
    assert config.platform == "tensorflow_savedmodel"
    assert tensorrt_params(config) == {"precision_mode": "FP16", "max_workspace_size_bytes": "1073741824"}
    assert (out / "trt_fp16" / "1" / "model.savedmodel" / "saved_model.pb").is_file()


# ---------------------------------------------------------------- refusals
def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "notes.txt").write_text("this is not a model\n")
    (tmp / "saved").mkdir()
    (tmp / "saved" / "saved_model.pb").write_bytes(b"\x08\x01")
    (tmp / "foreign").mkdir()
    (tmp / "foreign" / "keep.txt").write_text("mine")
    fixed = small_onnx(tmp / "fixed.onnx", batch=1)
    split = onnx.load(str(small_onnx(tmp / "split.onnx")))
    onnx.save(split, str(tmp / "split.onnx"), save_as_external_data=True, location="split.data", size_threshold=0)
    return {
        "missing model file": (["--onnx", str(tmp / "nope.onnx")], "nope.onnx"),
        "not an ONNX model": (["--onnx", str(tmp / "notes.txt")], "notes.txt"),
        "fixed batch dimension": (["--onnx", str(fixed)], "fixed.onnx"),
        "external weights file": (["--onnx", str(tmp / "split.onnx")], "external data"),
        "unknown variant": (["--variants", "original,trt_int4"], "trt_int4"),
        "preferred above max": (["--set", "trt_fp16.preferred_batch_size=128"], "preferred_batch_size"),
        "zero max batch": (["--set", "original.max_batch_size=0"], "max_batch_size"),
        "negative queue delay": (["--set", "trt_int8.max_queue_delay_us=-5"], "max_queue_delay_us"),
        "no instances": (["--set", "trt_int8_bs16_count4.instance_count=0"], "instance_count"),
        "unknown precision": (["--set", "trt_fp32.precision=INT4"], "INT4"),
        "non-integer batch": (["--set", "original.max_batch_size=lots"], "max_batch_size"),
        "bad image tag": (["--image-tag", "latest"], "triton_image_tag"),
        "SavedModel on a new image": (["--saved-model", str(tmp / "saved")], "25.02"),
        "SavedModel with INT8": (["--saved-model", str(tmp / "saved"), "--image-tag", "24.08-py3"], "INT8"),
        "foreign output folder": (["--out", str(tmp / "foreign")], "foreign"),
        "unknown flag": (["--max-batch", "3"], "--max-batch"),
    }


BAD_CASES = [
    "missing model file",
    "not an ONNX model",
    "fixed batch dimension",
    "external weights file",
    "unknown variant",
    "preferred above max",
    "zero max batch",
    "negative queue delay",
    "no instances",
    "unknown precision",
    "non-integer batch",
    "bad image tag",
    "SavedModel on a new image",
    "SavedModel with INT8",
    "foreign output folder",
    "unknown flag",
]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    args, fragment = _bad_inputs(tmp_path)[case]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = ["--out", str(tmp_path / "out" / "repo")] if "--out" not in args else []
    rc = main([*out, "--cpu-out", str(tmp_path / "out" / "cpu"), "--cache-dir", str(tmp_path / "cache"), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert fragment in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("variants", "fragment"),
    [
        ((), "at least one"),
        ((VariantSettings("a", "FP16", 8, 8, 0, 1), VariantSettings("a", "FP32", 8, 8, 0, 1)), "duplicate"),
        ((VariantSettings("a/b", "FP16", 8, 8, 0, 1),), "'a/b'"),
        ((VariantSettings("..", "FP16", 8, 8, 0, 1),), "'..'"),
        ((VariantSettings("x", "FP16", 8, 9, 0, 1),), "variant 'x': preferred_batch_size"),
        ((VariantSettings("x", "FP16", 8, 8, 0, 1, "INT4"),), "variant 'x': input_dtype 'INT4' is not one of FP32"),
        ((VariantSettings("x", "FP16", 8, 8, 0, 1, "uint8"),), "input_dtype 'uint8'"),
    ],
)
def test_validate_settings_names_the_offending_variant(variants: tuple, fragment: str) -> None:
    with pytest.raises(ModelRepoError) as caught:
        validate_settings(ModelRepoSettings(variants=variants))
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_uint8_input_is_refused_for_a_saved_model(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")
    variants = (uint8_copy(REFERENCE_VARIANTS[0]),)
    with pytest.raises(ModelRepoError) as caught:
        validate_settings(ModelRepoSettings(variants=variants, source=str(saved), triton_image_tag="24.08-py3"))
    assert str(caught.value).startswith("variant 'original_uint8': input_dtype UINT8 is not available")
    assert "\n" not in str(caught.value)


def test_uint8_input_is_refused_for_a_model_without_one_fp32_input(tmp_path: Path) -> None:
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 4])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("Cast", ["ids"], ["out"], to=TensorProto.FLOAT)], "ids", [ids], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "ids.onnx"))
    settings = ModelRepoSettings(variants=(uint8_copy(REFERENCE_VARIANTS[0]),), source=str(tmp_path / "ids.onnx"))
    with pytest.raises(ModelRepoError) as caught:
        build_repository(settings, tmp_path / "repo", cache_dir=tmp_path / "cache")
    message = str(caught.value)
    assert message.startswith("variant 'original_uint8': input_dtype UINT8 needs a model with one FP32 input")
    assert "ids INT64" in message and "\n" not in message
    assert not (tmp_path / "repo").exists()


# ---------------------------------------------------------------- config validation
CONFIG_EDITS = {  # what a hand edit might break: (old text, new text, expected fragment)
    "syntax error": ("max_batch_size: 64", "max_batch_size: 64 {", "config.pbtxt:"),
    "unknown enum": ("KIND_GPU", "KIND_TPU", "KIND_TPU"),
    "preferred above max": ("preferred_batch_size: 64", "preferred_batch_size: 128", "preferred size"),
    "name not folder": ('name: "trt_fp16"', 'name: "other"', "does not match its folder"),
    "zero dim": ("dims: 1000", "dims: 0", "dims must be positive"),
    "unknown trt key": ('"precision_mode"', '"precision"', "'precision' is unknown"),
    "unknown precision": ('value: "FP16"', 'value: "FP8"', "precision_mode='FP8'"),
    "no instances": ("count: 1", "count: 0", "instance_group count"),
    "missing model file": ('"model.onnx"', '"model.plan"', "1/model.plan is missing"),
    "missing labels": ('"labels.txt"', '"classes.txt"', "classes.txt"),
}


@pytest.mark.parametrize("edit", sorted(CONFIG_EDITS))
def test_validate_config_text_rejects_what_triton_would(model_repos: BuildResult, edit: str) -> None:
    old, new, fragment = CONFIG_EDITS[edit]
    path = model_repos.out / "trt_fp16" / "config.pbtxt"
    text = path.read_text()
    assert old in text
    with pytest.raises(ModelRepoError) as caught:
        validate_config_text(text.replace(old, new), path)
    assert str(caught.value).startswith(str(path)) and fragment in str(caught.value)


# ---------------------------------------------------------------- reproducible builds


def _sigmoid_net(path: Path) -> Path:
    """A model with an op the exact evaluator does not compute (Sigmoid): its INT8 copy is calibrated by ORT."""
    weights = numpy_helper.from_array(np.random.default_rng(0).random((4, 12), dtype=np.float32), "w")
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"]),
        helper.make_node("Gemm", ["f", "w"], ["g"], transB=1),
        helper.make_node("Sigmoid", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sigmoid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 2, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_machine_dependent_int8_file_built_elsewhere_leaves_the_upload_digest_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORT-calibrated INT8 bytes can differ between CPUs: the same recipe built 'elsewhere' (a cache wiped and the
    file's last bytes different) must not change the sync trigger, while an exactly built file enters by its bytes."""
    from triton_gke.infra.model_upload import built_repository_digest
    from triton_gke.model_repo import quantize

    settings = ModelRepoSettings(variants=REFERENCE_VARIANTS, source=str(_sigmoid_net(tmp_path / "m.onnx")))
    build_repository(settings, tmp_path / "here", cache_dir=tmp_path / "cache-here")
    real = quantize.quantize_int8

    def on_another_cpu(fp32: Path, out: Path) -> bool:
        exact = real(fp32, out)
        model = onnx.load(str(out))
        model.doc_string = "calibrated on another CPU"  # other bytes, same recipe
        onnx.save(model, str(out))
        return exact

    monkeypatch.setattr(quantize, "quantize_int8", on_another_cpu)
    build_repository(settings, tmp_path / "there", cache_dir=tmp_path / "cache-there")
    here, there = (
        tmp_path / "here" / "trt_int8" / "1" / "model.onnx",
        tmp_path / "there" / "trt_int8" / "1" / "model.onnx",
    )
    assert here.read_bytes() != there.read_bytes()
    digest = built_repository_digest(settings, "dev", tmp_path / "here")
    assert built_repository_digest(settings, "dev", tmp_path / "there") == digest

    # A file that is not machine-dependent (here: the mark removed) enters by its bytes: the digests part.
    for folder in ("here", "there"):
        manifest_path = tmp_path / folder / ".model_repo.json"
        manifest = json.loads(manifest_path.read_text())
        assert set(manifest.pop("machine_dependent")) == {"trt_int8/1/model.onnx", "trt_int8_bs16_count4/1/model.onnx"}
        manifest_path.write_text(json.dumps(manifest))
    assert built_repository_digest(settings, "dev", tmp_path / "here") != built_repository_digest(
        settings, "dev", tmp_path / "there"
    )


def test_the_builtin_int8_model_is_exact_so_its_bytes_enter_the_digest(model_repos: BuildResult) -> None:
    manifest = json.loads((model_repos.out / ".model_repo.json").read_text())
    assert "machine_dependent" not in manifest


def test_a_built_file_other_than_the_published_one_is_served_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from triton_gke.model_repo import build, digests

    monkeypatch.setattr(digests, "published", lambda: {"k" * 32: "0" * 64})
    build._warn_if_unpublished("k" * 32, "1" * 64)
    warning = capsys.readouterr().err
    assert warning.startswith("warning: kkkk") and "re-uploads" in warning and warning.count("\n") == 1
    build._warn_if_unpublished("k" * 32, "0" * 64)
    build._warn_if_unpublished("other", "1" * 64)
    assert capsys.readouterr().err == ""


def _conv_net(path: Path, conv: dict, pool: dict, bias: bool, weight_fill: float | None) -> Path:
    """NCHW 4x8x8 -> Conv (attributes given) -> Relu -> MaxPool (given) -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(1)
    groups = conv.get("group", 1)
    weight = rng.standard_normal((4, 4 // groups, 3, 3)).astype(np.float32)
    if weight_fill is not None:
        weight.flat[0] = weight_fill
    weights = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(rng.random((5, 4), np.float32), "fc")]
    conv_inputs = ["x", "w"]
    if bias:
        weights.append(numpy_helper.from_array(rng.random(4, np.float32), "b"))
        conv_inputs.append("b")
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], kernel_shape=[3, 3], **conv),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], **pool),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


_conv_attrs = st.fixed_dictionaries(
    {},
    optional={
        "group": st.sampled_from([1, 2, 4]),
        "dilations": st.sampled_from([[1, 1], [2, 2]]),
        "strides": st.sampled_from([[1, 1], [2, 1]]),
        "pads": st.sampled_from([[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0]]),
    },
)
_pool_attrs = st.one_of(
    st.fixed_dictionaries({}, optional={"pads": st.just([0, 0, 1, 1]), "ceil_mode": st.sampled_from([0, 1])}),
    st.fixed_dictionaries({"auto_pad": st.sampled_from(["SAME_UPPER", "VALID"])}),
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(_conv_attrs, _pool_attrs, st.booleans(), st.sampled_from([None, None, float("nan"), float("inf")]))
def test_a_users_int8_build_serves_a_loadable_model_or_is_refused_in_one_line(
    tmp_path: Path, conv: dict, pool: dict, bias: bool, weight_fill: float | None
) -> None:
    """Generated conv nets with the attributes ONNX allows: the INT8 copy loads in ONNX Runtime and tracks the FP32
    model, marked machine-dependent exactly when the exact evaluator could not compute it; else one line, no file."""
    import onnxruntime as ort

    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    source = _conv_net(folder / "net.onnx", conv, pool, bias, weight_fill)
    settings_ = ModelRepoSettings(variants=(REFERENCE_VARIANTS[0], REFERENCE_VARIANTS[3]), source=str(source))
    try:
        build_repository(settings_, folder / "out", cache_dir=folder / "cache")
    except ModelRepoError as err:
        assert weight_fill is not None, err  # finite models of these shapes all quantise
        assert str(err).startswith(f"{source}: ") and "\n" not in str(err)
        assert not (folder / "out").exists()
        return
    assert weight_fill is None
    images = np.random.default_rng(2).random((3, 4, 8, 8), dtype=np.float32)
    # The model's own arithmetic, not this CPU's integer kernels: at ORT_ENABLE_ALL, ONNX Runtime fuses Q/DQ into
    # u8s8 kernels that overflow on x86 CPUs without VNNI (onnxruntime commit "Add a graph optimization that convert
    # u8s8 matrix multiplication to u8u8 if needed", citing oneDNN's "Nuances of int8 computations"; the
    # reduce_range FAQ of onnxruntime.ai/docs/performance/model-optimizations/quantization.html): on an AVX2-only AMD
    # EPYC this net's INT8 outputs correlated 0.40 with FP32 there, 0.998 at ORT_ENABLE_BASIC, which leaves the Q/DQ
    # pairs unfused. TensorRT, which serves these files, quantises from the same Q/DQ pairs.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    run = {
        name: ort.InferenceSession(str(folder / "out" / name / "1" / "model.onnx"), options).run(None, {"x": images})[0]
        for name in ("original", "trt_int8")
    }
    # INT8 of a 4-channel net is coarse (14 % of the peak on one output, the same with ORT's own calibration):
    # it must track the FP32 outputs, not equal them.
    assert np.corrcoef(run["original"].ravel(), run["trt_int8"].ravel())[0, 1] >= 0.95
    manifest = json.loads((folder / "out" / ".model_repo.json").read_text())
    inexact = (
        conv.get("group", 1) != 1 or conv.get("dilations") == [2, 2] or "auto_pad" in pool or pool.get("ceil_mode")
    )
    assert ("machine_dependent" in manifest) == bool(inexact)
