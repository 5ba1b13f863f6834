"""Session fixtures: the model repository built once, and a real tritonserver serving it.

Use from a test module with `pytest_plugins = ("tests.support.triton_fixtures",)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triton_gke.model_repo.build import BuildResult, build_repository
from triton_gke.model_repo.settings import default_settings
from triton_gke.sandbox.netns import isolation_available
from triton_gke.sandbox.triton import TritonServer


@pytest.fixture(scope="session")
def model_repos(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    """The five reference variants (GPU repo + CPU twins); ONNX files come from build/cache."""
    root = tmp_path_factory.mktemp("model_repos")
    return build_repository(default_settings(), root / "gpu", root / "cpu")


@pytest.fixture(scope="session")
def cpu_triton(model_repos: BuildResult) -> Iterator[TritonServer]:
    """tritonserver on the CPU twins, in a loopback-only network namespace where allowed."""
    with cpu_triton_server(model_repos.cpu_out) as server:
        yield server


def cpu_triton_server(repository: Path) -> TritonServer:
    """cpu_triton's server, not started: the local flags alone (sandbox.triton wheel_flags)."""
    return TritonServer(repository, isolate_network=isolation_available(), ready_timeout_s=240)
