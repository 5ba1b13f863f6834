"""Triton python-backend model: the GPU twin. It waits, it does not compute.

Copied as `model.py` into a GPU twin's version folder by model_repo.gpu_twin, beside gpu_service.py (the timing
rule, loaded from this folder: the stub cannot import triton_gke). Each execute() holds its instance for the batch's
T4 execution time times the time scale k, sharing one simulated GPU with every other execution in flight on this
server by processor sharing (gpu_service.py). The sharing state (virtual time, real time, executions in flight) is
a 24-byte file under /dev/shm guarded by fcntl.flock, because Triton runs each python-backend instance in its own
stub process. Waiting is done in slices of at most `tick_ms` (config parameter, default 1 ms), re-reading the state
after each: a departure that speeds the others up is seen within one slice, so an execution ends at most one slice
(plus the scheduler's wake-up delay) late.

Config parameters (string values): service_curve_ms "1:7.34,2:9.29,..." (batch:ms rows of the curve),
time_scale (k), sharing_speedup "1,1.1,..." (s(m), optional), gpu_state_file (optional: the default is one GPU per
tritonserver process, keyed by the parent's pid), tick_ms.
Output: one FP32 value per request (the batch size it was served in), so clients and tests can see the batching.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

_STATE = struct.Struct("<ddq")  # v, t, m


def _load_rule():  # noqa: ANN202 - a module object
    path = Path(__file__).with_name("gpu_service.py")
    spec = importlib.util.spec_from_file_location("gpu_twin_service", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there while the class is made
    spec.loader.exec_module(module)
    return module


rule = _load_rule()


def _param(config: dict, key: str, default: str) -> str:
    return config.get("parameters", {}).get(key, {}).get("string_value", default)


class SharedGpu:
    """The processor-sharing state in a file, read and written under an exclusive flock."""

    def __init__(self, path: str, speedup: tuple[float, ...]) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.speedup = speedup

    def _update(self, change):  # noqa: ANN001, ANN202 - change: (state, now) -> state
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            raw = os.pread(self.fd, _STATE.size, 0)
            state = rule.GpuState(*_STATE.unpack(raw)) if len(raw) == _STATE.size else rule.GpuState()
            state = change(state, time.monotonic())  # CLOCK_MONOTONIC: one clock for all stub processes
            os.pwrite(self.fd, _STATE.pack(state.v, state.t, state.m), 0)
            return state
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def run(self, work_s: float, tick_s: float) -> None:
        """Hold the caller until `work_s` seconds of whole-GPU work are done under sharing."""
        target = self._update(lambda s, now: rule.join(s, now, self.speedup)).v + work_s
        while True:
            state = self._update(lambda s, now: rule.advance(s, now, self.speedup))
            left = rule.seconds_left(state, target, self.speedup)
            if left <= 0:
                self._update(lambda s, now: rule.leave(s, now, self.speedup))
                return
            time.sleep(min(left, tick_s))


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.curve = rule.parse_curve(_param(config, "service_curve_ms", ""))
        self.k = float(_param(config, "time_scale", "1"))
        self.tick_s = float(_param(config, "tick_ms", "1")) / 1000
        speedup = tuple(float(x) for x in _param(config, "sharing_speedup", "").split(",") if x.strip())
        rule.service_s(self.curve, max(self.curve), self.k)  # a bad curve or k fails initialize(): the log says why
        path = _param(config, "gpu_state_file", "") or f"/dev/shm/triton_gpu_twin_{os.getppid()}.state"
        self.gpu = SharedGpu(path, speedup)
        self.input = config["input"][0]["name"]
        self.output = config["output"][0]["name"]

    def execute(self, requests: list) -> list:
        try:
            sizes = [pb_utils.get_input_tensor_by_name(r, self.input).as_numpy().shape[0] for r in requests]
            batch = int(sum(sizes))
            self.gpu.run(rule.service_s(self.curve, batch, self.k), self.tick_s)
        except Exception as err:  # answer every request rather than crash the instance
            error = pb_utils.TritonError(f"{type(err).__name__}: {err}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(self.output, np.full((n, 1), batch, dtype=np.float32))])
            for n in sizes
        ]
