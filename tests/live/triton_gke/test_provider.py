"""The component provider's real gRPC interface.

The provider process is started as the python language host starts a plugin (`python <plugin folder> ENGINE`,
pulumi sdk/python/cmd/pulumi-language-python/main.go RunPlugin): it prints its port and serves Pulumi's
ResourceProvider service (pulumi/runtime/proto/provider.proto). Construct runs against a ResourceMonitor served
from this process: offline/runtime.py's RecordingMonitor behind a gRPC adapter, so the children the component
registers are recorded as in `make plan`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pulumi
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc, resource_pb2, resource_pb2_grpc

import triton_gke
from tests.unit.triton_gke.test_provider import PLUGIN_DIR, SEMVER, TOKEN, committed_schema
from tests.unit.triton_gke.test_release import static_version
from triton_gke import provider
from triton_gke.offline.runtime import CloudMocks, RecordingMonitor


# --- the provider process, over gRPC ---------------------------------------------------------------------------
class Provider:
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)


@pytest.fixture
def engine() -> Iterator[tuple[str, RecordingMonitor]]:
    """A ResourceMonitor and an Engine on one local gRPC server: the two services a Construct call talks to."""
    monitor = RecordingMonitor(CloudMocks())
    # make_urn and the (de)serialisation in MockMonitor read this process's Pulumi settings: the mocks' own setup.
    pulumi.runtime.reset_options()
    pulumi.runtime.set_mocks(monitor.mocks, project="consumer", stack="dev", preview=False, monitor=monitor)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(MonitorOverGrpc(monitor), server)
    engine_pb2_grpc.add_EngineServicer_to_server(EngineOverGrpc(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", monitor
    finally:
        server.stop(grace=None)
        pulumi.runtime.reset_options()


@pytest.fixture
def provider_process(engine: tuple[str, RecordingMonitor]) -> Iterator[Provider]:
    address, _ = engine
    process = subprocess.Popen(
        [sys.executable, str(PLUGIN_DIR), address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.strip().isdigit(), (
            f"the provider printed no port: {line!r} {process.stderr.read() if process.stderr else ''}"
        )
        yield Provider(process, int(line))
    finally:
        process.terminate()
        process.wait(timeout=30)


class MonitorOverGrpc(resource_pb2_grpc.ResourceMonitorServicer):
    """The SDK's mock monitor (here the RecordingMonitor) answering real ResourceMonitor calls."""

    def __init__(self, monitor: RecordingMonitor) -> None:
        self.monitor = monitor

    def SupportsFeature(self, request: Any, context: Any) -> Any:
        # The mock answers with a plain object; the wire needs the message.
        return resource_pb2.SupportsFeatureResponse(hasSupport=self.monitor.SupportsFeature(request).hasSupport)

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:
        return self.monitor.GetDeploymentInfo(request)

    def RegisterResource(self, request: Any, context: Any) -> Any:
        return self.monitor.RegisterResource(request)

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:
        return self.monitor.RegisterResourceOutputs(request)

    def Invoke(self, request: Any, context: Any) -> Any:
        return self.monitor.Invoke(request)

    def RegisterPackage(self, request: Any, context: Any) -> Any:
        return self.monitor.RegisterPackage(request)

    def SignalAndWaitForShutdown(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()


class EngineOverGrpc(engine_pb2_grpc.EngineServicer):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def Log(self, request: Any, context: Any) -> Any:
        self.messages.append(request.message)
        return empty_pb2.Empty()


def test_get_schema_over_grpc_is_the_committed_schema(provider_process: Provider) -> None:
    response = provider_process.stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
    served = json.loads(response.schema)
    # The package's version (pyproject.toml's, the installed one) as the semantic version Pulumi's binder parses, in
    # the served schema, the committed one and the plugin's info (what `pulumi package add PATH` reads).
    version = provider.pulumi_version(static_version())
    assert version == provider.pulumi_version(triton_gke.__version__) and SEMVER.match(version), version
    assert served["version"] == version and served == committed_schema()
    info = provider_process.stub.GetPluginInfo(empty_pb2.Empty(), timeout=30)
    assert info.version == version


def test_construct_over_grpc_builds_triton_on_cluster(
    provider_process: Provider, engine: tuple[str, RecordingMonitor]
) -> None:
    address, monitor = engine
    inputs = struct_pb2.Struct()
    inputs.update({"modelRepository": "gs://example-models/triton", "kubeconfig": "apiVersion: v1", "maxReplicas": 2})
    request = provider_pb2.ConstructRequest(
        project="consumer", stack="dev", type=TOKEN, name="triton", inputs=inputs, monitorEndpoint=address
    )
    response = provider_process.stub.Construct(request, timeout=120)
    assert response.urn.endswith(f"::{TOKEN}::triton")
    state = dict(response.state)
    assert state["httpEndpoint"].startswith("http://") and state["namespace"]
    deployments = [r for r in monitor.records if r.type == "kubernetes:apps/v1:Deployment"]
    images = [c["image"] for d in deployments for c in d.inputs["spec"]["template"]["spec"]["containers"]]
    assert any("tritonserver" in image for image in images)
    assert any(r.type == "kubernetes:core/v1:Service" for r in monitor.records)
    assert any(r.type == "pulumi:providers:kubernetes" for r in monitor.records), "the kubeconfig's provider"


def test_construct_over_grpc_takes_the_namespaces_by_their_schema_names(
    provider_process: Provider, engine: tuple[str, RecordingMonitor]
) -> None:
    """A TypeScript or YAML program spells the nested roles as the schema does (loadTest, gpuMetrics): the provider
    maps them to the Python names (pulumi/provider/experimental/component.py map_input_properties)."""
    address, monitor = engine
    inputs = struct_pb2.Struct()
    names = {"triton": "ml-serving", "loadTest": "ml-load", "monitoring": "ml-obs", "gpuMetrics": "ml-gpu"}
    inputs.update(
        {
            "modelRepository": "gs://example-models/triton",
            "kubeconfig": "apiVersion: v1",
            "monitoring": True,
            "loadTest": True,
            "namespaces": names,
        }
    )
    request = provider_pb2.ConstructRequest(
        project="consumer", stack="dev", type=TOKEN, name="team", inputs=inputs, monitorEndpoint=address
    )
    response = provider_process.stub.Construct(request, timeout=120)
    assert dict(response.state)["namespace"] == "ml-serving"
    created = {r.inputs["metadata"]["name"] for r in monitor.records if r.type == "kubernetes:core/v1:Namespace"}
    assert set(names.values()) <= created


def test_construct_refuses_a_missing_required_input(provider_process: Provider, engine: tuple[str, Any]) -> None:
    address, _ = engine
    request = provider_pb2.ConstructRequest(
        project="consumer", stack="dev", type=TOKEN, name="t", monitorEndpoint=address
    )
    with pytest.raises(grpc.RpcError) as error:
        provider_process.stub.Construct(request, timeout=60)
    # The SDK answers INVALID_ARGUMENT with the property path in the status details (provider/server.py,
    # create_grpc_invalid_properties_status), which ride in the trailing metadata.
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert b"modelRepository" in dict(error.value.trailing_metadata())["grpc-status-details-bin"]


@pytest.mark.parametrize(
    ("namespaces", "said"),
    [
        ({"tritn": "ml-serving"}, "namespaces: 'tritn' is not a namespace the components use"),
        ("ml-serving", "namespaces: expected a mapping of triton, load_test, monitoring, gpu_metrics"),
    ],
)
def test_construct_refuses_namespaces_the_schema_does_not_declare(
    provider_process: Provider, engine: tuple[str, Any], namespaces: Any, said: str
) -> None:
    """The SDK's mapping keeps only an object type's declared keys (and makes a non-object {}): the component would
    have deployed into the default namespaces without a word. It gets them as given and refuses them in one line."""
    address, _ = engine
    inputs = struct_pb2.Struct()
    inputs.update({"modelRepository": "gs://example-models/triton", "kubeconfig": "apiVersion: v1"})
    inputs["namespaces"] = namespaces
    request = provider_pb2.ConstructRequest(
        project="consumer", stack="dev", type=TOKEN, name="team", inputs=inputs, monitorEndpoint=address
    )
    with pytest.raises(grpc.RpcError) as error:
        provider_process.stub.Construct(request, timeout=60)
    assert said in (error.value.details() or ""), error.value.details()
