"""Build Triton model repositories (GPU configs + CPU twins) for the reference variants."""

from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import (
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
