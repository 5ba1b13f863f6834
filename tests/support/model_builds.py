"""A model repository whose variants take a UINT8 input, shared by the unit and live tests of model_repo/build.py.

Use the fixture from a test module with `pytest_plugins = ("tests.support.model_builds",)`.
"""

from __future__ import annotations

import pytest

from tests.support.onnx_models import uint8_copy
from triton_gke.model_repo.build import BuildResult, build_repository
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings


@pytest.fixture(scope="module")
def uint8_repos(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    """original and trt_int8 behind a UINT8 input, beside the FP32 original (files from build/cache)."""
    original, int8 = REFERENCE_VARIANTS[0], REFERENCE_VARIANTS[3]
    settings = ModelRepoSettings(variants=(original, uint8_copy(original), uint8_copy(int8)))
    root = tmp_path_factory.mktemp("uint8")
    return build_repository(settings, root / "gpu", root / "cpu")
