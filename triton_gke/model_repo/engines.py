"""Where a TensorRT engine lives: one plan per (Triton release, compute capability) beside the ONNX it is built from.

A TensorRT plan "is specific to a GPU's CUDA Compute Capability"; a model served on several GPU types names one plan per
compute capability in `cc_model_filenames` ("7.5" -> resnet50_T4.plan, "8.0" -> resnet50_A100.plan) and Triton loads
the one for the GPU it runs on (triton-inference-server/server docs/user_guide/model_repository.md "TensorRT Models" and
docs/user_guide/model_configuration.md "cc_model_filenames", as quoted in ../shared/reference/toolchain-2026-12.md §1).
A plan also only loads in the TensorRT version that built it ("Serialization assertion stdVersionRead ==
serializationVersion failed", server #7613): the Triton release is in the file name too, so a Triton upgrade names new
files instead of loading old ones. Name: `model.<YY.MM>.cc<major><minor>.plan`, e.g. model.25.06.cc75.plan for a T4
under 25.06-py3; the compute capability's minor is one digit (contracts/naming.py COMPUTE_CAPABILITY), so the names
are unique.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import one_line, read_text_file
from triton_gke.contracts.naming import COMPUTE_CAPABILITY, MODEL_NAME_RE
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import read_manifest, verify_repository
from triton_gke.model_repo.recipes import PRECISIONS, Recipe, recipe
from triton_gke.model_repo.settings import image_release


def engine_filename(tag: str, compute_capability: str) -> str:
    """The plan file of the Triton image `tag` for GPUs of `compute_capability` ("7.5")."""
    match = COMPUTE_CAPABILITY.fullmatch(compute_capability)
    if not match:
        raise ModelRepoError(f"compute capability {compute_capability!r} is not MAJOR.MINOR (e.g. 7.5)")
    year, month = image_release(tag)
    return f"model.{year:02d}.{month:02d}.cc{match.group(1)}{match.group(2)}.plan"


# Every name engine_filename gives, and only those (tests/unit/model_repo/test_engines.py generates both sides): how
# the sync (model_repo/sync.py) tells the engine-build Job's plan, which the Job writes into a staged version folder,
# from any other object someone else put there.
ENGINE_FILE = re.compile(r"model\.[0-9]{2}\.[0-9]{2}\.cc[1-9][0-9]?[0-9]\.plan")


def is_engine_file(name: str) -> bool:
    """Whether the last part of an object name is a plan file engine_filename names."""
    return ENGINE_FILE.fullmatch(name.rsplit("/", 1)[-1]) is not None


def cc_model_filenames(tag: str, compute_capabilities: Iterable[str]) -> dict[str, str]:
    """cc_model_filenames of a plan model served on every GPU type of `compute_capabilities`."""
    return {cc: engine_filename(tag, cc) for cc in sorted(set(compute_capabilities))}


# A config.pbtxt the build wrote is a few kB; a megabyte is not one (the bound of every read of a user's folder).
CONFIG_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class PlanModel:
    """A TensorRT variant as the built repository serves it: what its plan is built for."""

    name: str
    precision: str  # FP32, FP16, INT8
    max_batch_size: int
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # (name, dims without the batch) of each input, from its config
    # INT8 from an ONNX model with Q/DQ nodes (model_repo/quantize.py writes every INT8 variant so): explicit
    # quantization, no calibration.
    qdq: bool = True


def plan_input_problem(inputs: Sequence[tuple[str, Sequence[int]]]) -> str | None:
    """Why a plan cannot be built here for these inputs ((name, dims without the batch) each): the build names each
    input's shapes to trtexec as NAME:BATCHxD1x... joined by commas (engine_recipe), so there must be one, every
    dimension but the batch must be fixed and a name must be printable without ',' or ':'; and the warm-up that makes
    Triton report ready only once a plan answers needs fixed shapes too (configs._add_warmup)."""
    if not inputs:
        return "no input: a plan needs at least one"
    for name, dims in inputs:
        if not dims or any(d <= 0 for d in dims):
            return f"input {name!r} has dims {list(dims)}: a plan needs fixed dims besides the batch"
        if not name or not name.isprintable() or set(name) & set(",:"):
            return f"input {name!r}: a plan needs a printable input name without ',' or ':' (trtexec's shapes)"
    return None


def engine_recipe(tag: str, compute_capability: str, model: PlanModel) -> Recipe:
    """The commands that build `model`'s plan from its model.onnx, in the folder holding it, on a GPU of
    `compute_capability` in the image `tag`'s TensorRT: what the engine-build Job runs (k8s/engine_build.py) and what
    `triton-gke gpu-check` runs on a GPU at hand. One profile, batch 1 to max_batch_size, optimised at the largest."""

    def shapes(batch: int) -> str:
        return ",".join(f"{name}:{'x'.join(str(d) for d in (batch, *dims))}" for name, dims in model.inputs)

    return recipe(
        tag,
        model.precision,
        engine=engine_filename(tag, compute_capability),
        shapes=shapes(1),
        max_shapes=shapes(model.max_batch_size),
        calibration=None if model.precision == "INT8" and model.qdq else "calibration",
    )


def read_plan_config(path: Path) -> mc.ModelConfig:
    """A config.pbtxt, read bounded and parsed (not validated: see plan_models); ModelRepoError names the file."""
    try:
        return text_format.Parse(
            read_text_file(path, CONFIG_MAX_BYTES, "a model config", ModelRepoError), mc.ModelConfig()
        )
    except text_format.ParseError as err:
        raise ModelRepoError(f"{one_line(str(path))}: not a model config: {one_line(str(err))[:200]}") from None


def plan_models(root: Path) -> tuple[PlanModel, ...]:
    """The plan models of the built repository at `root`: each one whose config is `tensorrt_plan`, with the precision
    its build recorded (the manifest) and the inputs its config declares. Every file is first matched to the manifest
    (verify_repository), so each config is one the build validated (model_repo/build.py: configs.validate_config_text)
    and is only parsed here: light enough for the Pulumi program, which has no ONNX Runtime. ModelRepoError (one line)
    when a file differs from its build or no model is a plan."""
    verify_repository(root)
    variants = {v.get("name"): v for v in read_manifest(root).get("models") or [] if isinstance(v, dict)}
    found = []
    for path in sorted(Path(root).glob("*/config.pbtxt")):
        config = read_plan_config(path)
        if config.platform != "tensorrt_plan":
            continue
        # What the build checked (configs.validate_config_text, MODEL_NAME_RE, plan_input_problem), checked again: the
        # manifest's digests vouch for the bytes, not for who wrote them (a hand-made manifest matches any folder).
        folder = path.parent.name
        if config.name != folder or not MODEL_NAME_RE.fullmatch(config.name):
            raise ModelRepoError(f"{one_line(str(path))}: name {config.name!r} is not its folder's name {folder!r}")
        variant = variants.get(config.name, {})
        if variant.get("precision") not in PRECISIONS:
            raise ModelRepoError(f"{path}: the build manifest records no TensorRT precision for {config.name!r}")
        inputs = tuple((spec.name, tuple(spec.dims)) for spec in config.input)
        problem = plan_input_problem(inputs) or (None if config.max_batch_size >= 1 else "max_batch_size below 1")
        if problem:
            raise ModelRepoError(f"{one_line(str(path))}: {problem}")
        found.append(PlanModel(config.name, variant["precision"], config.max_batch_size, inputs))
    if not found:
        raise ModelRepoError(
            f"{root}: no TensorRT plan model; build them with "
            "`triton-gke model-repo --stack STACK --set tritonBuildEngines=true`"
        )
    return tuple(found)
