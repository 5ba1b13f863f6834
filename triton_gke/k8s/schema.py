"""Check Kubernetes objects against the OpenAPI schema of the cluster version a stack targets."""

from __future__ import annotations

import functools
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils

# kubernetes_validate.validate() reads and parses its schema files on every call, the 2 MB _definitions.json included
# (kubernetes_validate/utils.py validate -> schema_contents): 0.6 s of a plan's 44 objects. The files are the
# installed package's and never change while a process runs, so each is parsed once; nothing mutates a parsed
# schema (jsonschema and referencing only read it).
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)

# Groups whose kinds come from CRDs installed with their operator, not from Kubernetes' own schema.
CUSTOM_RESOURCE_GROUPS = ("monitoring.coreos.com",)


class ManifestError(ValueError):
    """An object the target cluster would reject; the message names kind, namespace and name."""


def describe(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    return f"{manifest.get('kind', '?')} {meta.get('namespace', '-')}/{meta.get('name', '?')}"


def validate_manifest(manifest: dict[str, Any], kubernetes_version: str) -> None:
    """Strict: unknown fields fail, and so does an API version the cluster no longer serves."""
    if str(manifest.get("apiVersion", "")).split("/")[0] in CUSTOM_RESOURCE_GROUPS:
        _check_custom_resource(manifest)
        return
    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        raise ManifestError(
            f"{describe(manifest)}: {manifest.get('apiVersion')} is not served by Kubernetes {kubernetes_version}"
        ) from None
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path)
        raise ManifestError(f"{describe(manifest)}: {where}: {err.message}") from None


def _check_custom_resource(manifest: dict[str, Any]) -> None:
    """The shape every custom resource needs; its fields are the operator's CRD's to check."""
    meta = manifest.get("metadata") or {}
    if not manifest.get("kind") or not meta.get("name") or not isinstance(manifest.get("spec"), dict):
        raise ManifestError(f"{describe(manifest)}: a custom resource needs kind, metadata.name and a spec")
