"""Physical names that fit Google Cloud's length and character rules and stay unique per stack.

The model bucket's name is a contract: `pulumi up` creates it (infra/model_store.py) and the local sandbox
(sandbox/run.py) uploads the same repository to the same name on its GCS emulator, so both serve gs://BUCKET/PREFIX.
"""

from __future__ import annotations

import hashlib
import re

# Bucket names: 3-63 characters of lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or
# digit (https://cloud.google.com/storage/docs/buckets#naming); gcp_name keeps to the '-' subset.
BUCKET_NAME_MAX = 63


def gcp_name(*parts: str, max_len: int = 40) -> str:
    """Lowercase, hyphen-joined name; too long ones are cut and given a short hash so they stay unique."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    if len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: max_len - 7].rstrip('-')}-{digest}"


def model_bucket_name(project: str, stack: str) -> str:
    """The name of the bucket that holds the stack's model repository."""
    return gcp_name(project, stack, "triton-models", max_len=BUCKET_NAME_MAX)
