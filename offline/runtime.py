"""Evaluate the real Pulumi program under Pulumi's mock runtime: no CLI, no credentials, no network.

The mocks stand in only for the cloud boundary: they echo a resource's inputs back as its state
and fill in the few computed outputs the program reads (endpoints, emails, certificates).
A recording monitor keeps what the engine would receive: type, name, parent, provider,
dependencies and inputs of every resource, in registration order.
"""

from __future__ import annotations

import base64
import json
import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROGRAM = PROJECT_DIR / "__main__.py"
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

    @property
    def provider_urn(self) -> str:
        """The provider reference is 'URN::ID'; the URN alone names the provider resource."""
        return self.provider_ref.rsplit("::", 1)[0] if self.provider_ref else ""


@dataclass
class Plan:
    stack: str
    resources: list[PlannedResource]
    outputs: dict[str, Any] = field(default_factory=dict)

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
        return {}, None


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


_COMPUTED = {
    "gcp:container/cluster:Cluster": _cluster_outputs,
    "gcp:serviceaccount/account:Account": _service_account_outputs,
    "gcp:compute/network:Network": _self_link("global/networks"),
    "gcp:compute/subnetwork:Subnetwork": _self_link("regions/subnetworks"),
}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, plus a record of the fields the engine would use to order and bind resources."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[PlannedResource] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.records.append(
                PlannedResource(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    custom=bool(request.custom),
                    parent_urn=request.parent,
                    provider_ref=request.provider,
                    dependencies=list(request.dependencies),
                    inputs=_plain(pulumi.runtime.rpc.deserialize_properties(request.object, keep_unknowns=True)),
                )
            )
        return response


def _plain(value: Any) -> Any:
    """Inputs as JSON-friendly values; secrets and unknowns shown as markers, never as their values."""
    if isinstance(value, dict):
        if value.get(pulumi.runtime.rpc._special_sig_key) == pulumi.runtime.rpc._special_secret_sig:
            return "[secret]"
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return f"[{type(value).__name__}]"


def stack_config(stack: str, project_dir: Path = PROJECT_DIR) -> dict[str, str]:
    """Pulumi.<stack>.yaml as the engine passes it: 'namespace:key' -> string (structured values as JSON)."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{path.name}: no such stack file")
    values = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    return {key: config_string(value) for key, value in values.items()}


def config_string(value: Any) -> str:
    if isinstance(value, dict) and "secure" in value:
        return "[secret]"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def run_program(stack: str, config: dict[str, str], project_name: str, monitor: RecordingMonitor | None = None) -> Plan:
    """Run __main__.py for `stack` with `config`; exceptions from the program propagate."""
    declare = lambda: runpy.run_path(str(PROGRAM), run_name="__main__")  # noqa: E731
    return run_under_mocks(declare, stack, config, project_name, monitor)


def run_under_mocks(
    declare: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    project_name: str,
    monitor: RecordingMonitor | None = None,
) -> Plan:
    """Run `declare` (a program or a single component) under the mock runtime and record what it registers."""
    pulumi_settings.ROOT.set(None)
    monitor = monitor or RecordingMonitor(CloudMocks())
    pulumi.runtime.set_mocks(monitor.mocks, project=project_name, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config)

    @pulumi.runtime.test
    def program() -> None:
        declare()

    program()
    by_urn = {r.urn: r for r in monitor.records}
    for record in monitor.records:
        record.parent = by_urn.get(record.parent_urn)
    outputs = dict(getattr(pulumi_settings.get_root_resource(), "outputs", {}))
    return Plan(stack=stack, resources=monitor.records, outputs=outputs)


def load_settings(stack: str, overrides: dict[str, str] | None = None) -> Any:
    """The validated StackSettings of `stack`, read exactly as the program reads them."""
    from infra.config import config_schema, load_stack_settings

    captured = []
    run_under_mocks(
        lambda: captured.append(load_stack_settings()),
        stack,
        stack_config(stack) | (overrides or {}),
        config_schema()[0],
    )
    return captured[0]
