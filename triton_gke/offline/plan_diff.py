"""Compare two offline plans resource by resource, to show what a refactoring changed.

    triton-gke plan --stack dev --json > before.json      # before the change
    triton-gke plan --stack dev --json > after.json       # after it
    triton-gke plan-diff before.json after.json
    triton-gke plan-diff before.json after.json --allow-new-type triton-gke:k8s:Autoscaling --allow-reparent

Resources are matched by type and name (`TYPE::NAME`), which a move to another parent keeps. Each difference is
one line: `added`, `removed`, `reparented` (parent, hence URN), `changed FIELD` (provider, dependsOn,
customTimeouts, protect, inputs; URNs in dependsOn are compared as the TYPE::NAME they name, so a moved dependency
is not a change). Exit 0 when the plans differ in nothing but what the flags allow, 1 otherwise, 2 when a file is
not a plan (one line naming it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import parse_json, read_text_file
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.one_line import OneLineParser

# The fields of a plan record (offline/plan.py plan_records) besides urn, type, name and parent.
COMPARED_FIELDS = (
    "provider",
    "dependsOn",
    "customTimeouts",
    "protect",
    "ignoreChanges",
    "replaceOnChanges",
    "deleteBeforeReplace",
    "inputs",
)
# Resource options a plan written before they were recorded lacks: read as Pulumi's defaults.
OPTIONAL_FIELDS = {"ignoreChanges": [], "replaceOnChanges": [], "deleteBeforeReplace": False}
REQUIRED_FIELDS = tuple(f for f in ("urn", "type", "name", "parent", *COMPARED_FIELDS) if f not in OPTIONAL_FIELDS)
# Input paths listed per changed resource; the count says how many more differ.
MAX_PATHS = 8
# How deeply arrays and objects may nest in a plan file: the deepest record of the dev, staging and prod plans
# nests 12 levels; the bound keeps the comparison's recursion far below Python's limit (1000 frames by default,
# https://docs.python.org/3/library/sys.html#sys.getrecursionlimit), which a hostile file would otherwise reach.
MAX_NESTING = 100
# The prod plan's JSON is ~0.5 MB; a plan file is read only up to this size (a FIFO or /dev/zero is refused).
MAX_PLAN_BYTES = 16 * 1024 * 1024
# The shape of each compared field, as offline/plan.py plan_records writes it: (allowed types, what to say).
FIELD_SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    "provider": ((str, type(None)), "text or null"),
    "dependsOn": ((list,), "an array of URNs (text)"),
    "customTimeouts": ((dict, type(None)), "an object or null"),
    "protect": ((bool,), "true or false"),
    "ignoreChanges": ((list,), "an array of property paths (text)"),
    "replaceOnChanges": ((list,), "an array of property paths (text)"),
    "deleteBeforeReplace": ((bool,), "true or false"),
    "inputs": ((dict,), "an object"),
}


class PlanFileError(ValueError):
    """A file that is not a plan JSON array: the message is one line naming the file."""


@dataclass
class PlanDiff:
    added: list[tuple[str, str | None]] = field(default_factory=list)  # (key, parent)
    removed: list[tuple[str, str | None]] = field(default_factory=list)
    reparented: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (key, before, after)
    changed: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (key, field, details)

    def lines(self) -> Iterator[str]:
        for key, parent in self.added:
            yield f"added       {key} (parent {parent})"
        for key, parent in self.removed:
            yield f"removed     {key} (parent {parent})"
        for key, before, after in self.reparented:
            yield f"reparented  {key}: parent {before} -> {after}"
        for key, name, details in self.changed:
            yield f"changed     {key}: {name}: {'; '.join(details)}"

    def unexpected(self, new_types: Sequence[str] = (), reparent_ok: bool = False) -> int:
        """How many differences the caller did not declare expected."""
        added = [key for key, _ in self.added if key.split("::", 1)[0] not in new_types]
        return len(added) + len(self.removed) + len(self.changed) + (0 if reparent_ok else len(self.reparented))


def key_of(record: Mapping[str, Any]) -> str:
    return f"{record['type']}::{record['name']}"


def load_plan(path: Path) -> dict[str, dict[str, Any]]:
    """The records of a plan file by TYPE::NAME; PlanFileError (one line) for anything else. Through the one bounded
    reader (triton_gke/bounded_files.py): a regular UTF-8 file of at most MAX_PLAN_BYTES, JSON nested at most
    MAX_NESTING deep, numbers Python converts."""
    text = read_text_file(path, MAX_PLAN_BYTES, "a plan file (make plan ARGS=--json)", PlanFileError)
    records = parse_json(text, path, PlanFileError, max_depth=MAX_NESTING)
    return index_records(records, str(path))


def _nesting(value: Any) -> int:
    """How deeply arrays and objects nest in value (a scalar: 0), without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def index_records(records: Any, source: str) -> dict[str, dict[str, Any]]:
    """Plan records (offline.plan.plan_records, or a file's JSON) by TYPE::NAME; `source` names them in errors."""
    if not isinstance(records, list):
        raise PlanFileError(f"{source}: not a plan: expected a JSON array of resources (make plan ARGS=--json)")
    if _nesting(records) > MAX_NESTING:
        raise PlanFileError(f"{source}: not a plan: arrays and objects nested more than {MAX_NESTING} deep")
    plan: dict[str, dict[str, Any]] = {}
    for index, record in enumerate(records):
        _check_record(record, index, source)
        key = key_of(record)
        if key in plan:
            raise PlanFileError(f"{source}: two resources are {_one_line(key)}: cannot match them by type and name")
        plan[key] = record
    return plan


