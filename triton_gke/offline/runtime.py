"""Evaluate the real Pulumi program under Pulumi's mock runtime: no CLI, no credentials, no network.

The mocks stand in only for the cloud boundary: they echo a resource's inputs back as its state
and fill in the few computed outputs the program reads (endpoints, emails, certificates).
A recording monitor keeps what the engine would receive: type, name, parent, provider,
dependencies and inputs of every resource, in registration order.

Pulumi API used: the public mock API (pulumi.runtime.Mocks, set_mocks, test, reset_options, get_root_resource),
as in https://github.com/pulumi/examples/tree/master/testing-unit-py, plus three non-exported pieces, each
marked PRIVATE PULUMI API below: the MockMonitor subclass (RecordingMonitor), the root Stack's `outputs`, and
Output.future()/is_secret() to read the outputs' values after the run (output_values).
tests/unit/offline/test_runtime.py fails, naming the pulumi version and the line here to update, if an
upgrade breaks any assumption made below.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import importlib.metadata
import itertools
import json
import os
import runpy
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks

from triton_gke.contracts.paths import project_dir
from triton_gke.infra.config import mark_offline_runtime
from triton_gke.settings.stack_file import read_yaml_file

# Orders registrations and invokes of one run, so tests can check what happened before what.
_sequence = itertools.count()
# How Pulumi's resource protocol marks a secret inside a property map: {SIG_KEY: SECRET_SIG, "value": v}.
# Constants of the wire format (pulumi sdk/go/common/resource/sig/sig.go: Key, Secret), not of the Python SDK:
# https://github.com/pulumi/pulumi/blob/master/sdk/go/common/resource/sig/sig.go
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
MOCK_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nmock\n-----END CERTIFICATE-----\n").decode()


@dataclass
class PlannedResource:
    type: str
    name: str
    urn: str
    custom: bool
    parent_urn: str
    provider_ref: str
    dependencies: list[str]
    inputs: dict[str, Any]
    parent: PlannedResource | None = None
    sequence: int = 0
    # Per operation ('create', 'update', 'delete'), how long the engine waits (Pulumi duration strings).
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    # Pulumi's own protect flag: the engine refuses to delete (or replace) the resource while it is set.
    protect: bool = False
    # Input paths the engine leaves out of the diff (ResourceOptions.ignore_changes), as the program wrote them.
    ignore_changes: list[str] = field(default_factory=list)
    # Input paths whose change the engine turns into a replacement (ResourceOptions.replace_on_changes).
    replace_on_changes: list[str] = field(default_factory=list)
    # A replacement deletes the old resource before creating the new one (ResourceOptions.delete_before_replace).
    delete_before_replace: bool = False
    # The URNs the engine also looks this resource up by in the old state (its aliases and those inherited from its
    # parent's): engine_aliases below.
    aliases: list[str] = field(default_factory=list)

    @property
    def provider_urn(self) -> str:
        """The provider reference is 'URN::ID'; the URN alone names the provider resource."""
        return self.provider_ref.rsplit("::", 1)[0] if self.provider_ref else ""


@dataclass
class Plan:
    stack: str
    resources: list[PlannedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    # (sequence, invoke) of every provider function the program called, (none today).
    invokes: list[tuple[int, Any]] = field(default_factory=list)

    def of_type(self, type_token: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_token]

    def by_urn(self, urn: str) -> PlannedResource | None:
        return next((r for r in self.resources if r.urn == urn), None)

    def ancestors(self, resource: PlannedResource) -> list[PlannedResource]:
        chain = []
        while resource.parent is not None:
            resource = resource.parent
            chain.append(resource)
        return chain


class CloudMocks(pulumi.runtime.Mocks):
    """Computed outputs that Google Cloud would return, keyed by type token."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        state.setdefault("name", args.name)
        computed = _COMPUTED.get(args.typ)
        if computed:
            state.update(computed(args.name, args.inputs))
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        self.calls.append((next(_sequence), args))
        answer = _INVOKES.get(args.token)
        return (answer(args.args) if answer else {}), []

    def __init__(self) -> None:
        self.calls: list[tuple[int, pulumi.runtime.MockCallArgs]] = []


