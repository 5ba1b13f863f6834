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

from collections.abc import Iterable

from triton_gke.contracts.naming import COMPUTE_CAPABILITY
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import image_release


def engine_filename(tag: str, compute_capability: str) -> str:
    """The plan file of the Triton image `tag` for GPUs of `compute_capability` ("7.5")."""
    match = COMPUTE_CAPABILITY.fullmatch(compute_capability)
    if not match:
        raise ModelRepoError(f"compute capability {compute_capability!r} is not MAJOR.MINOR (e.g. 7.5)")
    year, month = image_release(tag)
    return f"model.{year:02d}.{month:02d}.cc{match.group(1)}{match.group(2)}.plan"


def cc_model_filenames(tag: str, compute_capabilities: Iterable[str]) -> dict[str, str]:
    """cc_model_filenames of a plan model served on every GPU type of `compute_capabilities`."""
    return {cc: engine_filename(tag, cc) for cc in sorted(set(compute_capabilities))}