def _check_record(record: Any, index: int, source: str) -> None:
    """Every field of a plan record present and of its type, so the comparison never meets a surprise."""
    missing = [f for f in REQUIRED_FIELDS if not isinstance(record, dict) or f not in record]
    if missing:
        raise PlanFileError(f"{source}: resource {index} is not a plan record: no {', '.join(missing)}")
    for name, default in OPTIONAL_FIELDS.items():
        record.setdefault(name, default)
    texts = [record[f] for f in ("urn", "type", "name")]
    if not all(isinstance(t, str) for t in texts) or not isinstance(record["parent"], str | None):
        raise PlanFileError(f"{source}: resource {index}: urn, type and name must be text, parent text or null")
    for name, (types, shape) in FIELD_SHAPES.items():
        value = record[name]
        texts_only = name in ("dependsOn", "ignoreChanges", "replaceOnChanges")
        if not isinstance(value, types) or (texts_only and not all(isinstance(u, str) for u in value)):
            raise PlanFileError(f"{source}: resource {index}: {name} must be {shape}, not {_show(value)}")


def diff_plans(before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]) -> PlanDiff:
    result = PlanDiff()
    keys_before = {r["urn"]: k for k, r in before.items()}
    keys_after = {r["urn"]: k for k, r in after.items()}
    for key in sorted(after.keys() - before.keys()):
        result.added.append((key, after[key]["parent"]))
    for key in sorted(before.keys() - after.keys()):
        result.removed.append((key, before[key]["parent"]))
    for key in sorted(before.keys() & after.keys()):
        old, new = before[key], after[key]
        if old["parent"] != new["parent"]:
            result.reparented.append((key, old["parent"], new["parent"]))
        elif old["urn"] != new["urn"]:
            # Same parent name, another URN: the parent's type (or the stack or project) changed.
            result.changed.append((key, "urn", [f"{old['urn']} -> {new['urn']}"]))
        for name in COMPARED_FIELDS:
            a, b = old[name], new[name]
            if name == "dependsOn":
                a, b = _dependency_keys(a, keys_before), _dependency_keys(b, keys_after)
            details = list(_differences(a, b, ""))
            if details:
                more = len(details) - MAX_PATHS
                result.changed.append((key, name, details[:MAX_PATHS] + ([f"... {more} more"] if more > 0 else [])))
    return result


def _dependency_keys(urns: Any, keys: Mapping[str, str]) -> list[str]:
    """dependsOn as the TYPE::NAME of each URN (an URN outside the plan stays as it is)."""
    if not isinstance(urns, list):
        return urns
    return sorted(keys.get(u, u) if isinstance(u, str) else u for u in urns)


def _differences(a: Any, b: Any, path: str) -> Iterator[str]:
    """`path: old -> new` for each leaf that differs; lists of strings (dependsOn) as added/removed members."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a:
                yield f"{sub}: added {_show(b[k])}"
            elif k not in b:
                yield f"{sub}: removed {_show(a[k])}"
            else:
                yield from _differences(a[k], b[k], sub)
    elif _string_set(a) and _string_set(b) and a != b:
        label = path or "members"
        for gone in sorted(set(a) - set(b)):
            yield f"{label}: removed {gone}"
        for new in sorted(set(b) - set(a)):
            yield f"{label}: added {new}"
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{path}[{i}]")
    elif a != b or type(a) is not type(b):
        yield f"{path or 'value'}: {_show(a)} -> {_show(b)}"


def _string_set(value: Any) -> bool:
    """A sorted list of distinct strings (dependsOn): compared as a set, so one addition is one line."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value) and value == sorted(set(value))


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="triton-gke plan-diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="plan JSON before the change (make plan ARGS=--json)")
    parser.add_argument("after", type=Path, help="plan JSON after the change")
    parser.add_argument(
        "--allow-new-type",
        action="append",
        default=[],
        metavar="TYPE",
        help="resources of this type may be added (repeatable), e.g. a new component",
    )
    parser.add_argument(
        "--allow-reparent", action="store_true", help="resources may move to another parent (with aliases)"
    )
    args = parser.parse_args(argv)
    try:
        before, after = load_plan(args.before), load_plan(args.after)
    except PlanFileError as err:
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = diff_plans(before, after)
    for line in result.lines():
        print(line)
    unexpected = result.unexpected(args.allow_new_type, args.allow_reparent)
    print(
        f"{len(before)} resources before, {len(after)} after: {len(result.added)} added, {len(result.removed)} "
        f"removed, {len(result.reparented)} reparented, {len(result.changed)} changed; "
        + ("no unexpected difference" if not unexpected else f"{unexpected} unexpected")
    )
    return EXIT_FAILED if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