def _cluster_outputs(name: str, inputs: dict) -> dict:
    return {
        "endpoint": "203.0.113.10",  # documentation address range: never routable
        "masterAuth": {"clusterCaCertificate": MOCK_CA},
        "selfLink": f"projects/p/locations/{inputs.get('location')}/clusters/{inputs.get('name', name)}",
    }


def _service_account_outputs(name: str, inputs: dict) -> dict:
    email = f"{inputs.get('accountId', name)}@{inputs.get('project', 'project')}.iam.gserviceaccount.com"
    return {"email": email, "name": f"projects/{inputs.get('project', 'project')}/serviceAccounts/{email}"}


def _self_link(kind: str) -> Any:
    return lambda name, inputs: {
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/p/{kind}/{inputs.get('name', name)}"
    }


# Provider functions the program calls, answered as the cloud would: none today (NEGs are named, never looked up).
_INVOKES: dict[str, Callable[[dict], dict]] = {}

_COMPUTED = {
    "gcp:container/cluster:Cluster": _cluster_outputs,
    "gcp:serviceaccount/account:Account": _service_account_outputs,
    "gcp:compute/network:Network": _self_link("global/networks"),
    "gcp:compute/subnetwork:Subnetwork": _self_link("regions/subnetworks"),
    "gcp:compute/globalAddress:GlobalAddress": lambda name, inputs: {"address": "198.51.100.7"},
    # Generated by the random provider at deploy time; a fixed stand-in here (marked secret by the SDK).
    "random:index/randomPassword:RandomPassword": lambda name, inputs: {"result": f"offline-plan-{name}"},
}


class InputTap(pulumi.runtime.Mocks):
    """Passes every call on to the cloud mocks, keeping (per thread) the public MockResourceArgs of the last resource.

    The SDK sends RegisterResource from executor threads (pulumi/runtime/resource.py, run_in_executor), and the
    mock monitor calls new_resource on that same thread, so a thread-local slot pairs each request with its args.
    """

    def __init__(self, cloud: pulumi.runtime.Mocks) -> None:
        self.cloud = cloud
        self._last = threading.local()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        self._last.args = args
        return self.cloud.new_resource(args)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        return self.cloud.call(args)

    def register_transform(self, transform: Any) -> None:
        self.cloud.register_transform(transform)

    def register_invoke_transform(self, transform: Any) -> None:
        self.cloud.register_invoke_transform(transform)

    def take(self) -> pulumi.runtime.MockResourceArgs | None:
        args, self._last.args = getattr(self._last, "args", None), None
        return args


# PRIVATE PULUMI API (the one left): MockMonitor is not exported by pulumi.runtime, only named as the type of
# set_mocks(monitor=...). Needed because parent, dependencies, aliases, customTimeouts, protect, ignoreChanges,
# replaceOnChanges and deleteBeforeReplace reach the monitor's RegisterResource request but not the public
# MockResourceArgs, and because the URN is the monitor's to make (make_urn). If it changes, the plan loses its
# ordering, URNs, aliases, timeouts and protect flags: tests/unit/offline/test_runtime.py checks the class, the
# request fields and make_urn.
# The event loops the SDK's mock monitor made in the engine's worker threads: MockMonitor.RegisterResource, Invoke and
# ReadResource call sync_await, which gives each thread it runs in a loop of its own (_ensure_event_loop,
# pulumi/runtime/sync_await.py) and never closes it. close_event_loop closes them at a command's end.
_thread_loops: set[asyncio.AbstractEventLoop] = set()
_thread_loops_lock = threading.Lock()


