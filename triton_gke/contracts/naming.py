"""Physical names that fit Google Cloud's and Kubernetes' length and character rules and stay unique per stack.

The model bucket's name is a contract: `pulumi up` creates it (infra/model_store.py) and the local sandbox
(sandbox/run.py) uploads the same repository to the same name on its GCS emulator, so both serve gs://BUCKET/PREFIX.
The stack's Kubernetes service accounts, Workload Identity principals, are named by policy/principals.py, which the
policy pack imports too.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

# Bucket names (https://cloud.google.com/storage/docs/buckets#naming): lowercase letters, digits, dashes, underscores
# and dots; start and end with a letter or digit; 3-63 characters, up to 222 with dots, each dot-separated part at
# most 63; not an IP address in dotted-decimal notation; not beginning with "goog"; not containing "google" or a close
# misspelling such as "g00gle". The one rule: the component's model_repository (k8s/on_cluster_args.py) and the sync's
# destination (model_repo/sync.py) both ask bucket_name_problem. gcp_name keeps the stack's own bucket to the '-'
# subset and 63 characters.
BUCKET_NAME_MAX = 63
BUCKET_NAME_MAX_DOTTED = 222
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
BUCKET_PART = re.compile(r"[a-z0-9_-]{1,63}")
GOOGLE_LIKE = re.compile(r"g[o0][o0]gle")
# A DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names). The same rule as
# policy/principals.py DNS_LABEL (which this ground room may not import; tests/unit/policy/test_principals.py
# compares them).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
# A GPU's CUDA compute capability as Triton's cc_model_filenames keys it ("7.5" for a T4, "8.9" for an L4): MAJOR.MINOR
# with a one-digit minor, so model_repo/engines.py's plan names (cc75, cc89) stay unique. The one rule for the GPU
# table (settings/gpu_types.py), the model settings and configs (model_repo/settings.py, configs.py) and the plans.
COMPUTE_CAPABILITY = re.compile(r"([1-9][0-9]?)\.([0-9])")


def gcp_name(*parts: str, max_len: int = 40) -> str:
    """Lowercase, hyphen-joined name; too long ones are cut and given a short hash so they stay unique."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    if len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: max_len - 7].rstrip('-')}-{digest}"


# A model variant's name: a Triton model folder locally and an object prefix in gs://, so portable (letters, digits,
# '_', '-', '.', 1-64, not starting with a separator). One rule for the model repository's settings, the capacity
# records and the bench; use fullmatch (`$` would let a trailing line break through).
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


# Object names (https://cloud.google.com/storage/docs/naming-objects): UTF-8, no carriage return or line feed, not
# "." or "..", never starting with .well-known/acme-challenge/; the page strongly recommends against the control
# characters XML 1.0 forbids (#x7F-#x84, #x86-#x9F: they break XML listings) and "#", "[", "]", "*", "?" (gcloud reads
# "#<digits>" as a generation and the others as wildcards). Triton appends /MODEL/... to the prefix, so an empty part
# (//) or a "." or ".." part names objects it never finds.
OBJECT_AVOID = frozenset("#?[]*")
ACME_CHALLENGE = ".well-known/acme-challenge/"


def object_prefix_problem(prefix: str) -> str | None:
    """Why `prefix` (its parts between '/', without a leading or trailing '/') is not a model prefix in a bucket (one
    clause), or None. The one rule of the sync's destination (model_repo/sync.py) and the component's
    model_repository (k8s/on_cluster_args.py); the stack's modelPrefix keeps to a narrower set (settings/model_store).

    Stricter than GCS, which takes any UTF-8: no character that is not printable (every control character, NEL
    U+0085, U+2028, U+2029, format characters, every space but ' '), and no part starting or ending with a space:
    " models" names another prefix than "models", and a user who typed it by accident would never find the models.
    """
    if any(not c.isprintable() for c in prefix):
        return "no control characters, line breaks or spaces other than ' ' (not printable)"
    parts = prefix.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "no empty, '.' or '..' parts (no //)"
    if any(part != part.strip() for part in parts):
        return "no part may start or end with a space"
    if OBJECT_AVOID & set(prefix):
        return "no # ? [ ] * (GCS and gcloud read them as generations or wildcards)"
    if f"{prefix}/".startswith(ACME_CHALLENGE):
        return f"GCS reserves {ACME_CHALLENGE}"
    return None


def model_bucket_name(project: str, stack: str) -> str:
    """The name of the bucket that holds the stack's model repository."""
    return gcp_name(project, stack, "triton-models", max_len=BUCKET_NAME_MAX)


def bucket_name_problem(bucket: str) -> str | None:
    """Why `bucket` is not a valid Cloud Storage bucket name (one clause), or None."""
    if not BUCKET.fullmatch(bucket) or not all(BUCKET_PART.fullmatch(part) for part in bucket.split(".")):
        return (
            f"the bucket name takes 3-{BUCKET_NAME_MAX} lowercase letters, digits, -, _ (up to "
            f"{BUCKET_NAME_MAX_DOTTED} with dots, {BUCKET_NAME_MAX} between dots), starting and ending with a "
            "letter or digit"
        )
    if len(bucket) > BUCKET_NAME_MAX and "." not in bucket:
        return f"a bucket name without dots has at most {BUCKET_NAME_MAX} characters"
    if bucket.startswith("goog") or GOOGLE_LIKE.search(bucket):
        return 'a bucket name may not begin with "goog" or contain "google" or a misspelling of it'
    try:
        ipaddress.ip_address(bucket)
    except ValueError:
        return None
    return "a bucket name may not be an IP address"
