"""Raw ONNX Runtime throughput of a served model's ONNX file, without Triton, on the same cores.

The ceiling the served numbers are compared with (served/raw): same file, same batch size the
dynamic batcher achieved, ONNX Runtime's CPU provider with one thread per core and no spinning
(as the CPU twins run it). Run it while no server is running, or it measures the contention.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from triton_gke.bench.metrics.probes import cpu_count

if TYPE_CHECKING:
    import onnxruntime as ort

_NUMPY = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8}


def session(path: Path, threads: int | None = None) -> ort.InferenceSession:
    import onnxruntime as ort  # the 'local' extra: imported when used, so --help needs no extra

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or cpu_count()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def random_batch(sess: ort.InferenceSession, batch: int) -> dict[str, np.ndarray]:
    """Seeded random inputs of the model's own types and shapes (dynamic dims other than batch: 1)."""
    rng = np.random.default_rng(0)
    feed = {}
    for spec in sess.get_inputs():
        dtype = _NUMPY.get(spec.type)
        if dtype is None:
            raise ValueError(f"input {spec.name!r} has type {spec.type}; only float and uint8 inputs are supported")
        shape = [batch, *(d if isinstance(d, int) and d > 0 else 1 for d in spec.shape[1:])]
        feed[spec.name] = rng.integers(0, 256, shape, dtype=np.uint8) if dtype is np.uint8 else rng.random(shape, dtype)
    return feed


def throughput(path: Path, batch: int, seconds: float = 3.0) -> float:
    """Images per second over `seconds` of back-to-back runs, after one untimed warm-up run."""
    sess = session(path)
    feed = random_batch(sess, batch)
    sess.run(None, feed)
    runs, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        sess.run(None, feed)
        runs += 1
    return runs * batch / elapsed