def _note_thread_loop() -> None:
    with contextlib.suppress(RuntimeError):  # no loop in this thread: nothing to close later
        loop = asyncio.get_event_loop_policy().get_event_loop()
        with _thread_loops_lock:
            _thread_loops.add(loop)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, plus a record of the fields the engine would use to order and bind resources; URNs,
    aliases and transforms as the engine makes and runs them (engine_urn, engine_aliases, run_transforms)."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        self.tap = InputTap(mocks)
        super().__init__(self.tap)
        self.records: list[PlannedResource] = []
        self._aliases: dict[str, list[str]] = {}  # URN -> its alias URNs, for its children to inherit
        self._parents: dict[str, str] = {}  # URN -> parent URN, for the transforms of its ancestors
        self._transforms: dict[str, list[Any]] = {}  # URN -> the transforms its own options declared
        self._lock = threading.Lock()

    @property
    def cloud(self) -> pulumi.runtime.Mocks:
        return self.tap.cloud

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        return engine_urn(get_stack_and_project(), parent, type_, name)

    def Invoke(self, request: Any) -> Any:
        try:
            return super().Invoke(request)
        finally:
            _note_thread_loop()

    def ReadResource(self, request: Any) -> Any:
        try:
            return super().ReadResource(request)
        finally:
            _note_thread_loop()

    def RegisterResource(self, request: Any) -> Any:
        try:
            response = super().RegisterResource(request)
        finally:  # the thread's loop exists once the SDK's sync_await ran, whether or not the mock raised
            _note_thread_loop()
        args = self.tap.take()
        if request.type != "pulumi:pulumi:Stack":
            if args is None:
                version = importlib.metadata.version("pulumi")
                raise RuntimeError(f"pulumi {version}: the mock monitor no longer calls Mocks.new_resource")
            self.records.append(self._record(request, response.urn, args))
        return response

    def _record(self, request: Any, urn: str, args: pulumi.runtime.MockResourceArgs) -> PlannedResource:
        with self._lock:
            aliases = engine_aliases(get_stack_and_project(), request, self._aliases.get(request.parent, []))
            self._aliases[urn] = aliases
            self._parents[urn] = request.parent
            self._transforms[urn] = list(args.transforms)
            chain = [*args.transforms, *self._ancestor_transforms(request.parent), *self.get_registered_transforms()]
        # The SDK sends explicit depends_on together with every resource whose Outputs the inputs use (components
        # expanded to their children): the engine's whole ordering, unless a transform of its own changes it.
        inputs, dependencies = run_transforms(chain, request, args, list(request.dependencies), self._urn_of)
        return PlannedResource(
            type=request.type,
            name=request.name,
            urn=urn,
            custom=bool(request.custom),
            parent_urn=request.parent,
            provider_ref=request.provider,
            dependencies=dependencies,
            # The inputs as the public mock API hands them to Mocks.new_resource (secrets still wrapped).
            inputs=_plain(inputs),
            sequence=next(_sequence),
            custom_timeouts=_custom_timeouts(request),
            protect=bool(request.protect),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace),
            aliases=aliases,
        )

    def _ancestor_transforms(self, parent: str) -> list[Any]:
        """The transforms of the parent, then its parent's, up to the root (source_eval.go, see run_transforms)."""
        chain: list[Any] = []
        while parent:
            chain += self._transforms.get(parent, [])
            parent = self._parents.get(parent, "")
        return chain

    def _urn_of(self, resource: pulumi.Resource) -> str:
        """The URN of a resource a transform named (depends_on): found by its public type and name."""
        kind, name = resource.pulumi_resource_type, resource.pulumi_resource_name
        with self._lock:
            found = [r.urn for r in self.records if (r.type, r.name) == (kind, name)]
        if len(found) != 1:
            raise RuntimeError(f"a transform's depends_on names {kind}::{name}: {len(found)} registered resources")
        return found[0]


def get_stack_and_project() -> tuple[str, str]:
    return pulumi.get_stack(), pulumi.get_project()


# The engine's URN: urn:pulumi:STACK::PROJECT::QUALIFIED_TYPE::NAME, where the qualified type is the parent's WHOLE
# qualified type, '$', the resource's type, and a child of the root stack (or of nothing) has its own type alone.
# pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8: pkg/resource/deploy/deployment.go generateURN ("use the
# full qualified type") -> sdk/go/common/resource/urn.go NewURN -> sdk/go/common/resource/urn/urn.go New. The SDK's
# MockMonitor.make_urn keeps only the parent's LAST type and prefixes the root stack's type: not what the engine saves.
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def qualified_type(urn: str) -> str:
    """The URN's qualified type (urn.go QualifiedType): every type from the root down, '$'-separated."""
    return urn.split("::")[2] if urn else ""


