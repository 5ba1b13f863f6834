"""Build Triton model repositories (GPU configs + CPU twins) for the reference variants."""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `model_repo` (the checkout's link), this is triton_gke.model_repo itself

# Below the call on purpose (E402): under the alias the module is already the canonical one.
from triton_gke.model_repo.errors import ModelRepoError  # noqa: E402
from triton_gke.model_repo.settings import (  # noqa: E402
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
