"""The component provider (triton_gke/provider.py): its committed schema, its hosted components, the YAML example."""

from __future__ import annotations

import json
from typing import Any

import yaml

import triton_gke
from tests.conftest import PROJECT_DIR
from triton_gke import provider

REPO = PROJECT_DIR


PLUGIN_DIR = REPO / "triton_gke" / "plugin"


YAML_EXAMPLE = REPO / "examples" / "on-cluster-yaml" / "Pulumi.yaml"


TOKEN = "triton-gke:index:TritonOnCluster"


def committed_schema() -> dict[str, Any]:
    return json.loads(provider.SCHEMA_FILE.read_text())


def test_committed_schema_is_what_the_analyzer_infers() -> None:
    assert provider.schema_text() == provider.SCHEMA_FILE.read_text(), (
        "triton_gke/schema.json is stale: run `.venv/bin/python -m triton_gke.provider --write-schema` and commit it"
    )


def test_schema_holds_the_contract_of_triton_on_cluster() -> None:
    resource = committed_schema()["resources"][TOKEN]
    assert resource["isComponent"] is True
    assert resource["requiredInputs"] == ["modelRepository"]
    expected_inputs = {
        "modelRepository", "kubeconfig", "gpuNodeSelector", "gpuTolerationKey", "minReplicas", "maxReplicas",
        "imageTag", "modelReaderServiceAccount", "serviceAccountName", "autoscaling", "monitoring", "loadTest",
    }  # fmt: skip
    assert expected_inputs <= set(resource["inputProperties"])
    assert {"namespace", "httpEndpoint", "grpcEndpoint"} <= set(resource["properties"])
    # No version: the installed package's (from the git tag) is stamped when the provider serves the schema.
    assert "version" not in committed_schema()


def test_hosted_components_are_the_public_ones() -> None:
    for name in provider.COMPONENTS:
        public = getattr(triton_gke, name, None)
        assert public is not None, f"triton_gke does not export {name}, which the provider hosts"
        assert public in provider.component_classes()


# --- the YAML example against the committed schema ------------------------------------------------------------------
def test_yaml_example_uses_only_what_the_schema_declares() -> None:
    program = yaml.safe_load(YAML_EXAMPLE.read_text())
    schema = committed_schema()
    assert (YAML_EXAMPLE.parent / program["packages"]["triton-gke"]).resolve() == PLUGIN_DIR
    assert (PLUGIN_DIR / "PulumiPlugin.yaml").exists() and (PLUGIN_DIR / "__main__.py").exists()
    ours = {name: r for name, r in program["resources"].items() if r["type"].startswith("triton-gke:")}
    assert ours, "the example declares no triton-gke resource"
    for name, resource in ours.items():
        spec = schema["resources"].get(resource["type"])
        assert spec is not None, f"{name}: {resource['type']} is not in the schema"
        properties = resource.get("properties", {})
        assert set(properties) <= set(spec["inputProperties"]), (
            f"{name}: unknown {set(properties) - set(spec['inputProperties'])}"
        )
        assert set(spec.get("requiredInputs", [])) <= set(properties), f"{name}: a required input is missing"
    for output in program["outputs"].values():
        resource, _, attribute = output.strip("${}").partition(".")
        assert attribute in schema["resources"][ours[resource]["type"]]["properties"], output
