"""Build Triton model repositories (GPU configs + CPU twins) for the reference variants."""

from model_repo.errors import ModelRepoError
from model_repo.settings import (
    REFERENCE_VARIANTS,
    TRITON_IMAGE_TAG,
    ModelRepoSettings,
    VariantSettings,
    default_settings,
    validate_settings,
)

__all__ = [
    "REFERENCE_VARIANTS",
    "TRITON_IMAGE_TAG",
    "ModelRepoError",
    "ModelRepoSettings",
    "VariantSettings",
    "default_settings",
    "validate_settings",
]
