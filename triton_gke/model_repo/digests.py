"""The published SHA-256 of every model file the built-in recipe makes (model_repo/check_digests.py checks a build).

The built-in ResNet-50 and its INT8 copy are computed exactly (model_repo/fixed_point.py), so every x86-64 machine,
whatever its CPU and core count, writes the same bytes: builtin_digests.json beside this file records them per cache
key (the key names the recipe and the onnx / onnxruntime versions that wrote the file). A build whose bytes differ
for a published key says so on stderr (build.py): a `pulumi up` from that machine would upload other bytes and so
restart every Triton pod, which is what this file exists to prevent.
"""

from __future__ import annotations

import json
from functools import cache

from triton_gke.contracts.paths import BUILTIN_DIGESTS

DIGESTS_FILE = BUILTIN_DIGESTS
# The files of the built-in recipe, by role (build.ModelSource's fields).
ROLES = ("fp32", "int8", "fp32_uint8", "int8_uint8")


@cache
def published() -> dict[str, str]:
    """cache key -> SHA-256 of the built-in files this release published (empty if the file is absent)."""
    try:
        recorded = json.loads(DIGESTS_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {entry["cache_key"]: entry["sha256"] for entry in recorded["files"].values()}
