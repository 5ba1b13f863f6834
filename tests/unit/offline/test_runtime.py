"""What offline/runtime.py assumes of Pulumi's Python SDK beyond its public mock API, checked on the installed SDK.

The plan and the tests evaluate the program through offline/runtime.py (the sandbox and bench read their settings
without it, through settings/), so a pulumi upgrade that moves one of these assumptions would break them at once.
Each test here checks one assumption and fails with the pulumi version and the line of offline/runtime.py to update.
The public API used is the one of https://www.pulumi.com/docs/iac/guides/testing/unit/ and pulumi/examples'
testing-unit-py (Mocks, set_mocks, test).
"""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2

from tests.support.checkout import PROJECT_DIR
from triton_gke.offline import runtime
from triton_gke.offline.runtime import SECRET_SIG, SIG_KEY, Plan, run_under_mocks

RUNTIME_SOURCE = Path(runtime.__file__)


def where(marker: str) -> str:
    """offline/runtime.py:LINE of the first line containing `marker` (so the message stays right as the file moves)."""
    for number, line in enumerate(RUNTIME_SOURCE.read_text().splitlines(), 1):
        if marker in line:
            return f"offline/runtime.py:{number}"
    raise AssertionError(f"offline/runtime.py no longer contains {marker!r}: update this contract test")


def broken(marker: str, what: str) -> str:
    version = importlib.metadata.version("pulumi")
    return f"pulumi {version} broke an assumption of the offline runtime: {what}; update {where(marker)}"


def run(declare: Any, stack: str = "contract") -> Plan:
    return run_under_mocks(declare, stack, {}, "contract")


