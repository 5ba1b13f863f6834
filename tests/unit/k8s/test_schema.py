"""Every Kubernetes object the program declares passes the target cluster's schema, strictly."""

from __future__ import annotations

import pytest

from tests.support.stacks import evaluate
from triton_gke.k8s.schema import ManifestError, validate_manifest
from triton_gke.offline.plan_view import invalid_kubernetes_objects, kubernetes_objects


@pytest.mark.parametrize("version", ["1.35", "1.37"])
def test_all_declared_objects_are_schema_valid(version):
    plan = evaluate("prod", gpuDriverVersion="INSTALLATION_DISABLED", kubernetesVersion=version)
    assert kubernetes_objects(plan), "expected Kubernetes objects to check"
    assert invalid_kubernetes_objects(plan, version) == []


def test_a_misspelt_field_is_rejected_with_the_object_named():
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "locust-config", "namespace": "load"},
        "data": {"model": "original"},
        "dat": {},
    }
    with pytest.raises(ManifestError, match=r"ConfigMap load/locust-config: .*'dat' was unexpected"):
        validate_manifest(manifest, "1.33")


def test_a_removed_api_version_is_a_failure():
    manifest = {
        "apiVersion": "autoscaling/v2beta2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "triton"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "triton"}, "maxReplicas": 3},
    }
    with pytest.raises(ManifestError, match="not served by Kubernetes 1.33"):
        validate_manifest(manifest, "1.33")