def engine_urn(where: tuple[str, str], parent: str, type_: str, name: str) -> str:
    stack, project = where
    parent_type = qualified_type(parent)
    full = f"{parent_type}${type_}" if parent_type and parent_type != ROOT_STACK_TYPE else type_
    return f"urn:pulumi:{stack}::{project}::{full}::{name}"


def engine_aliases(where: tuple[str, str], request: Any, parent_aliases: Sequence[str]) -> list[str]:
    """The alias URNs the engine derives for a registration (step_generator.go generateAliases, same commit): each
    alias of the request collapsed to a URN (collapseAliasToUrn), then, for the parent's aliases, the child's
    inherited alias (inheritedChildAlias: the parent alias's qualified type + the child's type, and the child's
    name with the parent's name prefix swapped for the alias's) and that of each own alias.

    The engine multiplies by the ONE alias its parent was found by in the old state (sg.aliases[parent]); which one
    that is depends on the state, so this lists the inherited aliases of every parent alias, as the SDK does when
    it computes aliases itself (sdk/python/lib/pulumi/runtime/resource.py all_aliases: "N+(M*(1+N))" aliases).
    """
    own = [_collapse_alias(where, request, alias) for alias in request.aliases]
    parent_name = request.parent.rsplit("::", 1)[-1] if request.parent else ""
    result = list(own)
    for parent_alias in parent_aliases:
        result.append(_inherited_alias(where, request.type, request.name, parent_name, parent_alias))
        for alias in own:
            alias_type = qualified_type(alias).rsplit("$", 1)[-1]
            alias_name = alias.rsplit("::", 1)[-1]
            result.append(_inherited_alias(where, alias_type, alias_name, parent_name, parent_alias))
    return list(dict.fromkeys(result))  # addAlias: each once, in order


def _collapse_alias(where: tuple[str, str], request: Any, alias: Any) -> str:
    """collapseAliasToUrn: a URN alias as it is; a spec's empty fields default to the resource's own."""
    if alias.WhichOneof("alias") == "urn":
        return alias.urn
    spec = alias.spec
    parent = "" if spec.noParent else (spec.parentUrn or request.parent)
    stack, project = spec.stack or where[0], spec.project or where[1]
    return engine_urn((stack, project), parent, spec.type or request.type, spec.name or request.name)


def _inherited_alias(where: tuple[str, str], child_type: str, child_name: str, parent_name: str, alias: str) -> str:
    if parent_name and child_name.startswith(parent_name):
        child_name = alias.rsplit("::", 1)[-1] + child_name[len(parent_name) :]
    return engine_urn(where, alias, child_type, child_name)


# Transforms as the engine runs them (pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8,
# pkg/resource/deploy/source_eval.go RegisterResource): "First run the transforms for this resource, then it's
# parents, then the stack", each on the props and options the previous one returned (the docs: a component's
# transforms apply "to a resource and all of its children",
# https://www.pulumi.com/docs/iac/concepts/resources/options/transforms/). The dependencies are rebuilt from the
# transformed dependsOn only `if len(req.Transforms) > 0`, i.e. when the resource's OWN options declare a
# transform: a dependsOn that a parent's or a stack transform adds is dropped by the engine, and the plan drops it
# too. (The engine also never holds a registration back for a dependency: the SDK sends a resource only after its
# dependencies exist, so creation order is decided in the program, before any engine-side transform runs.)
def run_transforms(
    chain: Sequence[Any],
    request: Any,
    args: pulumi.runtime.MockResourceArgs,
    dependencies: list[str],
    urn_of: Callable[[pulumi.Resource], str],
) -> tuple[dict[str, Any], list[str]]:
    """(inputs, dependencies) after the transforms in `chain`, as the engine would keep them."""
    props: dict[str, Any] = dict(args.inputs)
    opts = pulumi.ResourceOptions()
    for transform in chain:
        result = transform(pulumi.ResourceTransformArgs(bool(request.custom), request.type, request.name, props, opts))
        if result is not None:
            props, opts = dict(result.props), result.opts
    if not args.transforms:  # the engine keeps the SDK's dependencies
        return props, dependencies
    added = [urn_of(r) for r in _as_list(opts.depends_on)]
    return props, list(dict.fromkeys([*dependencies, *added]))


