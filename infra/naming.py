"""Physical names that fit GCP's length and character rules and stay unique per stack."""

from __future__ import annotations

import hashlib
import re


def gcp_name(*parts: str, max_len: int = 40) -> str:
    """Lowercase, hyphen-joined name; too long ones are cut and given a short hash so they stay unique."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    if len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: max_len - 7].rstrip('-')}-{digest}"
