"""What the next `pulumi up` does to a deployed stack: every resource created, updated, replaced, deleted or unchanged.

    make plan ARGS='--json' > applied.json               # the plan of what was last deployed (`pulumi up`)
    make plan ARGS='--against applied.json'              # after a config change: what the next `up` would do
    make plan ARGS='--against applied.json --allow-disruption gke-us-central1-gpu'

The engine asks each resource's provider to diff the state it read back after the last `up` against the new inputs
(https://www.pulumi.com/docs/iac/concepts/how-pulumi-works/). So the previous plan is first turned into that state
(PROVIDER_READ_BACK: the values a provider is known to read back differently from what was sent), then compared
path by path, leaving out each resource's ignoreChanges. A changed path the provider's schema marks ForceNew
(infra/data/replacement_rules.yaml, taken from the providers' own sources) replaces the resource; any other change
updates it in place.

The blast radius follows the engine: a replaced resource's ID changes for every resource holding it; a replaced GKE
cluster makes the kubeconfig of its Kubernetes provider unknown, which replaces the provider, and a replaced provider
replaces every resource it manages, each line saying why. A replacement that deletes the old resource before it creates
the new one (a fixed name, or the deleteBeforeReplace option) is marked `[outage: deleted before created ...]`.

A replacement or deletion that takes a region down or loses state (a GKE cluster, a GPU node pool, the model bucket,
the global address, Triton's Deployment or namespace) is refused unless named in --allow-disruption: docs/lifecycle.md
says how to make such a change safely.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from triton_gke.contracts.paths import REPLACEMENT_RULES
from triton_gke.contracts.triton import INFERENCE_KEY_ENV, inference_key_header
from triton_gke.infra.node_recreation import (
    DEFAULT_POD_STARTUP_MINUTES,
    KUBERNETES_DEFAULT_GRACE_S,
    RecreationEstimate,
    estimate,
    recreating_paths,
)
from triton_gke.settings.stack_file import read_yaml_file

RULES_FILE = REPLACEMENT_RULES  # package data, shipped in the wheel
ACTIONS = ("create", "update", "replace", "delete", "unchanged")
# What a state holds where the provider reads back something other than what the program sent: it differs from any
# input, as the real read-back may.
READ_BACK = "<read back by the provider>"
ALLOW_ALL = "all"

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET = "gcp:storage/bucket:Bucket"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
K8S_PROVIDER = "pulumi:providers:kubernetes"
NAMESPACE = "kubernetes:core/v1:Namespace"
TRITON_NAMESPACE = "triton"
TRITON_APP = "triton"

# Values the provider reads back after an `up` that differ from the inputs it was given, so the next diff sees a
# change at these paths unless the program ignores them. Each with its source.
PROVIDER_READ_BACK: dict[str, dict[str, str]] = {
    CLUSTER: {
        # With remove_default_node_pool the cluster is read back without the default pool's node_config
        # (hashicorp/terraform-provider-google#12070, #17511; GoogleCloudPlatform/cloud-foundation-fabric#1275).
        "nodeConfig": "hashicorp/terraform-provider-google#12070",
    },
    NODE_POOL: {
        # Read from the API's initialNodeCount, which a resize changes (container_node_pool docs: "Resizing your
        # node pool manually may change this value ... which will trigger destruction and recreation"; #6354).
        "initialNodeCount": "hashicorp/terraform-provider-google#6354",
    },
}


class RulesError(ValueError):
    """The replacement-rules file is unreadable or malformed: one line naming it."""


@dataclass(frozen=True)
class TypeRules:
    source: str
    replace: tuple[str, ...]
    update: tuple[str, ...]

    def classify(self, path: str) -> tuple[str, str] | None:
        """('replace' or 'update', the rule's path) by the longest rule path covering `path`, else by the rules below
        it (a subtree changed as a whole); None when no rule says anything about it."""
        best: tuple[int, str, str] | None = None
        for action, rules in (("replace", self.replace), ("update", self.update)):
            for rule in rules:
                if covers(rule, path) and (best is None or len(rule) > best[0]):
                    best = (len(rule), action, rule)
        if best:
            return best[1], best[2]
        # A whole subtree changed (added, removed, read back empty): as its children's rules say, replace first.
        for action, rules in (("replace", self.replace), ("update", self.update)):
            below = [rule for rule in rules if covers(path, rule)]
            if below:
                return action, below[0]
        return None


@dataclass(frozen=True)
class Rules:
    sources: Mapping[str, Any]
    types: Mapping[str, TypeRules]


@dataclass(frozen=True)
class Change:
    key: str  # TYPE::NAME
    action: str  # one of ACTIONS
    paths: tuple[str, ...] = ()  # changed input paths (update, replace)
    reasons: tuple[str, ...] = ()  # why it is replaced: "PATH (forces replacement: SOURCE)"
    disruption: str = ""  # what it takes down; refused unless allowed
    protected: bool = False  # Pulumi's protect flag is set: refused even when allowed
    provider: str = ""  # replaced because this provider (TYPE::NAME) is replaced
    outage: str = ""  # why the replacement deletes the old resource before it creates the new one
    recreation: str = ""  # an in-place update for which GKE recreates every node of the pool, and how long
    clients: str = ""  # what clients must already do before this change reaches them (a note, never refused)

    @property
    def name(self) -> str:
        return self.key.split("::", 1)[1]

    def line(self) -> str:
        detail = "; ".join(self.reasons) if self.reasons else ", ".join(self.paths[:6])
        more = f" (+{len(self.paths) - 6} more)" if not self.reasons and len(self.paths) > 6 else ""
        text = f"{self.action:<9} {self.key}" + (f": {detail}{more}" if detail else "")
        text += f"  [outage: deleted before created: {self.outage}]" if self.outage else ""
        text += f"  [recreates every node: {self.recreation}]" if self.recreation else ""
        text += f"  [clients: {self.clients}]" if self.clients else ""
        return text + (f"  [takes down: {self.disruption}]" if self.disruption else "")


def normalize(path: str) -> str:
    """Indices and wildcards as [] (`a[0].b`, `a[*].b` -> `a[].b`), so rules and ignoreChanges match any element."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def covers(rule: str, path: str) -> bool:
    rule, path = normalize(rule), normalize(path)
    return path == rule or path.startswith(rule + ".") or path.startswith(rule + "[")


@cache
def load_rules(path: Path = RULES_FILE) -> Rules:
    data = read_yaml_file(path, "the replacement rules (a YAML file)", RulesError)
    if not isinstance(data, dict) or not isinstance(data.get("types"), dict):
        raise RulesError(f"{path}: expected a mapping with 'sources' and 'types'")
    types = {}
    for type_token, entry in data["types"].items():
        if not isinstance(entry, dict):
            raise RulesError(f"{path}: {type_token}: expected a mapping")
        lists = {k: entry.get(k) or [] for k in ("replace", "update")}
        if not all(isinstance(v, list) and all(isinstance(p, str) for p in v) for v in lists.values()):
            raise RulesError(f"{path}: {type_token}: replace and update must be lists of property paths")
        source = entry.get("source", "")
        types[type_token] = TypeRules(
            source=", ".join(source) if isinstance(source, list) else str(source),
            replace=tuple(lists["replace"]),
            update=tuple(lists["update"]),
        )
    return Rules(sources=data.get("sources") or {}, types=types)


def applied_state(records: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The state an `up` of these plan records leaves: inputs as sent, but PROVIDER_READ_BACK paths read back, and
    under the URNs the engine gave them (engine_urns)."""
    state = engine_urns(copy.deepcopy(dict(records)))
    for record in state.values():
        for path in PROVIDER_READ_BACK.get(record["type"], {}):
            _set_path(record["inputs"], path, READ_BACK)
    return state


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def engine_urns(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Records of a plan written before plans listed `aliases` carry the URNs of the SDK's mock monitor (the
    parent's LAST type only, and `pulumi:pulumi:Stack$` before a top-level type); the engine saved the parent's
    whole qualified type and nothing for the root stack (offline/runtime.py engine_urn). Those URNs are rebuilt
    from the parent chain; newer records already hold the engine's URN."""
    legacy = [r for r in records.values() if "aliases" not in r]
    by_type_name = {(r["type"], r["name"]): r for r in records.values()}
    memo: dict[int, str] = {}

    def qualified(record: dict[str, Any]) -> str:
        if id(record) not in memo:
            parent_type = record["urn"].split("::")[2].rsplit("$", 1)[0] if "$" in record["urn"].split("::")[2] else ""
            parent = by_type_name.get((parent_type, record["parent"])) if record["parent"] else None
            memo[id(record)] = f"{qualified(parent)}${record['type']}" if parent else record["type"]
        return memo[id(record)]

    for record in legacy:
        head, _, _ = record["urn"].partition("::" + record["urn"].split("::")[2] + "::")
        record["urn"] = f"{head}::{qualified(record)}::{record['name']}"
        record["aliases"] = []
    return records


def matches(before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]) -> dict[str, str]:
    """New TYPE::NAME -> the old one it takes over, as the engine looks a registration up in the old state: by its
    URN, then by each alias in order (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8,
    pkg/resource/deploy/step_generator.go getOldResource: "We look up first by URN and then by any provided
    aliases"), an old resource taken at most once. Failing both, the same TYPE::NAME under another URN is still
    paired, so the diff reports it as replaced (the engine creates the new one and deletes the old)."""
    by_urn = {record["urn"]: key for key, record in before.items()}
    taken: set[str] = set()
    pairs: dict[str, str] = {}
    for key, record in after.items():
        for urn in (record["urn"], *record.get("aliases", [])):
            old = by_urn.get(urn)
            if old is not None and old not in taken:
                pairs[key] = old
                taken.add(old)
                break
    for key in after.keys() - pairs.keys():
        if key in before and key not in taken:
            pairs[key] = key
            taken.add(key)
    return pairs


def _set_path(inputs: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        inputs = inputs.setdefault(part, {})
    inputs[leaf] = value


def changed_paths(old: Any, new: Any, path: str = "") -> Iterator[str]:
    """Every input path whose value differs; a list of another length (or of plain strings) changes as a whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old or key not in new:
                yield sub
            else:
                yield from changed_paths(old[key], new[key], sub)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from changed_paths(a, b, f"{path}[{index}]")
    elif old != new or type(old) is not type(new):
        yield path or "(all inputs)"


def compare(
    before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]], rules: Rules | None = None
) -> list[Change]:
    """What `pulumi up` of `after` does to the state `before` (plan records by TYPE::NAME, as applied_state makes)."""
    rules = rules or load_rules()
    pairs = matches(before, after)
    kept = set(pairs.values())
    changes = [Change(key, "create") for key in after.keys() - pairs.keys() if _managed(after[key])]
    changes += [Change(key, "delete") for key in before.keys() - kept if _managed(before[key])]
    for key, old in pairs.items():
        if _managed(after[key]):
            changes.append(_diff(key, before[old], after[key], rules))
    olds = {key: before[old] for key, old in pairs.items()}
    changes = _cascade(changes, olds, after, rules)
    changes = [
        _with_disruption(c, olds.get(c.key) or before.get(c.key) or after[c.key], after.get(c.key)) for c in changes
    ]
    changes = [_with_triton_kept(c, after) for c in changes]
    changes = [_with_node_recreation(c, after) for c in changes]
    changes = [_with_key_change(c, olds, after) for c in changes]
    return sorted(changes, key=lambda c: (ACTIONS.index(c.action), c.key))


def _cascade(
    changes: list[Change],
    olds: Mapping[str, dict[str, Any]],
    after: Mapping[str, dict[str, Any]],
    rules: Rules,
) -> list[Change]:
    """Everything a replacement takes with it, down the chain, each replacement marked when it deletes first:

    - A replaced resource gets a new ID, so every resource whose inputs hold that ID changes too: updated, or
      replaced when the referring property forces it. The offline plan's IDs are the mock runtime's "NAME-id"
      (offline/runtime.py CloudMocks), the same before and after, so the plans alone hide it.
    - A resource replaced delete-first takes first every dependent whose property holding its outputs forces a
      replacement (_deleted_first_dependents).
    - A replaced GKE cluster replaces the Kubernetes provider built from it (_provider_of_cluster).
    - A replaced provider replaces every resource it manages (_managed_by)."""
    by_key = {c.key: _with_outage(c, olds.get(c.key), after.get(c.key)) for c in changes}
    pending = [c for c in by_key.values() if c.action == "replace"]

    def replace(change: Change, paths: Sequence[str], reasons: Sequence[str], **fields: str) -> None:
        new = Change(change.key, "replace", (*change.paths, *paths), (*change.reasons, *reasons), **fields)
        by_key[change.key] = new if new.outage else _with_outage(new, olds.get(change.key), after.get(change.key))
        pending.append(by_key[change.key])

    while pending:
        replaced = pending.pop()
        for key, reason in (*_provider_of_cluster(replaced, after), *_managed_by(replaced, after)):
            change = by_key.get(key)
            if change is not None and change.action in ("update", "unchanged"):
                replace(change, (), (reason,), provider=replaced.key if reason.startswith("its provider") else "")
        for key, paths in _deleted_first_dependents(replaced, olds, after, rules):
            change = by_key.get(key)
            if change is not None and change.action in ("update", "unchanged"):
                why = f"holds an output of {replaced.key}, deleted before created: forces replacement"
                replace(change, paths, [f"{p} ({why})" for p in paths], outage=f"with {replaced.key}")
        marker = f"{replaced.name}-id"
        for key, record in after.items():
            change = by_key.get(key)
            if change is None or change.action not in ("update", "unchanged") or not _managed(record):
                continue
            paths = _paths_holding(record["inputs"], marker)
            if not paths:
                continue
            forced = [p for p in paths if _forces(rules, record["type"], p)]
            why = f"refers to {replaced.key}, replaced"
            if forced:
                replace(change, paths, [f"{p} ({why}: forces replacement)" for p in forced])
            else:
                by_key[key] = Change(key, "update", (*change.paths, *(f"{p} ({why})" for p in paths)))
    return list(by_key.values())


def _forces(rules: Rules, kind: str, path: str) -> bool:
    """Whether a change at `path` replaces a resource of this type (a path no rule covers is assumed to)."""
    type_rules = rules.types.get(kind)
    verdict = type_rules.classify(path) if type_rules else None
    return verdict is None or verdict[0] == "replace"


def _deleted_first_dependents(
    replaced: Change, olds: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]], rules: Rules
) -> list[tuple[str, list[str]]]:
    """A resource replaced delete-first: the engine deletes first, with it, "all resources that depend directly or
    indirectly on the resource being replaced and would be replaced by a change to the relevant dependency": it sets
    each property that depends on a replaced resource unknown and asks the provider's Diff (pulumi/pulumi@
    1b5949891b3cefcb9974752b24a5ecef0acc86c8, pkg/resource/deploy/step_generator.go calculateDependentReplacements).
    Here: the resources whose dependsOn names it and whose inputs hold its ID or its name (the mock runtime's outputs
    echo the inputs), at paths the rules say force a replacement. A node pool's `cluster` is such a path."""
    if not replaced.outage or replaced.key not in after:
        return []
    record = after[replaced.key]
    inputs = record["inputs"]
    meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
    names = {n for n in (inputs.get("name"), meta.get("name")) if isinstance(n, str) and n}
    found = []
    for key, dependent in after.items():
        if record["urn"] not in dependent.get("dependsOn", []) or not _managed(dependent) or key not in olds:
            continue
        paths = _paths_holding(dependent["inputs"], f"{replaced.name}-id")
        paths += [p for name in names for p in _paths_equal(dependent["inputs"], name)]
        forced = sorted({p for p in paths if _forces(rules, dependent["type"], p)})
        if forced:
            found.append((key, forced))
    return found


def _provider_of_cluster(replaced: Change, after: Mapping[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The Kubernetes providers whose kubeconfig is built from a replaced GKE cluster (infra/cluster.py: the
    provider's only input is the kubeconfig from the cluster's name, endpoint and CA certificate, so the cluster is in
    its dependsOn). A replaced cluster's outputs are unknown until it exists, and pulumi-kubernetes' DiffConfig
    replaces the provider when `kubeconfig`, `context` or `cluster` is unknown: "We can't tell for sure if a computed
    value has changed, so we make the conservative choice and force a replacement" (pulumi/pulumi-kubernetes@
    94977969d64112b04e19945818a7d5d5f38f631d, provider/pkg/provider/provider.go kubeProvider.DiffConfig; reported as
    pulumi/pulumi-kubernetes#1148)."""
    if not replaced.key.startswith(CLUSTER + "::") or replaced.key not in after:
        return []
    urn = after[replaced.key]["urn"]
    return [
        (key, f"its kubeconfig comes from {replaced.key}, replaced (pulumi-kubernetes DiffConfig: unknown kubeconfig)")
        for key, record in after.items()
        if record["type"] == K8S_PROVIDER and urn in record.get("dependsOn", [])
    ]


def _managed_by(replaced: Change, after: Mapping[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Every resource whose `provider` is a replaced provider. The engine replaces a resource whose provider
    reference changed when the new provider's DiffConfig reports a replacement (pulumi/pulumi@
    1b5949891b3cefcb9974752b24a5ecef0acc86c8, pkg/resource/deploy/step_generator.go providerChanged: "If there is a
    replacement diff, we must also replace this resource"; diff: ReplaceKeys ["provider"])."""
    if not replaced.key.startswith("pulumi:providers:"):
        return []
    name = replaced.name
    return [
        (key, f"its provider {replaced.key} is replaced")
        for key, record in after.items()
        if record.get("provider") == name and _managed(record)
    ]


def _with_outage(change: Change, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> Change:
    if change.action != "replace" or change.outage or old is None or new is None:
        return change
    if old["urn"] != new["urn"] and old["urn"] not in new.get("aliases", []):
        # Not one replace step: the engine creates the new URN and deletes the old one at the end.
        return change
    why = delete_first(old, new, by_provider=bool(change.provider) or old["provider"] != new["provider"])
    return dataclasses.replace(change, outage=why) if why else change


def delete_first(old: Mapping[str, Any], new: Mapping[str, Any], by_provider: bool = False) -> str:
    """Why replacing this resource deletes the old one before it creates the new one; empty when it creates first.

    The engine deletes first when the resource's `deleteBeforeReplace` option says so, else when the provider's Diff
    asks for it (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8, pkg/resource/deploy/step_generator.go:
    "The provider is responsible for requesting which of these two modes to use. The user can override the
    provider's decision by setting the `deleteBeforeReplace` field"). A replacement because the provider is replaced
    never asks the provider (providerChanged returns ReplaceKeys ["provider"] alone), so only the option counts.
    The providers ask for it:
    - pulumi-kubernetes, for an object the program names (metadata.name, not autonamed) that keeps its name and
      namespace (pulumi/pulumi-kubernetes@94977969d64112b04e19945818a7d5d5f38f631d, provider/pkg/provider/provider.go
      kubeProvider.Diff: "Delete before replacement if we are forced to replace the old object, and the new version
      of that object MUST have the same name").
    - a bridged provider (pulumi-gcp, pulumi-random), for a resource whose `name` the program sets instead of leaving
      it to Pulumi's autonaming (pulumi/pulumi-terraform-bridge@59de6c661df1e7561e6ece7ad7f1c835c63010c4,
      pkg/tfbridge/provider.go Diff and pkg/tfbridge/schema.go nameRequiresDeleteBeforeReplace: an autonamed property
      with a value not populated by the autonamer; pulumi/pulumi-gcp provider/resources.go
      `prov.SetAutonaming(255, "-")` autonames every resource's string `name`). The mock runtime does not autoname,
      so a `name` in the plan is the program's.
    - pulumi-command never does (pulumi/pulumi-command@010bd8e0dd8a2f13707aa3b5061739edd90790a5: no
      DeleteBeforeReplace under provider/).
    """
    if new.get("deleteBeforeReplace"):
        return "its deleteBeforeReplace option"
    if by_provider:
        return ""
    kind, inputs, old_inputs = new["type"], new["inputs"], old["inputs"]
    if kind.startswith("kubernetes:"):
        meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
        old_meta = old_inputs.get("metadata") if isinstance(old_inputs.get("metadata"), dict) else {}
        name = meta.get("name")
        if (
            isinstance(name, str)
            and name
            and (name, meta.get("namespace")) == (old_meta.get("name"), old_meta.get("namespace"))
        ):
            return f"the fixed metadata.name {name!r} (pulumi-kubernetes deletes first)"
    elif kind.startswith(("gcp:", "random:")):
        name = inputs.get("name")
        if isinstance(name, str) and name:
            return f"the fixed name {name!r} (the bridge deletes first)"
    return ""


def _paths_holding(value: Any, marker: str) -> list[str]:
    """The input paths whose text contains `marker`."""
    return list(_paths_where(value, lambda v: isinstance(v, str) and marker in v))


def _paths_equal(value: Any, wanted: str) -> list[str]:
    """The input paths whose value is exactly `wanted`."""
    return list(_paths_where(value, lambda v: v == wanted))


def _paths_where(value: Any, test: Callable[[Any], bool], path: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths_where(item, test, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths_where(item, test, f"{path}[{index}]")
    elif test(value):
        yield path or "(all inputs)"


def _managed(record: Mapping[str, Any]) -> bool:
    """A resource a provider manages (components are groupings with no state of their own)."""
    return not record["type"].startswith("triton-gke:")


def _diff(key: str, old: dict[str, Any], new: dict[str, Any], rules: Rules) -> Change:
    reasons = []
    if old["urn"] != new["urn"] and old["urn"] not in new.get("aliases", []):  # the engine sees a new resource
        reasons.append(f"URN {old['urn']} -> {new['urn']} (a new URN is a new resource unless aliased)")
    if old["provider"] != new["provider"]:
        reasons.append(f"provider {old['provider']} -> {new['provider']} (another cluster)")
    ignored = new.get("ignoreChanges", [])  # the engine applies the program's current ignoreChanges
    paths = [p for p in changed_paths(old["inputs"], new["inputs"]) if not any(covers(i, p) for i in ignored)]
    type_rules = rules.types.get(new["type"])
    for path in paths:
        if any(covers(r, path) for r in new.get("replaceOnChanges", [])):
            reasons.append(f"{path} (replaceOnChanges)")
            continue
        verdict = type_rules.classify(path) if type_rules else None
        if verdict is None:
            reasons.append(f"{path} (no rule for it: assumed to force replacement)")
        elif verdict[0] == "replace":
            reasons.append(f"{path} (forces replacement: {verdict[1]} in {type_rules.source})")
    action = "replace" if reasons else "update" if paths else "unchanged"
    return Change(key, action, tuple(paths), tuple(reasons))


def _with_disruption(change: Change, record: Mapping[str, Any], new: Mapping[str, Any] | None = None) -> Change:
    if change.action not in ("replace", "delete"):
        return change
    what = disruption(record)
    # Pulumi refuses to delete, hence to replace, a protected resource: the `up` would fail, whatever is allowed
    # (https://www.pulumi.com/docs/iac/concepts/resources/options/protect/). A replacement is judged by the program's
    # new protect flag, so unprotecting and replacing may happen in one `up` (pulumi/pulumi#8873, "Allow replace if
    # either old or new protect is false": step_generator.go checks goal.Protect); a deletion by the state's flag.
    protected = bool((new if change.action == "replace" and new is not None else record).get("protect"))
    if protected:
        what = (
            f"{what or 'a protected resource'}; PROTECTED: `pulumi up` fails (unprotect it in the same `up`: "
            "allowGpuPoolReplacement true for a GPU pool, deletionProtection false otherwise)"
        )
    return dataclasses.replace(change, disruption=what, protected=protected)


def _with_triton_kept(change: Change, after: Mapping[str, dict[str, Any]]) -> Change:
    """A GPU pool replacement, with how many of the region's Triton pods keep serving while it happens."""
    record = after.get(change.key)
    if change.action != "replace" or record is None or not change.key.startswith(f"{NODE_POOL}::"):
        return change
    if not record["inputs"].get("nodeConfig", {}).get("guestAccelerators"):
        return change
    kept = triton_kept(change, record, after)
    # Created first, the new pool stands beside the old one until it is drained: both count against the GPU quota.
    quota = "" if change.outage else "; twice its GPU quota while both pools exist"
    what = f"{change.disruption}{quota}; {kept}" if change.disruption else kept
    return dataclasses.replace(change, disruption=what)


def _with_node_recreation(change: Change, after: Mapping[str, dict[str, Any]]) -> Change:
    """A node pool updated in place at a path GKE carries out by recreating every node (infra/node_recreation.py:
    machine type, image type, boot disk, containerd config), with the estimate the pool's timeouts are sized to."""
    record = after.get(change.key)
    if change.action != "update" or record is None or record["type"] != NODE_POOL:
        return change
    paths = recreating_paths(change.paths)
    if not paths:
        return change
    recreation = node_recreation(record, after)
    where = ", ".join(paths)
    if recreation is None:
        return dataclasses.replace(change, recreation=f"{where} (GKE's node upgrade; size unknown)")
    text = f"{where} (GKE's node upgrade, in place for Pulumi): {recreation.text()}"
    keep, kept = _triton_through_recreation(record, after)
    # No Triton pod left serving while a node is recreated: the region is down, as when the pool is replaced, so it is
    # refused the same way unless --allow-disruption names the pool (red team: it passed with exit 0).
    down = "the GPU pool's nodes, recreated with no Triton pod of the region left serving" if keep == 0 else ""
    return dataclasses.replace(change, recreation=f"{text}; {kept}" if kept else text, disruption=down)


def _with_key_change(change: Change, olds: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]) -> Change:
    """A Triton Deployment whose pods check another inference key slot (inferenceKeySlot changed, or inferenceAuth
    turned on): its pods roll one at a time, each new one refusing every request without the new slot's key.

    A note, not a refusal: the rollout takes no region down for a client that followed docs/security.md (both keys
    sent before the change: 0 failed in the rollout proof's key-change row), while one sending only the old key fails
    on every new pod (555 of 894 in its negative control). --allow-disruption cannot tell the two apart; the clients
    can, and the note says what they must do before this `up`."""
    old, new = olds.get(change.key), after.get(change.key)
    if change.action != "update" or old is None or new is None or new["type"] != DEPLOYMENT or not _is_triton(new):
        return change
    before, now = active_key_slot(old), active_key_slot(new)
    if now is None or before == now:
        return change
    header = inference_key_header(now)
    if before is None:
        note = (
            f"inference now needs the key: clients must already send it ({header}, the inferenceKey output); those "
            "sending none get 403/UNAVAILABLE as pods roll"
        )
    else:
        note = (
            f"the inference key slot moves {before} -> {now}: clients must already send the next key ({header}, "
            "inferenceNextKey); those sending only the old one get 403/UNAVAILABLE as pods roll"
        )
    return dataclasses.replace(change, clients=note)


def active_key_slot(record: Mapping[str, Any]) -> str | None:
    """The slot whose key tritonserver checks: the Secret key its inference key variable reads (k8s/triton.py);
    None without one (inferenceAuth false)."""
    spec = record["inputs"].get("spec", {}).get("template", {}).get("spec", {})
    for container in spec.get("containers", []):
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if env.get("name") == INFERENCE_KEY_ENV and isinstance(ref.get("key"), str):
                return ref["key"]
    return None


def node_recreation(pool: Mapping[str, Any], after: Mapping[str, dict[str, Any]]) -> RecreationEstimate | None:
    """The estimate of recreating every node of `pool` from the plan itself: its maximum, its upgrade settings and, for
    a GPU pool, the Triton pods of its cluster (startup probe window, grace period); the same function the pool's
    custom timeouts come from (infra/cluster.py pool_timeouts), so the two agree (tests/unit/offline)."""
    inputs = pool["inputs"]
    nodes = (inputs.get("autoscaling") or {}).get("totalMaxNodeCount")
    upgrade = inputs.get("upgradeSettings") or {}
    if not isinstance(nodes, int):
        return None
    startup, grace = DEFAULT_POD_STARTUP_MINUTES, KUBERNETES_DEFAULT_GRACE_S
    if inputs.get("nodeConfig", {}).get("guestAccelerators"):
        pods = _triton_pod_spec(pool, after)
        if pods is None:
            return None
        startup, grace = pods
    return estimate(nodes, upgrade.get("maxSurge", 1), upgrade.get("maxUnavailable", 0), startup, grace)


def _triton_pod_spec(pool: Mapping[str, Any], after: Mapping[str, dict[str, Any]]) -> tuple[int, int] | None:
    """(startup minutes, grace seconds) of the Triton Deployment on the pool's cluster: the startup probe's window
    (periodSeconds x failureThreshold, k8s/triton.py startup_probe_failures) and terminationGracePeriodSeconds."""
    deployment = next((r for r in _on_pool_cluster(pool, after) if r["type"] == DEPLOYMENT), None)
    if deployment is None:
        return None
    spec = deployment["inputs"].get("spec", {}).get("template", {}).get("spec", {})
    probes = [c["startupProbe"] for c in spec.get("containers", []) if isinstance(c.get("startupProbe"), dict)]
    if not probes:
        return None
    window_s = probes[0].get("periodSeconds", 10) * probes[0].get("failureThreshold", 3)  # Kubernetes' defaults
    return math.ceil(window_s / 60), spec.get("terminationGracePeriodSeconds", KUBERNETES_DEFAULT_GRACE_S)


def _on_pool_cluster(pool: Mapping[str, Any], after: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Triton's objects on the cluster whose Kubernetes provider waits for `pool` (infra/cluster.py)."""
    providers = {r["name"] for r in after.values() if r["type"] == K8S_PROVIDER and pool["urn"] in r["dependsOn"]}
    return [r for r in after.values() if r.get("provider") in providers and _is_triton(r)]


def _triton_through_recreation(pool: Mapping[str, Any], after: Mapping[str, dict[str, Any]]) -> tuple[int | None, str]:
    """How many Triton pods keep serving while a GPU pool's nodes are recreated, and the note that says so (None, ""
    where unknown or not a GPU pool): GKE's node upgrade stays within the PodDisruptionBudget
    (NodePool.UpgradeSettings, cluster_service.proto), so min replicas minus its maxUnavailable keep serving."""
    if not pool["inputs"].get("nodeConfig", {}).get("guestAccelerators"):
        return None, ""
    by_kind = {r["type"]: r["inputs"].get("spec", {}) for r in _on_pool_cluster(pool, after)}
    replicas = by_kind.get(HPA, {}).get("minReplicas", by_kind.get(DEPLOYMENT, {}).get("replicas"))
    max_unavailable = by_kind.get(PDB, {}).get("maxUnavailable")
    if not isinstance(replicas, int) or not isinstance(max_unavailable, int):
        return None, ""
    keep = max(0, replicas - max_unavailable)
    where = "the region is down while its node is recreated" if keep == 0 else "the region keeps serving"
    return keep, f"Triton keeps {keep} of its {replicas} pods (PodDisruptionBudget): {where}"


def triton_kept(change: Change, pool: Mapping[str, Any], after: Mapping[str, dict[str, Any]]) -> str:
    """What the region's Triton keeps while its GPU pool is replaced, from the new plan's own objects.

    The pool is created before the old one is deleted unless it is an outage (an auto-named pool is: Change.outage
    empty); GKE then drains the old pool's nodes honouring PodDisruptionBudgets only with
    node_drain_config.respect_pdb_during_node_pool_deletion ("About node pools": deleting a pool does not respect
    PDBs otherwise). Honoured, the PDB's maxUnavailable bounds the Triton pods evicted at once, so at least
    min replicas (the HPA's minReplicas, else the Deployment's replicas) minus maxUnavailable keep serving
    (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-budgets)."""
    # The cluster's Kubernetes provider waits for its pools (infra/cluster.py), so the pool is in its dependsOn.
    providers = {r["name"] for r in after.values() if r["type"] == K8S_PROVIDER and pool["urn"] in r["dependsOn"]}
    triton = [r for r in after.values() if r.get("provider") in providers and _is_triton(r)]
    by_kind = {r["type"]: r["inputs"].get("spec", {}) for r in triton}
    replicas = by_kind.get(HPA, {}).get("minReplicas", by_kind.get(DEPLOYMENT, {}).get("replicas"))
    max_unavailable = by_kind.get(PDB, {}).get("maxUnavailable")
    drains = any(d.get("respectPdbDuringNodePoolDeletion") for d in pool["inputs"].get("nodeDrainConfigs") or [])
    if change.outage or not drains or not isinstance(replicas, int) or not isinstance(max_unavailable, int):
        return "Triton: every pod of the region at once (the old pool goes without a PodDisruptionBudget step)"
    keep = max(0, replicas - max_unavailable)
    where = "the region is down meanwhile" if keep == 0 else "the region keeps serving"
    return (
        f"Triton keeps {keep} of its {replicas} pods (new pool first, old one drained {max_unavailable} pod at a time "
        f"by the PodDisruptionBudget): {where}"
    )


def _is_triton(record: Mapping[str, Any]) -> bool:
    meta = record["inputs"].get("metadata") if isinstance(record["inputs"].get("metadata"), dict) else {}
    return meta.get("name") == TRITON_APP and meta.get("namespace") == TRITON_NAMESPACE


def disruption(record: Mapping[str, Any]) -> str:
    """What replacing or deleting this resource takes down at once; empty when nothing of the kind."""
    kind, inputs = record["type"], record["inputs"]
    meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
    if kind == CLUSTER:
        return "a GKE cluster: every workload of its region"
    if kind == NODE_POOL and inputs.get("nodeConfig", {}).get("guestAccelerators"):
        # Deleting a node pool ignores PodDisruptionBudgets unless its node drain config says otherwise (GKE
        # "About node pools"; node_drain_config.respect_pdb_during_node_pool_deletion), and a replacement first
        # needs a second pool's GPU quota.
        return "a GPU node pool"
    if kind == BUCKET:
        return "the model bucket and every object in it"
    if kind == GLOBAL_ADDRESS:
        return "the global IP address every client and DNS record uses"
    if kind == DEPLOYMENT and _is_triton(record):
        # A Deployment keeps its name, so pulumi-kubernetes deletes the old one first: every Triton pod at once.
        return "Triton's Deployment: every Triton pod of the region at once"
    if kind == NAMESPACE and meta.get("name") == TRITON_NAMESPACE:
        return "Triton's namespace and everything in it"
    return ""


def refused(changes: Sequence[Change], allowed: Sequence[str]) -> list[Change]:
    """The disruptive changes not named (by resource name or TYPE::NAME) in `allowed`, and every protected one."""
    every = ALLOW_ALL in {a.lower() for a in allowed}
    return [
        c
        for c in changes
        if c.protected or (c.disruption and not every and c.name not in allowed and c.key not in allowed)
    ]


def stack_of(records: Mapping[str, Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The (stack, project) pairs in the URNs of plan records (urn:pulumi:STACK::PROJECT::...)."""
    pairs = set()
    for record in records.values():
        stack, _, rest = record["urn"].removeprefix("urn:pulumi:").partition("::")
        pairs.add((stack, rest.split("::", 1)[0]))
    return pairs


def unknown_names(allowed: Sequence[str], *plans: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The --allow-disruption names that match no resource of the plans (a typo would allow nothing)."""
    known = {k for plan in plans for k in plan} | {k.split("::", 1)[1] for plan in plans for k in plan}
    return [a for a in allowed if a.lower() != ALLOW_ALL and a not in known]


def summary(changes: Sequence[Change]) -> str:
    """The counts per action; with replacements, how many of them are outages and how many follow their provider."""
    counts = {action: sum(c.action == action for c in changes) for action in ACTIONS}
    text = ", ".join(f"{counts[a]} to {a}" if a != "unchanged" else f"{counts[a]} unchanged" for a in ACTIONS)
    if counts["replace"]:
        outages = sum(bool(c.outage) for c in changes)
        followers = sum(bool(c.provider) for c in changes)
        text += f" (of the replacements: {outages} deleted before created, {followers} with their replaced provider)"
    return text