def _as_list(depends_on: Any) -> list[pulumi.Resource]:
    if depends_on is None:
        return []
    return list(depends_on) if isinstance(depends_on, list | tuple) else [depends_on]


def _custom_timeouts(request: Any) -> dict[str, str]:
    if not request.HasField("customTimeouts"):
        return {}
    timeouts = request.customTimeouts
    return {op: getattr(timeouts, op) for op in ("create", "update", "delete") if getattr(timeouts, op)}


def _plain(value: Any, secret: bool = False) -> Any:
    """Inputs as JSON-friendly values; every scalar inside a secret is masked, keeping the structure."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return _plain(value.get("value"), secret=True)
        return {k: _plain(v, secret) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, secret) for v in value]
    if secret:
        return "[secret]"
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return f"[{type(value).__name__}]"


def config_string(value: Any) -> str:
    if isinstance(value, dict) and "secure" in value:
        return "[secret]"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def stack_program() -> Path:
    """The stack program `triton-gke plan` evaluates: __main__.py of the project folder (the current one, where
    `pulumi up` would run it: contracts/paths.py project_dir). In this repository, the repository's __main__.py."""
    return project_dir() / "__main__.py"


def run_program(stack: str, config: dict[str, str], project_name: str, monitor: RecordingMonitor | None = None) -> Plan:
    """Run the project's __main__.py for `stack` with `config`; FileNotFoundError (one line) when there is none;
    exceptions from the program propagate."""
    program = stack_program()
    if not program.is_file():
        raise FileNotFoundError(f"{program}: no stack program here; run the command in the Pulumi project's folder")
    declare = lambda: runpy.run_path(str(program), run_name="__main__")  # noqa: E731
    return run_under_mocks(declare, stack, config, project_name, monitor)


@contextlib.contextmanager
def engine_config_env(config: Mapping[str, str], secret_keys: Sequence[str]) -> Iterator[None]:
    """The program's config where the engine puts it: the python language host hands a program its stack's config
    as the JSON bag PULUMI_CONFIG and the secret keys as PULUMI_CONFIG_SECRET_KEYS (pulumi/pulumi
    sdk/python/cmd/pulumi-language-python/main.go, Run, at 1b5949891b3cefcb9974752b24a5ecef0acc86c8), which the
    SDK's public pulumi.runtime.get_config_env() reads. Restored afterwards: runs share this process."""
    saved = {name: os.environ.get(name) for name in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")}
    os.environ["PULUMI_CONFIG"] = json.dumps(dict(config))
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(secret_keys))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_under_mocks(
    declare: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    project_name: str,
    monitor: RecordingMonitor | None = None,
    secret_keys: Sequence[str] = (),
) -> Plan:
    """Run `declare` (a program or a single component) under the mock runtime and record what it registers.

    secret_keys: config keys the engine would mark secret (pulumi.Config.get returns them as secret Outputs' text).
    """
    # A fresh root Stack per run: set_mocks makes one only while get_root_resource() is None, and reset_options is
    # the public call that clears it (pulumi/runtime/settings.py). Without it two runs in one process share a stack.
    pulumi.runtime.reset_options()
    monitor = monitor or RecordingMonitor(CloudMocks())
    pulumi.runtime.set_mocks(monitor.mocks, project=project_name, stack=stack, preview=False, monitor=monitor)
    mark_offline_runtime()  # TRITON_GKE_TODAY may name the day the version check judges (infra/config.py)
    with engine_config_env(config, secret_keys):
        # As pulumi-language-python-exec does with the same variables before it runs the program.
        pulumi.runtime.set_all_config(config, list(secret_keys))

        @pulumi.runtime.test
        def program() -> None:
            declare()

        program()
    by_urn = {r.urn: r for r in monitor.records}
    for record in monitor.records:
        record.parent = by_urn.get(record.parent_urn)
    # PRIVATE PULUMI API: pulumi.export keeps the stack outputs on the root Stack's `outputs` dict (pulumi/runtime/
    # stack.py), which has no public accessor; if it moves, Plan.outputs comes back empty (contract test catches it).
    outputs = dict(getattr(pulumi.runtime.get_root_resource(), "outputs", {}))
    return Plan(stack=stack, resources=monitor.records, outputs=outputs, invokes=list(monitor.cloud.calls))


