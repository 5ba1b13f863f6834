"""Physical names that fit Google Cloud's and Kubernetes' length and character rules and stay unique per stack.

The model bucket's name is a contract: `pulumi up` creates it (infra/model_store.py) and the local sandbox
(sandbox/run.py) uploads the same repository to the same name on its GCS emulator, so both serve gs://BUCKET/PREFIX.
Triton's Kubernetes service account is named per stack with dns_label (contracts/workloads.py
triton_service_account).
"""

from __future__ import annotations

import hashlib
import re

# Bucket names: 3-63 characters of lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or
# digit (https://cloud.google.com/storage/docs/buckets#naming); gcp_name keeps to the '-' subset.
BUCKET_NAME_MAX = 63
# A DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
# Hex digits of the hash dns_label appends: 32 bits, so two distinct names that both needed one collide with a
# chance of about n^2 / 2^33 among n such names.
DNS_LABEL_HASH = 8


def gcp_name(*parts: str, max_len: int = 40) -> str:
    """Lowercase, hyphen-joined name; too long ones are cut and given a short hash so they stay unique."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    if len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: max_len - 7].rstrip('-')}-{digest}"


def dns_label(*parts: str, max_len: int = DNS_LABEL_MAX) -> str:
    """The hyphen-joined parts as a DNS-1123 label of at most `max_len` characters.

    Unchanged when the joined text already is one; otherwise (upper case, '_' or '.', too long) lowercased, every run
    of other characters made '-', cut, and given the first DNS_LABEL_HASH hex digits of the SHA-256 of the text AS
    GIVEN, so texts that differ only in what sanitizing removed ('Dev' and 'dev', 'a_b' and 'a.b') still differ.
    """
    text = "-".join(parts)
    if len(text) <= max_len and DNS_LABEL.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:DNS_LABEL_HASH]
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    head = name[: max_len - DNS_LABEL_HASH - 1].rstrip("-")
    return f"{head}-{digest}" if head else digest


def model_bucket_name(project: str, stack: str) -> str:
    """The name of the bucket that holds the stack's model repository."""
    return gcp_name(project, stack, "triton-models", max_len=BUCKET_NAME_MAX)