class Thing(pulumi.CustomResource):
    """A custom resource of a type no provider knows: the mocks answer for it, no plugin is needed."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("contract:index:Thing", name, props, opts)


# --- the MockMonitor subclass -------------------------------------------------------------------------------------


def test_mock_monitor_is_still_the_class_set_mocks_takes() -> None:
    marker = "class RecordingMonitor(pulumi_mocks.MockMonitor)"
    assert inspect.isclass(getattr(pulumi_mocks, "MockMonitor", None)), broken(marker, "mocks.MockMonitor is gone")
    assert "monitor" in inspect.signature(pulumi.runtime.set_mocks).parameters, broken(
        marker, "set_mocks() no longer takes monitor="
    )
    assert list(inspect.signature(pulumi_mocks.MockMonitor.__init__).parameters) == ["self", "mocks"], broken(
        marker, "MockMonitor(mocks) changed its constructor"
    )
    assert callable(getattr(pulumi_mocks.MockMonitor, "RegisterResource", None)), broken(
        marker, "MockMonitor.RegisterResource is gone"
    )


@pytest.mark.parametrize(
    "field,kind",
    [
        ("type", "string"),
        ("name", "string"),
        ("parent", "string"),
        ("provider", "string"),
        ("dependencies", "repeated string"),
        ("custom", "bool"),
        ("protect", "bool"),
        ("customTimeouts", "message"),
        ("ignoreChanges", "repeated string"),
        ("replaceOnChanges", "repeated string"),
        ("deleteBeforeReplace", "bool"),
    ],
)
def test_register_request_has_the_fields_the_monitor_reads(field: str, kind: str) -> None:
    # Field names of RegisterResourceRequest in Pulumi's resource monitor protocol:
    # https://github.com/pulumi/pulumi/blob/master/proto/pulumi/resource.proto
    descriptor = resource_pb2.RegisterResourceRequest.DESCRIPTOR.fields_by_name.get(field)
    marker = f"request.{field}" if field != "customTimeouts" else "request.customTimeouts"
    assert descriptor is not None, broken(marker, f"RegisterResourceRequest has no field {field!r}")
    kinds = {
        "string": descriptor.type == descriptor.TYPE_STRING,
        "repeated string": descriptor.type == descriptor.TYPE_STRING and descriptor.is_repeated,
        "bool": descriptor.type == descriptor.TYPE_BOOL,
        "message": descriptor.type == descriptor.TYPE_MESSAGE,
    }
    assert kinds[kind], broken(marker, f"RegisterResourceRequest.{field} is no longer a {kind}")


def test_custom_timeouts_still_carry_create_update_delete() -> None:
    timeouts = resource_pb2.RegisterResourceRequest.DESCRIPTOR.fields_by_name["customTimeouts"].message_type
    missing = {"create", "update", "delete"} - set(timeouts.fields_by_name)
    assert not missing, broken("def _custom_timeouts", f"CustomTimeouts lost {sorted(missing)}")


def test_the_monitor_records_parent_dependencies_timeouts_and_protect_from_a_real_registration() -> None:
    """End to end through the SDK: every field the monitor reads arrives with the value the program declared."""

    def declare() -> None:
        group = pulumi.ComponentResource("contract:index:Group", "group")
        first = Thing("first", {"size": 1}, pulumi.ResourceOptions(parent=group))
        Thing(
            "second",
            {"size": 2},
            pulumi.ResourceOptions(
                parent=group,
                depends_on=[first],
                protect=True,
                custom_timeouts=pulumi.CustomTimeouts(create="7m", delete="3m"),
                ignore_changes=["size"],
                replace_on_changes=["zone"],
                delete_before_replace=True,
            ),
        )

    plan = run(declare)
    marker = "class RecordingMonitor(pulumi_mocks.MockMonitor)"
    by_name = {r.name: r for r in plan.resources}
    assert set(by_name) == {"group", "first", "second"}, broken(marker, f"recorded {sorted(by_name)}")
    group, first, second = by_name["group"], by_name["first"], by_name["second"]
    assert not group.custom and first.custom, broken("custom=bool(request.custom)", "custom flag lost")
    assert second.parent is group and first.parent is group, broken("parent_urn=request.parent", "parent lost")
    assert first.urn in second.dependencies, broken("dependencies=list(request.dependencies)", "depends_on lost")
    assert second.protect and not first.protect, broken("protect=bool(request.protect)", "protect lost")
    assert second.custom_timeouts == {"create": "7m", "delete": "3m"}, broken(
        "def _custom_timeouts", f"timeouts read as {second.custom_timeouts}"
    )
    assert first.custom_timeouts == {}, broken("def _custom_timeouts", "timeouts where none were declared")
    assert second.inputs == {"size": 2}, broken("inputs=_plain(args.inputs)", f"inputs read as {second.inputs}")
    # The lifecycle comparison (offline/lifecycle.py) leaves ignored paths out and honours the replacement options.
    assert (second.ignore_changes, second.replace_on_changes) == (["size"], ["zone"]), broken(
        "ignore_changes=list(request.ignoreChanges)", f"read {second.ignore_changes}, {second.replace_on_changes}"
    )
    assert second.delete_before_replace and not first.delete_before_replace and first.ignore_changes == [], broken(
        "delete_before_replace=bool(request.deleteBeforeReplace)", "deleteBeforeReplace lost"
    )


# --- inputs and secrets -------------------------------------------------------------------------------------------


def test_secret_signature_is_the_protocol_constant_the_sdk_uses() -> None:
    # The SDK's own copies are private (rpc._special_*): reading them here is the point, to catch drift.
    marker = "SECRET_SIG = "
    assert rpc._special_sig_key == SIG_KEY, broken("SIG_KEY = ", "the signature key changed")
    assert rpc._special_secret_sig == SECRET_SIG, broken(marker, "the secret signature changed")
    assert rpc.wrap_rpc_secret("x") == {SIG_KEY: SECRET_SIG, "value": "x"}, broken(
        marker, f"a secret input now looks like {rpc.wrap_rpc_secret('x')!r}"
    )


SCALARS = st.one_of(st.text(max_size=12), st.integers(-(2**31), 2**31), st.booleans())
# Property values as a program passes them: scalars, lists and maps (no None: the protocol drops null properties).
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.from_regex(r"[a-z][a-zA-Z0-9]{0,8}", fullmatch=True), inner, max_size=3)
    ),
    max_leaves=8,
)
PROPS = st.dictionaries(st.from_regex(r"[a-z][a-zA-Z0-9]{0,10}", fullmatch=True), VALUES, min_size=1, max_size=4)


def masked(value: Any) -> Any:
    """What the plan shows of a secret: the structure, every scalar replaced."""
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return "[secret]"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resources=st.lists(st.tuples(PROPS, st.sets(st.integers(0, 3))), min_size=1, max_size=6))
def test_recorded_inputs_are_the_declared_ones_with_secrets_masked(resources: list[tuple[dict, set[int]]]) -> None:
    """Many resources register at once from the SDK's executor threads: each record keeps its own inputs."""

    def declare() -> None:
        for index, (props, secret_positions) in enumerate(resources):
            declared = {
                key: pulumi.Output.secret(value) if position in secret_positions else value
                for position, (key, value) in enumerate(props.items())
            }
            Thing(f"r{index}", declared)

    plan = run(declare)
    recorded = {r.name: r.inputs for r in plan.resources}
    for index, (props, secret_positions) in enumerate(resources):
        expected = {
            key: masked(value) if position in secret_positions else value
            for position, (key, value) in enumerate(props.items())
        }
        assert recorded[f"r{index}"] == expected, broken(
            "inputs=_plain(args.inputs)", f"declared {props}, recorded {recorded[f'r{index}']}"
        )


