"""Triton python-backend model: runs the ONNX file next to it with ONNX Runtime on CPU.

Copied as `model.py` into each CPU twin's version folder by model_repo.cpu_twin. Input and
output names come from the model configuration, so one file serves any ONNX model.
A config parameter `inject_delay_ms` (absent by default) adds that much time to every
execution: a deliberately slow model, for testing latency alerts. `intra_op_thread_count` and
`inter_op_thread_count` (absent by default) set ONNX Runtime's threads (bench/tuners/tune.py searches them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

ONNX_FILENAME = "model.onnx"
DELAY_PARAMETER = "inject_delay_ms"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours cpusets/containers, unlike os.cpu_count
    except AttributeError:
        return os.cpu_count() or 1


def _threads(config: dict, key: str) -> int:
    """A thread-count parameter under the name Triton's onnxruntime backend reads (intra_op_thread_count,
    inter_op_thread_count: https://github.com/triton-inference-server/onnxruntime_backend#model-config-options);
    0 when absent: this model's own choice."""
    raw = config.get("parameters", {}).get(key, {}).get("string_value", "0")
    count = int(raw)  # a bad value fails initialize(): the model does not load, the log says why
    if not 0 <= count <= 1024:
        raise ValueError(f"{key}={raw!r}: expected 0 to 1024 threads")
    return count


def _session(path: Path, instances: int, intra: int = 0, inter: int = 0) -> ort.InferenceSession:
    options = ort.SessionOptions()
    # Instances share the cores: more threads than cores/instances only adds contention,
    # and spinning threads burn the cores other instances need.
    options.intra_op_num_threads = intra or max(1, _cpu_count() // instances)
    options.inter_op_num_threads = inter or 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _injected_delay_ms(config: dict) -> float:
    raw = config.get("parameters", {}).get(DELAY_PARAMETER, {}).get("string_value", "0")
    delay = float(raw)  # a bad value fails initialize(): the model does not load, the log says why
    if not 0 <= delay <= 600_000:
        raise ValueError(f"{DELAY_PARAMETER}={raw!r}: expected 0 to 600000 ms")
    return delay


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        instances = sum(int(group.get("count", 1)) for group in config.get("instance_group", [])) or 1
        folder = Path(args["model_repository"]) / args["model_version"]
        threads = (_threads(config, "intra_op_thread_count"), _threads(config, "inter_op_thread_count"))
        self.session = _session(folder / ONNX_FILENAME, instances, *threads)
        self.inputs = [tensor["name"] for tensor in config["input"]]
        self.outputs = [tensor["name"] for tensor in config["output"]]
        self.delay_s = _injected_delay_ms(config) / 1000

    def execute(self, requests: list) -> list:
        """Run all requests the batcher collected as ONE batch, then split the results."""
        try:
            arrays = {
                name: [pb_utils.get_input_tensor_by_name(r, name).as_numpy() for r in requests] for name in self.inputs
            }
            sizes = [a.shape[0] for a in arrays[self.inputs[0]]]
            # One request (most of them below saturation): its tensor as is; concatenating would copy it.
            feed = {name: parts[0] if len(parts) == 1 else np.concatenate(parts) for name, parts in arrays.items()}
            results = self.session.run(self.outputs, feed)
            if self.delay_s:
                time.sleep(self.delay_s)  # holds the instance, as a slower model would
        except Exception as err:  # answer every request rather than crash the instance
            error = pb_utils.TritonError(f"{type(err).__name__}: {err}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        bounds = np.cumsum(sizes)[:-1]
        per_output = [np.split(result, bounds) for result in results]
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor(name, parts[i]) for name, parts in zip(self.outputs, per_output, strict=True)]
            )
            for i in range(len(requests))
        ]