def close_event_loop() -> None:
    """Close the event loops the mock runtime ran programs in, at a command's end: the main thread's and those of the
    monitor's worker threads (_thread_loops). Left to interpreter shutdown, a loop's __del__ can run after its
    self-pipe socket was collected and print a ValueError traceback under the command's one-line error (CI saw three,
    one per worker loop). The main loop's tasks are cancelled and finished first, so none is destroyed pending
    (asyncio logs those); closing it also ends the worker threads (its default executor)."""
    policy = asyncio.get_event_loop_policy()
    with contextlib.suppress(RuntimeError):
        loop = policy.get_event_loop()
        if loop.is_running():
            return  # called from inside a run: its loops are still in use
        if not loop.is_closed():
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()
        fresh = policy.new_event_loop()
        policy.set_event_loop(fresh)  # for a later run in this process (the SDK reuses the loop)
        _fresh_loops[:] = [*(old for old in _fresh_loops if not old.is_closed()), fresh]
    with _thread_loops_lock:
        worker_loops = [loop for loop in _thread_loops if not loop.is_running()]
        _thread_loops.difference_update(worker_loops)
    for loop in worker_loops:
        loop.close()


# The loops close_event_loop left for a later run: closed before interpreter shutdown, for the same reason.
_fresh_loops: list[asyncio.AbstractEventLoop] = []


@atexit.register
def _close_fresh_loops() -> None:
    for loop in _fresh_loops:
        if not loop.is_running() and not loop.is_closed():
            loop.close()


