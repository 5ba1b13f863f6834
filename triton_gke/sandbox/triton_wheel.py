"""tritonserver and its python backend, as the nvidia-pytriton wheel ships them.

Only the python backend is in the wheel (no onnxruntime/TensorRT backends), so local runs use the
CPU twins. The wheel is installed --no-deps: it is located, never imported.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path


class TritonStartError(RuntimeError):
    """tritonserver could not start: the wheel lacks a file, or the server exited or did not become ready.

    Defined here, the lowest of the Triton modules, so a missing wheel file raises it too; callers import it
    from sandbox.triton, next to TritonServer.
    """


def site_dir() -> Path:
    """The site-packages folder holding the wheel's `pytriton` and `nvidia_pytriton.libs`."""
    spec = importlib.util.find_spec("pytriton")  # locate without importing (installed --no-deps)
    if spec is None or not spec.submodule_search_locations:
        raise TritonStartError("nvidia-pytriton is not installed: it provides the tritonserver binary")
    return Path(next(iter(spec.submodule_search_locations))).parent


def tritonserver_binary() -> Path:
    return site_dir() / "pytriton" / "tritonserver" / "bin" / "tritonserver"


def library_dir() -> Path:
    """The wheel's shared libraries: the python backend stub hangs the server unless it finds them."""
    return site_dir() / "nvidia_pytriton.libs"


def prepare_backends(target: Path) -> Path:
    """backends/python from the wheel plus the stub for this Python version."""
    root = site_dir() / "pytriton" / "tritonserver"
    python = target / "python"
    shutil.copytree(root / "backends" / "python", python, ignore=shutil.ignore_patterns("__pycache__"))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise TritonStartError(f"the wheel has no python backend stub for Python {version}")
    shutil.copy2(stub, python / stub.name)
    return target