def test_a_monitor_that_stops_calling_new_resource_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """If an upgrade stopped handing MockResourceArgs to the mocks, the plan must refuse, not record no inputs."""

    def without_mocks(self: Any, request: Any) -> Any:
        return resource_pb2.RegisterResourceResponse(urn=self.make_urn(request.parent, request.type, request.name))

    monkeypatch.setattr(pulumi_mocks.MockMonitor, "RegisterResource", without_mocks)
    with pytest.raises(Exception, match="no longer calls Mocks.new_resource"):
        run(lambda: Thing("lonely", {"a": "b"}))


# --- the root stack -----------------------------------------------------------------------------------------------


def test_reset_options_clears_the_root_stack() -> None:
    run(lambda: pulumi.export("before", 1))
    assert pulumi.runtime.get_root_resource() is not None, broken(
        "pulumi.runtime.reset_options()", "set_mocks no longer creates a root Stack"
    )
    pulumi.runtime.reset_options()
    assert pulumi.runtime.get_root_resource() is None, broken(
        "pulumi.runtime.reset_options()", "reset_options() no longer clears the root resource"
    )


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), min_size=2, max_size=3, unique=True))
def test_programs_run_one_after_another_do_not_share_a_stack(stacks: list[str]) -> None:
    plans = [
        run(lambda stack=stack: (pulumi.export(f"only-{stack}", stack), Thing("t", {})), stack) for stack in stacks
    ]
    for stack, plan in zip(stacks, plans, strict=True):
        assert set(plan.outputs) == {f"only-{stack}"}, broken(
            "pulumi.runtime.reset_options()", f"stack {stack} sees the outputs {sorted(plan.outputs)}"
        )
        # A resource's URN is urn:pulumi:STACK::PROJECT::QUALIFIED-TYPE::NAME, and a child of the root Stack has its
        # own type alone (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8 pkg/resource/deploy/deployment.go
        # generateURN: "don't use the root stack type"; offline/runtime.py engine_urn).
        urns = [r.urn for r in plan.resources]
        expected = f"urn:pulumi:{stack}::contract::contract:index:Thing::t"
        assert urns == [expected], broken("pulumi.runtime.reset_options()", f"stack {stack} recorded {urns}")


