"""Check Kubernetes objects against the OpenAPI schema of the cluster version a stack targets."""

from __future__ import annotations

from typing import Any

import kubernetes_validate


class ManifestError(ValueError):
    """An object the target cluster would reject; the message names kind, namespace and name."""


def describe(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    return f"{manifest.get('kind', '?')} {meta.get('namespace', '-')}/{meta.get('name', '?')}"


def validate_manifest(manifest: dict[str, Any], kubernetes_version: str) -> None:
    """Strict: unknown fields fail, and so does an API version the cluster no longer serves."""
    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        raise ManifestError(
            f"{describe(manifest)}: {manifest.get('apiVersion')} is not served by Kubernetes {kubernetes_version}"
        ) from None
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path)
        raise ManifestError(f"{describe(manifest)}: {where}: {err.message}") from None
