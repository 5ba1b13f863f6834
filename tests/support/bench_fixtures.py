"""A CPU twin with a KNOWN service time, served by the real tritonserver: for load-test mechanics.

The model reads the load test's 224x224x3 image, averages it to 224 numbers (microseconds of
work) and sleeps `inject_delay_ms` in every execution (the twin's own delay parameter,
model_repo/twin_model.py). No dynamic batching and one instance: each request is served alone,
so the server is a single queue with a deterministic service time (an M/D/1 queue under Poisson
arrivals). The sleep dominates the noise of busy cores, so tools measuring the same server must
agree on its capacity.

Use from a test module with `pytest_plugins = ("tests.support.bench_fixtures",)`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from triton_gke.model_repo.cpu_twin import TEMPLATE
from triton_gke.sandbox.triton import TritonServer

SLOW_MODEL = "slow"
SERVICE_MS = 40  # per request: capacity 25 requests/s (less Triton's ~1 ms of overhead)


def tiny_onnx(path: Path) -> Path:
    """[N,224,224,3] float -> [N,224]: ReduceMean over two axes (opset 13 keeps axes an attribute)."""
    node = helper.make_node("ReduceMean", ["input"], ["probabilities"], axes=[2, 3], keepdims=0)
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 224, 224, 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 224])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by any onnxruntime of the last years
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def slow_twin(repository: Path, name: str = SLOW_MODEL, delay_ms: int = SERVICE_MS) -> Path:
    """A python-backend twin of tiny_onnx that sleeps delay_ms per execution; one instance, no batcher."""
    version = repository / name / "1"
    version.mkdir(parents=True)
    tiny_onnx(version / "model.onnx")
    shutil.copyfile(TEMPLATE, version / "model.py")
    (repository / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "input" data_type: TYPE_FP32 dims: [224, 224, 3] }]\n'
        'output [{ name: "probabilities" data_type: TYPE_FP32 dims: [224] }]\n'
        "instance_group [{ count: 1 kind: KIND_CPU }]\n"
        f'parameters {{ key: "inject_delay_ms" value {{ string_value: "{delay_ms}" }} }}\n',
        encoding="utf-8",
    )
    return repository / name


@pytest.fixture(scope="session")
def slow_model() -> tuple[str, int]:
    """(model name, service time in ms) of the slow twin."""
    return SLOW_MODEL, SERVICE_MS


@pytest.fixture(scope="session")
def slow_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repository = tmp_path_factory.mktemp("slow_repo")
    slow_twin(repository)
    return repository


@pytest.fixture(scope="module")
def slow_triton(slow_repository: Path) -> Iterator[TritonServer]:
    """Not in a network namespace: its port relay would add its own CPU use and latency."""
    with slow_triton_server(slow_repository) as server:
        yield server


def slow_triton_server(repository: Path) -> TritonServer:
    """slow_triton's server, not started: the local flags alone (sandbox.triton wheel_flags)."""
    return TritonServer(repository, ready_timeout_s=120)