def test_exports_land_on_the_root_stack_outputs() -> None:
    plan = run(lambda: pulumi.export("answer", 42))
    assert "answer" in plan.outputs, broken(
        'getattr(pulumi.runtime.get_root_resource(), "outputs"', "pulumi.export no longer fills Stack.outputs"
    )


def test_the_monitor_still_makes_urns_through_make_urn_and_hands_over_transforms() -> None:
    """RecordingMonitor overrides make_urn (the engine's URN) and runs the transforms MockResourceArgs carries."""
    marker = "def make_urn(self, parent: str, type_: str, name: str)"
    params = list(inspect.signature(pulumi_mocks.MockMonitor.make_urn).parameters)
    assert params == ["self", "parent", "type_", "name"], broken(marker, "MockMonitor.make_urn changed")
    assert "self.make_urn(" in inspect.getsource(pulumi_mocks.MockMonitor.RegisterResource), broken(
        marker, "RegisterResource no longer calls make_urn"
    )
    assert "transforms" in inspect.signature(pulumi.runtime.MockResourceArgs).parameters, broken(
        "args.transforms", "MockResourceArgs has no transforms"
    )
    assert callable(getattr(pulumi_mocks.MockMonitor, "get_registered_transforms", None)), broken(
        "get_registered_transforms", "MockMonitor.get_registered_transforms is gone"
    )


def test_only_the_offline_runtime_reaches_past_the_public_pulumi_api() -> None:
    """Issue 21: public Pulumi API only. The program, the components and the tools use pulumi.* as documented;
    the few private pieces the mock runtime needs (MockMonitor, the root Stack's outputs) live in offline/runtime.py,
    pinned by the tests above. No module reads pulumi.runtime.config's CONFIG (infra/config.py reads the engine's
    PULUMI_CONFIG bag through the public get_config_env)."""
    import re

    import triton_gke

    private = re.compile(r"pulumi\.runtime\.config|runtime_config\.CONFIG|\bCONFIG\.get\(|pulumi\.runtime\.mocks|"
                         r"pulumi\.[a-z_.]*\._[a-z]|from pulumi[a-z_.]* import _")  # fmt: skip
    package_root = Path(triton_gke.__file__).resolve().parent.parent
    offenders = []
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        if relative.parts[0] in {".venv", "build", "tests", "examples"} or relative == Path("offline/runtime.py"):
            continue
        lines = enumerate(path.read_text().splitlines(), 1)
        offenders += [f"{relative}:{n}" for n, line in lines if private.search(line)]
    assert offenders == []


def test_a_failed_plan_leaves_no_event_loop_open_for_interpreter_shutdown(tmp_path, monkeypatch, capsys):
    """A plan that fails inside the program (here: no model repository built) must close every event loop the mock
    runtime made, the worker threads' too: an open one is closed by its __del__ at interpreter shutdown, which can
    run after its self-pipe socket was collected and print a ValueError traceback under the one-line error (CI)."""
    import asyncio

    from triton_gke.offline import plan

    repo = PROJECT_DIR
    (tmp_path / "Pulumi.dev.yaml").write_text((repo / "Pulumi.dev.yaml").read_text())
    (tmp_path / "__main__.py").write_text((repo / "__main__.py").read_text())
    monkeypatch.chdir(tmp_path)
    runtime.close_event_loop()  # earlier runs in this process leave worker threads that have their loops already
    made: list[asyncio.AbstractEventLoop] = []
    original = asyncio.BaseEventLoop.__init__

    def recording_init(self: asyncio.BaseEventLoop, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(asyncio.BaseEventLoop, "__init__", recording_init)
    assert plan.main(["--stack", "dev"]) == 2
    assert "no model repository built" in capsys.readouterr().err
    current = asyncio.get_event_loop_policy().get_event_loop()
    left_open = [loop for loop in made if not loop.is_closed() and loop is not current]
    assert len(made) >= 3 and not left_open, f"{len(left_open)} of {len(made)} event loops left open"