def output_values(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The stack outputs' values after a finished run, secrets masked (as _plain masks inputs), by name."""
    return {name: asyncio.run(_resolved(value)) for name, value in sorted(outputs.items())}


async def _resolved(value: Any) -> Any:
    # PRIVATE PULUMI API: Output.future() and Output.is_secret() are the SDK's own accessors, marked "Private
    # implementation details - do not document" in pulumi/output.py. The mock run has finished and every Output it
    # made is resolved, so awaiting them only reads the values (in a new event loop: a done future needs none).
    # If they change, tests/live/cli/test_console_script_edges.py fails on plan-folder's outputs.
    output = pulumi.Output.from_input(value)
    secret = await output.is_secret()
    return _plain(await output.future(with_unknowns=False), secret=secret)


# --- Any Pulumi program folder (Pulumi.yaml, Pulumi.<stack>.yaml, the program), e.g. examples/on-cluster-python ------


@dataclass(frozen=True)
class ProgramFolder:
    """A Python Pulumi project: its name, the file the language host runs, and its stack's config as the engine
    would pass it (namespace:key -> text; lists and maps as JSON), with the keys it would mark secret."""

    folder: Path
    project: str
    main: Path
    config: dict[str, str]
    secret_keys: list[str]


def read_program_folder(folder: Path | str, stack: str, overrides: Mapping[str, Any] | None = None) -> ProgramFolder:
    """Read `folder`'s Pulumi.yaml and Pulumi.<stack>.yaml; `overrides` (KEY or namespace:KEY) win over both.

    Pulumi.yaml: `name`, `runtime` (python only: the program runs in this process), `main` (a file or a folder
    holding __main__.py) and `config` (project keys with `default`, or `value` for a provider's namespaced key),
    https://www.pulumi.com/docs/iac/concepts/projects/project-file/. A stack's `secure:` value cannot be decrypted
    offline: it becomes "[secret]", still marked secret, as config_string writes it.
    """
    folder = Path(folder).resolve()
    # Through the one bounded reader: a Pulumi.yaml or stack file that is a FIFO, /dev/zero or an alias bomb is refused.
    project = read_yaml_file(folder / "Pulumi.yaml", "a Pulumi project file", ValueError) or {}
    runtime = project.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise ValueError(f"{folder}: runtime {runtime_name!r}: only python programs run under the offline mocks")
    name = str(project["name"])
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, spec in (project.get("config") or {}).items():
        spec = spec if isinstance(spec, dict) else {"value": spec}
        value = spec.get("value", spec.get("default"))
        if value is not None:
            config[_qualified(name, key)] = config_string(value)
        if spec.get("secret"):
            secret_keys.append(_qualified(name, key))
    stack_file = folder / f"Pulumi.{stack}.yaml"
    # lexists: a link to nothing is a stack file that cannot be read, refused, not a stack without settings.
    stack_yaml = read_yaml_file(stack_file, "a stack file", ValueError) or {} if os.path.lexists(stack_file) else {}
    stack_config = stack_yaml.get("config") or {}
    for key, value in {**stack_config, **dict(overrides or {})}.items():
        config[_qualified(name, key)] = config_string(value)
        if isinstance(value, dict) and "secure" in value:
            secret_keys.append(_qualified(name, key))
    return ProgramFolder(folder, name, program_file(folder, project.get("main")), config, sorted(set(secret_keys)))


def _qualified(project: str, key: str) -> str:
    """Pulumi's rule: a config key without a namespace belongs to the project."""
    return key if ":" in key else f"{project}:{key}"


def program_file(folder: Path, main: str | None) -> Path:
    """The file `pulumi up` runs: `main` (a file, or a folder holding __main__.py), default the folder's __main__.py."""
    target = folder / main if main else folder
    return target / "__main__.py" if target.is_dir() else target


@contextlib.contextmanager
def _as_language_host(folder: Path) -> Iterator[None]:
    """Run as the python language host runs a program: from its folder, which heads sys.path."""
    sys.path.insert(0, str(folder))
    try:
        with contextlib.chdir(folder):
            yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


def run_program_folder(folder: Path | str, stack: str = "dev", overrides: Mapping[str, Any] | None = None) -> Plan:
    """Evaluate the Python program in `folder` for `stack` under the mocks and record what it registers."""
    program = read_program_folder(folder, stack, overrides)

    def declare() -> None:
        # The program's own print()s go to stderr: stdout is plan-folder's report (its --json parsed by scripts; the
        # red team of issue 48 broke it with one print). Programs that mean to talk to the user use pulumi.log
        # (https://www.pulumi.com/docs/iac/concepts/logging/).
        with _as_language_host(program.folder), contextlib.redirect_stdout(sys.stderr):
            try:
                runpy.run_path(str(program.main), run_name="__main__")
            except SystemExit as ended:  # sys.exit() in the program: 0 ends it, as under the engine; else it failed
                if ended.code not in (None, 0):
                    raise ProgramExitError(ended.code) from None

    return run_under_mocks(declare, stack, program.config, program.project, secret_keys=program.secret_keys)


class ProgramExitError(RuntimeError):
    """The program called sys.exit() with a failure: the engine reports "Program exited with non-zero exit code: N"
    and fails the update (pulumi/pulumi#1775, #1780); here the planning command fails in one line instead of exiting
    with the program's own code, which could collide with a documented one."""

    def __init__(self, code: object) -> None:
        super().__init__(f"the program exited with code {code}")


if __name__ == "__main__":  # the old entry of `triton-gke plan-folder`, removed: say so rather than do nothing
    print(
        "error: python -m triton_gke.offline.runtime was removed: run `triton-gke plan-folder FOLDER` "
        "(or python -m triton_gke.offline.plan_folder FOLDER)",
        file=sys.stderr,
    )
    sys.exit(2)
