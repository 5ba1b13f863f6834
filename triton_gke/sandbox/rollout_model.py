"""The model the rollout proof serves: tiny, so 40 requests/s cost little on 2 busy cores, with a fixed service time.

A CPU twin like model_repo's (the python backend running an ONNX file with ONNX Runtime, model_repo/twin_model.py),
of a graph small enough to build in milliseconds: the load test's 224x224x3 UINT8 image cast to float and reduced to
224 numbers. The twin's own `inject_delay_ms` parameter makes every batch take SERVICE_MS, so requests are in flight
long enough for a replica's removal to catch some, as a GPU model's would. Version 1 averages, version 2 takes the
maximum: a real model change, which model_repo.sync uploads under a new version number (sync.py "Atomic updates").
"""

from __future__ import annotations

import shutil
from pathlib import Path

MODEL = "rollout"
SERVICE_MS = 250  # per batch
MAX_BATCH = 16
REDUCERS = {1: "ReduceMean", 2: "ReduceMax"}  # what each version of the model computes


def onnx_graph(path: Path, version: int) -> Path:
    """[N,224,224,3] uint8 -> [N,224] float: Cast, then the version's reducer over two axes (opset 13 attribute)."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Cast", ["input"], ["pixels"], to=TensorProto.FLOAT),
        helper.make_node(REDUCERS[version], ["pixels"], ["probabilities"], axes=[2, 3], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        f"{MODEL}_v{version}",
        [helper.make_tensor_value_info("input", TensorProto.UINT8, ["N", 224, 224, 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 224])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by the onnxruntime the python backend imports
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def config_text(service_ms: int = SERVICE_MS) -> str:
    """One CPU instance; the dynamic batcher groups what arrives while a batch runs (twin_model.py runs a list of
    requests as one batch), so the capacity is MAX_BATCH per SERVICE_MS, far above the proof's load."""
    return (
        f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: {MAX_BATCH}\n'
        'input [{ name: "input" data_type: TYPE_UINT8 dims: [224, 224, 3] }]\n'
        'output [{ name: "probabilities" data_type: TYPE_FP32 dims: [224] }]\n'
        "instance_group [{ count: 1 kind: KIND_CPU }]\n"
        "dynamic_batching { }\n"
        f'parameters {{ key: "inject_delay_ms" value {{ string_value: "{service_ms}" }} }}\n'
    )


def build(repository: Path, version: int) -> Path:
    """A repository holding only MODEL at `version` (replacing what was there); returns the repository."""
    from triton_gke.model_repo.cpu_twin import TEMPLATE

    folder = repository / MODEL
    shutil.rmtree(folder, ignore_errors=True)
    (folder / str(version)).mkdir(parents=True)
    onnx_graph(folder / str(version) / "model.onnx", version)
    shutil.copyfile(TEMPLATE, folder / str(version) / "model.py")
    (folder / "config.pbtxt").write_text(config_text(), encoding="utf-8")
    return repository
