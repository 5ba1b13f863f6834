"""The examples in every language use only what the component package's schema declares (issue 33).

examples/on-cluster-{python,yaml,typescript,go} each declare one TritonOnCluster. For each, every property it passes
and every output it reads is looked up in triton_gke/schema.json under that language's casing: camelCase in
TypeScript and YAML (the schema's own names), PascalCase fields of the generated Go Args struct and resource,
snake_case Args keys and attributes in Python. Every required input must be passed. A renamed input or output in
the Args therefore breaks this test until the examples follow. The parsers are small and regex- or ast-based: they
read the shapes these examples use (an object literal, a struct literal plus `args.Field =` assignments, a dict).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

import pytest
import yaml

from tests.support.checkout import PROJECT_DIR
from triton_gke.reference import pascal_case, snake_case

EXAMPLES = PROJECT_DIR / "examples"
TOKEN = "triton-gke:index:TritonOnCluster"


@dataclass(frozen=True)
class Use:
    inputs: frozenset[str]  # property names as the language spells them
    outputs: frozenset[str]


def schema() -> dict:
    return json.loads((PROJECT_DIR / "triton_gke" / "schema.json").read_text(encoding="utf-8"))


def _braced(text: str, start: int) -> str:
    """The text from the brace at or after `start` to its matching closing brace (exclusive)."""
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1 : i]
    raise ValueError("unbalanced braces")


def _top_level_keys(body: str) -> set[str]:
    """`key:` at nesting depth 0 of an object or struct literal's body."""
    keys, depth = set(), 0
    for line in body.splitlines():
        if depth == 0 and (match := re.match(r"\s*(\w+)\s*:", line)):
            keys.add(match[1])
        depth += line.count("{") + line.count("(") + line.count("[") - line.count("}") - line.count(")")
        depth -= line.count("]")
    return keys


def typescript_use(text: str) -> Use:
    match = re.search(r"(?:const|let)\s+(\w+)\s*=\s*new\s+\w+\.TritonOnCluster\(", text)
    assert match, "no `new ....TritonOnCluster(` assigned to a variable"
    inputs = _top_level_keys(_braced(text, match.end()))
    outputs = set(re.findall(rf"\b{match[1]}\.(\w+)", text))
    return Use(frozenset(inputs), frozenset(outputs))


def go_use(text: str) -> Use:
    match = re.search(r"(\w+)\s*:=\s*&\w+\.TritonOnClusterArgs\{", text)
    assert match, "no `args := &....TritonOnClusterArgs{`"
    inputs = _top_level_keys(_braced(text, match.start())) | set(re.findall(rf"\b{match[1]}\.(\w+)\s*=", text))
    resource = re.search(r"(\w+),\s*err\s*:?=\s*\w+\.NewTritonOnCluster\(", text)
    assert resource, "no `x, err := ....NewTritonOnCluster(`"
    outputs = set(re.findall(rf"\b{resource[1]}\.(\w+)", text))
    return Use(frozenset(inputs), frozenset(outputs))


def python_use(text: str) -> Use:
    tree = ast.parse(text)
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "TritonOnCluster"
    ]
    inputs = {
        key.value
        for node in ast.walk(call.args[1])
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant)
    }
    (target,) = [node.targets[0].id for node in ast.walk(tree) if isinstance(node, ast.Assign) and node.value is call]
    outputs = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == target
    }
    return Use(frozenset(inputs), frozenset(outputs))


def yaml_use(text: str) -> Use:
    program = yaml.safe_load(text)
    ((name, resource),) = [(n, r) for n, r in program["resources"].items() if r["type"] == TOKEN]
    outputs = set(re.findall(rf"\$\{{{name}\.(\w+)\}}", text))
    return Use(frozenset(resource.get("properties", {})), frozenset(outputs))


LANGUAGES = {
    # folder: (program file, its parser, how the language spells a schema name)
    "on-cluster-typescript": ("index.ts", typescript_use, lambda name: name),
    "on-cluster-go": ("main.go", go_use, pascal_case),
    "on-cluster-python": ("__main__.py", python_use, snake_case),
    "on-cluster-yaml": ("Pulumi.yaml", yaml_use, lambda name: name),
}


def problems(use: Use, spell, declared: dict) -> list[str]:
    """What the example passes or reads that the schema does not declare, and the required inputs it leaves out."""
    resource = declared["resources"][TOKEN]
    inputs = {spell(name): name for name in resource["inputProperties"]}
    outputs = {spell(name): name for name in resource["properties"]}
    found = [f"input {name!r}: not in the schema" for name in sorted(use.inputs - inputs.keys())]
    found += [f"output {name!r}: not in the schema" for name in sorted(use.outputs - outputs.keys())]
    found += [f"required input {spell(name)!r} not passed" for name in resource["requiredInputs"]
              if spell(name) not in use.inputs]  # fmt: skip
    return found


@pytest.mark.parametrize("folder", sorted(LANGUAGES))
def test_example_uses_only_what_the_schema_declares(folder: str) -> None:
    program, parse, spell = LANGUAGES[folder]
    use = parse((EXAMPLES / folder / program).read_text(encoding="utf-8"))
    assert use.inputs and use.outputs, "the parser found nothing: it no longer reads this example"
    assert problems(use, spell, schema()) == []


def test_every_example_folder_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == sorted(LANGUAGES)


@pytest.mark.parametrize("folder", sorted(LANGUAGES))
def test_a_renamed_input_or_output_breaks_the_check(folder: str) -> None:
    """The check can fail: the schema with minReplicas and httpEndpoint renamed flags each example."""
    program, parse, spell = LANGUAGES[folder]
    use = parse((EXAMPLES / folder / program).read_text(encoding="utf-8"))
    renamed = schema()
    resource = renamed["resources"][TOKEN]
    resource["inputProperties"]["minimumReplicas"] = resource["inputProperties"].pop("minReplicas")
    resource["properties"]["restEndpoint"] = resource["properties"].pop("httpEndpoint")
    assert problems(use, spell, renamed) == [
        f"input {spell('minReplicas')!r}: not in the schema",
        f"output {spell('httpEndpoint')!r}: not in the schema",
    ]


def test_the_parsers_read_what_they_are_given() -> None:
    ts = "const t = new x.TritonOnCluster('t', {\n  a: 1,\n  b: { c: 2 },\n}, o);\nexport const y = t.out;\n"
    assert typescript_use(ts) == Use(frozenset({"a", "b"}), frozenset({"out"}))
    go = "a := &x.TritonOnClusterArgs{\n\tA: 1,\n\tB: m{\n\t\tC: 2,\n\t},\n}\na.D = 3\n"
    go += "r, err := x.NewTritonOnCluster(c)\nr.E"
    assert go_use(go) == Use(frozenset({"A", "B", "D"}), frozenset({"E"}))
