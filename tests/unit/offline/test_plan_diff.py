"""offline.plan_diff: what a refactoring changed between two plans, resource by resource (TYPE::NAME)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.offline.plan_diff import diff_plans, load_plan, main

COMPONENT = "triton-gke:k8s:Old"


NEW_COMPONENT = "triton-gke:k8s:New"


HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


DEPLOYMENT = "kubernetes:apps/v1:Deployment"


PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def record(
    type_: str, name: str, parent: tuple[str, str] | None = None, inputs: Any = None, depends: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A plan record as `make plan ARGS=--json` writes it; `parent` is (type, name)."""
    qualified = f"{parent[0]}${type_}" if parent else f"pulumi:pulumi:Stack${type_}"
    return {
        "urn": f"urn:pulumi:dev::triton-gke::{qualified}::{name}",
        "type": type_,
        "name": name,
        "parent": parent[1] if parent else None,
        "provider": None,
        "dependsOn": sorted(depends),
        "customTimeouts": {},
        "protect": False,
        "inputs": {} if inputs is None else inputs,
    }


def write(folder: Path, name: str, records: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")
    return path


def run_main(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, list[str], list[str]]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def moved_hpa_plans() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Before: an HPA inside component `old`, an alarm that depends on it. After: the HPA inside a new component."""
    old = record(COMPONENT, "old")
    hpa_before = record(HPA, "old-hpa", (COMPONENT, "old"), {"spec": {"minReplicas": 1}})
    new = record(NEW_COMPONENT, "new")
    hpa_after = record(HPA, "old-hpa", (NEW_COMPONENT, "new"), {"spec": {"minReplicas": 1}})
    before = [old, hpa_before, record(DEPLOYMENT, "alarm", (COMPONENT, "old"), depends=(hpa_before["urn"],))]
    after = [old, new, hpa_after, record(DEPLOYMENT, "alarm", (COMPONENT, "old"), depends=(hpa_after["urn"],))]
    return before, after


def test_a_moved_resource_is_reported_as_reparented_and_allowed_only_when_asked(tmp_path, capsys):
    plan_before, plan_after = moved_hpa_plans()
    before, after = write(tmp_path, "before.json", plan_before), write(tmp_path, "after.json", plan_after)
    code, out, err = run_main(capsys, before, after)
    assert code == EXIT_FAILED and err == []
    assert f"added       {NEW_COMPONENT}::new (parent None)" in out
    assert f"reparented  {HPA}::old-hpa: parent old -> new" in out
    # The alarm's dependency moved with the HPA: the same resource, so no change of the alarm.
    assert not [line for line in out if "alarm" in line]
    assert out[-1].endswith("1 added, 0 removed, 1 reparented, 0 changed; 2 unexpected")
    code, out, _ = run_main(capsys, before, after, "--allow-new-type", NEW_COMPONENT, "--allow-reparent")
    assert code == 0 and out[-1].endswith("no unexpected difference")


def test_an_input_change_is_named_by_its_path_and_never_allowed(tmp_path, capsys):
    plan_before, plan_after = moved_hpa_plans()
    plan_after[2]["inputs"]["spec"]["minReplicas"] = 2
    plan_after[3]["customTimeouts"] = {"create": "40m"}
    before, after = write(tmp_path, "before.json", plan_before), write(tmp_path, "after.json", plan_after)
    code, out, _ = run_main(capsys, before, after, "--allow-new-type", NEW_COMPONENT, "--allow-reparent")
    assert code == EXIT_FAILED
    assert f"changed     {HPA}::old-hpa: inputs: spec.minReplicas: 1 -> 2" in out
    assert f'changed     {DEPLOYMENT}::alarm: customTimeouts: create: added "40m"' in out
    assert out[-1].endswith("2 unexpected")


def test_a_removed_resource_and_a_new_type_not_declared_are_unexpected(tmp_path, capsys):
    plan_before, plan_after = moved_hpa_plans()
    plan_after = [r for r in plan_after if r["name"] != "alarm"]
    before, after = write(tmp_path, "before.json", plan_before), write(tmp_path, "after.json", plan_after)
    code, out, _ = run_main(capsys, before, after, "--allow-reparent")
    assert code == EXIT_FAILED
    assert f"removed     {DEPLOYMENT}::alarm (parent old)" in out
    assert out[-1].endswith("2 unexpected")  # the removal, and the component of a type not declared


def test_the_same_parent_name_of_another_type_is_a_changed_urn(tmp_path):
    one = [record(COMPONENT, "c"), record(HPA, "h", (COMPONENT, "c"))]
    other = [record(NEW_COMPONENT, "c"), record(HPA, "h", (NEW_COMPONENT, "c"))]
    result = diff_plans(load_plan(write(tmp_path, "a.json", one)), load_plan(write(tmp_path, "b.json", other)))
    assert [(key, name) for key, name, _ in result.changed] == [(f"{HPA}::h", "urn")]
    assert result.unexpected(new_types=(NEW_COMPONENT,), reparent_ok=True) == 2  # the urn, and the removed Old


# ---- properties ----------------------------------------------------------------------------------------------------
NAMES = st.text(alphabet="abcdefghij-", min_size=1, max_size=8)


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))


VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3))


@st.composite
def plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    components = [record(COMPONENT, f"c{i}") for i in range(draw(st.integers(1, 2)))]
    records = list(components)
    for name in names:
        parent = draw(st.sampled_from(components))
        depends = draw(st.lists(st.sampled_from([r["urn"] for r in records]), unique=True, max_size=2))
        inputs = draw(st.dictionaries(NAMES, VALUES, max_size=3))
        records.append(record(DEPLOYMENT, name, (COMPONENT, parent["name"]), inputs, tuple(depends)))
    return records


@PROPERTY_SETTINGS
@given(plan=plans())
def test_a_plan_has_no_difference_from_itself(tmp_path_factory, plan):
    folder = tmp_path_factory.mktemp("same")
    path = write(folder, "plan.json", plan)
    assert list(diff_plans(load_plan(path), load_plan(path)).lines()) == []
    assert main([str(path), str(path)]) == 0


@PROPERTY_SETTINGS
@given(plan=plans(), data=st.data())
def test_one_changed_input_is_reported_on_that_resource_only(tmp_path_factory, plan, data):
    changed = json.loads(json.dumps(plan))
    target = data.draw(st.sampled_from([r for r in changed if r["type"] == DEPLOYMENT]))
    key = data.draw(NAMES)
    old = target["inputs"].get(key, "absent")
    target["inputs"][key] = data.draw(VALUES.filter(lambda v: v != old or type(v) is not type(old)))
    folder = tmp_path_factory.mktemp("one")
    result = diff_plans(load_plan(write(folder, "a.json", plan)), load_plan(write(folder, "b.json", changed)))
    assert {(k, name) for k, name, _ in result.changed} == {(f"{DEPLOYMENT}::{target['name']}", "inputs")}
    assert not result.added and not result.removed and not result.reparented


@PROPERTY_SETTINGS
@given(content=st.one_of(VALUES.map(json.dumps), st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_any_file_gives_a_result_or_one_error_line_never_a_traceback(tmp_path_factory, content, capsys):
    path = tmp_path_factory.mktemp("any") / "plan.json"
    path.write_text(content, encoding="utf-8")
    code = main([str(path), str(path)])
    captured = capsys.readouterr()
    assert code in (0, EXIT_BAD_INPUT)
    if code == EXIT_BAD_INPUT:
        assert captured.out == "" and len(captured.err.splitlines()) == 1
        assert captured.err.startswith(f"error: {path}: ")


# ---- bad input: one line naming the file, exit 2, nothing on stdout --------------------------------------------------
BAD_FILES: dict[str, tuple[str, str]] = {
    "not JSON": ("{not json", "not valid JSON"),
    "an object": ('{"urn": "x"}', "not a plan: expected a JSON array"),
    "a record without inputs": (
        json.dumps([{k: v for k, v in record(HPA, "h").items() if k != "inputs"}]),
        "no inputs",
    ),
    "a name that is not text": (json.dumps([record(HPA, "h") | {"name": ["h"]}]), "must be text"),
    "two resources of one type and name": (json.dumps([record(HPA, "h"), record(HPA, "h")]), "two resources are"),
    # Found by an independent tester: these crashed with a RecursionError and a TypeError (sorting dependsOn).
    "a 100k-deep array": ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep, more than 100"),
    "inputs 150 deep": (
        json.dumps([record(HPA, "h", inputs=json.loads('{"a":' * 150 + "1" + "}" * 150))]),
        "nested 152 levels deep, more than 100",
    ),
    "dependsOn of a number and an object": (
        json.dumps([record(HPA, "h") | {"dependsOn": [1, {"a": 2}]}]),
        'resource 0: dependsOn must be an array of URNs (text), not [1, {"a": 2}]',
    ),
    "inputs that are an array": (json.dumps([record(HPA, "h") | {"inputs": [1]}]), "inputs must be an object"),
    "protect that is text": (json.dumps([record(HPA, "h") | {"protect": "no"}]), "protect must be true or false"),
}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@PROPERTY_SETTINGS
@given(data=st.data(), field=st.sampled_from(["provider", "dependsOn", "customTimeouts", "protect", "inputs"]))
def test_any_value_in_any_field_gives_a_result_or_one_error_line(tmp_path_factory, capsys, data, field):
    before, shared = moved_hpa_plans()
    after = json.loads(json.dumps(shared))  # the plans share records: change only the second file's
    target = data.draw(st.sampled_from(after), label="resource")
    target[field] = data.draw(_JSON, label=field)
    folder = tmp_path_factory.mktemp("field")
    code, out, err = run_main(capsys, write(folder, "a.json", before), bad := write(folder, "b.json", after))
    assert code in (0, EXIT_FAILED, EXIT_BAD_INPUT)
    if code == EXIT_BAD_INPUT:
        assert out == [] and len(err) == 1 and err[0].startswith(f"error: {bad}: resource {after.index(target)}: ")


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_file_that_is_not_a_plan_is_refused_in_one_line(tmp_path, capsys, case):
    content, expected = BAD_FILES[case]
    good = write(tmp_path, "good.json", [record(HPA, "h")])
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    code, out, err = run_main(capsys, good, bad)
    assert code == EXIT_BAD_INPUT and out == []
    assert len(err) == 1 and err[0].startswith(f"error: {bad}: ") and expected in err[0], err
