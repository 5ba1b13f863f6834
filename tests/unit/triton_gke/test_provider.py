"""The component provider (triton_gke/provider.py): its committed schema, its hosted components, the YAML example."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

import triton_gke
from tests.support.checkout import PROJECT_DIR
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
    # The package's version as semver, which the generated SDKs take (respectSchemaVersion); test_release.py checks it
    # against pyproject.toml with every other reader.
    assert committed_schema()["version"] == provider.pulumi_version(triton_gke.__version__)


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


# --- the version Pulumi is served -------------------------------------------------------------------------------------
# semver.org's own regular expression for a valid semantic version (https://semver.org/, "Is there a suggested regular
# expression"): what blang/semver, which Pulumi's schema binder uses (pulumi/pulumi pkg/codegen/schema/bind.go), parses.
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@pytest.mark.parametrize(
    ("pep440", "semver"),
    [
        ("0.3.0", "0.3.0"),  # a release tag's wheel
        ("0.3.1.dev2+g4782ccd3e", "0.3.1-dev.2+g4782ccd3e"),  # two commits after it
        ("0.3.1.dev2+g4782ccd3e.d20261203", "0.3.1-dev.2+g4782ccd3e.d20261203"),  # with uncommitted changes
        ("0.0.1.dev313+ge59a6b25d", "0.0.1-dev.313+ge59a6b25d"),  # a clone without release tags
        ("0+unknown", "0.0.0+unknown"),  # not installed
        ("1.0rc1", "1.0.0-rc.1"),
        ("2.1a3.dev4", "2.1.0-alpha.3.dev.4"),
    ],
)
def test_the_served_version_is_the_semantic_version_of_the_package(pep440: str, semver: str) -> None:
    assert provider.pulumi_version(pep440) == semver


_numbers = st.integers(0, 10**6)


@given(
    st.lists(_numbers, min_size=1, max_size=4),
    st.none() | st.tuples(st.sampled_from(["a", "b", "rc"]), _numbers),
    st.none() | _numbers,
    st.none() | _numbers,
    st.none() | st.from_regex(r"[a-z0-9]{1,8}(\.[a-z0-9]{1,8}){0,2}", fullmatch=True),
)
def test_every_pep440_version_becomes_a_semantic_version_pulumi_parses(release, pre, post, dev, local) -> None:
    text = ".".join(map(str, release))
    text += f"{pre[0]}{pre[1]}" if pre else ""
    text += f".post{post}" if post is not None else ""
    text += f".dev{dev}" if dev is not None else ""
    text += f"+{local}" if local else ""
    version = Version(text)
    served = provider.pulumi_version(text)
    assert SEMVER.match(served), (text, served)
    # The release and the pre-release/development markers survive (they order versions); the rest is build metadata.
    assert served.split("-")[0].split("+")[0] == ".".join(map(str, (*version.release, 0, 0)[:3]))
    assert ("-" in served.split("+")[0]) == (version.pre is not None or version.dev is not None)
