"""`triton-gke plan-folder` without --json (issue 48, point 6): each resource with what it is bound to (a component,
the provider a user passed, or the package's default provider), then the stack outputs; --json stays as it was."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from triton_gke.offline.plan_folder import print_plan, resource_rows, text_view
from triton_gke.offline.runtime import Plan, output_values, run_under_mocks


class Box(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Box", name, None, opts)
        pulumi.CustomResource("kubernetes:core/v1:Namespace", f"{name}-ns", {}, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def declare() -> None:
    cluster = pulumi.ProviderResource("kubernetes", "my-cluster", {})
    Box("boxed", pulumi.ResourceOptions(providers=[cluster]))
    pulumi.CustomResource("test:index:Thing", "loose", {})
    pulumi.export("endpoint", "http://boxed:8000")
    pulumi.export("ports", [8000, 8001])
    pulumi.export("key", pulumi.Output.secret("hunter2"))


def _outputs(plan: Plan) -> dict[str, Any]:
    """output_values awaits with asyncio.run, which leaves the main thread without an event loop; the next mock run
    needs one (as tests/unit/k8s/test_inference_auth.py does)."""
    try:
        return output_values(plan.outputs)
    finally:
        asyncio.set_event_loop(asyncio.new_event_loop())


@pytest.fixture(scope="module")
def plan() -> Plan:
    return run_under_mocks(declare, "dev", {}, "text")


def test_each_resource_shows_its_parent_and_its_provider(plan: Plan) -> None:
    lines = text_view(plan, _outputs(plan)).splitlines()
    assert lines[0] == "Resources (4):"
    assert "  test:index:Box  boxed  [component]" in lines
    assert "  kubernetes:core/v1:Namespace  boxed-ns  (in test:index:Box::boxed)  [provider my-cluster]" in lines
    assert "  test:index:Thing  loose  [default provider]" in lines
    assert "  pulumi:providers:kubernetes  my-cluster  [default provider]" in lines


def test_the_outputs_follow_the_resources_with_secrets_masked(plan: Plan) -> None:
    lines = text_view(plan, _outputs(plan)).splitlines()
    outputs = lines[lines.index("Outputs (3):") + 1 :]
    assert outputs == ['  endpoint = "http://boxed:8000"', '  key = "[secret]"', "  ports = [8000, 8001]"]
    assert "hunter2" not in "\n".join(lines)


def test_a_program_without_outputs_says_so() -> None:
    plan = run_under_mocks(lambda: Box("only"), "dev", {}, "text")
    assert text_view(plan, {}).splitlines()[-2:] == ["", "Outputs: none"]


def test_a_name_with_a_line_break_cannot_forge_a_line() -> None:
    plan = run_under_mocks(lambda: Box("a\nOutputs: none"), "dev", {}, "text")
    lines = text_view(plan, {}).splitlines()
    assert lines.count("Outputs: none") == 1
    assert len(lines) == 1 + 2 + 2  # the header, the box and its thing, the blank line and the outputs line


def test_json_is_the_rows_and_the_outputs_as_before(plan: Plan, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        print_plan(plan, as_json=True)
    finally:
        asyncio.set_event_loop(asyncio.new_event_loop())
    document = json.loads(capsys.readouterr().out)
    assert document == json.loads(json.dumps({"resources": resource_rows(plan), "outputs": _outputs(plan)}))
    assert set(document["resources"][0]) == {
        "urn",
        "type",
        "name",
        "parent",
        "provider",
        "providerUrn",
        "dependsOn",
        "inputs",
    }


@pytest.mark.parametrize("json_out", [True, False])
def test_the_programs_own_prints_go_to_stderr_not_into_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_out: bool
) -> None:
    """Red team of issue 48: one print() in the program broke `plan-folder --json` (its stdout went into the report)
    and, in the text report, could forge lines before the real resource list."""
    from triton_gke.offline import plan_folder

    (tmp_path / "Pulumi.yaml").write_text("name: printer\nruntime: python\n")
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi\nprint('Resources (99):\\n  forged')\n"
        "pulumi.CustomResource('test:index:Thing', 'real', {})\npulumi.export('answer', 42)\n"
    )
    asyncio.set_event_loop(asyncio.new_event_loop())  # an earlier test's asyncio.run left none (see _outputs)
    try:
        code = plan_folder.main([str(tmp_path), *(["--json"] if json_out else [])])
    finally:  # main's own asyncio.run leaves none either: the next test of this worker plans under the mocks
        asyncio.set_event_loop(asyncio.new_event_loop())
    assert code == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    assert "forged" not in out and "forged" in err
    if json_out:
        assert json.loads(out)["outputs"] == {"answer": 42}
    else:
        assert out.count("Resources (") == 1
