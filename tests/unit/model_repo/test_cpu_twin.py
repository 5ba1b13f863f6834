"""model_repo.cpu_twin.delayed_copy: the delay must be whole milliseconds, CPU twins only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from triton_gke.model_repo.cpu_twin import DELAY_PARAMETER, delayed_copy, inject_delay
from triton_gke.model_repo.errors import ModelRepoError

if TYPE_CHECKING:  # imported by pytest_plugins; importing it here first would skip its assert rewriting
    pass


@pytest.mark.parametrize("delay", [-1, 600_001, 1.5, True])
def test_injected_delay_must_be_whole_milliseconds(delay: object) -> None:
    from tritonclient.grpc import model_config_pb2 as mc

    with pytest.raises(ModelRepoError, match=f"{DELAY_PARAMETER}: expected a whole number of ms from 0 to 600000"):
        inject_delay(mc.ModelConfig(), delay)


def test_only_cpu_twins_can_be_delayed(tmp_path: Path) -> None:
    model = tmp_path / "plain"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.onnx").write_bytes(b"")
    config = 'name: "plain"\nbackend: "onnxruntime"\nmax_batch_size: 1\n'
    config += 'input { name: "x" data_type: TYPE_FP32 dims: 1 }\noutput { name: "y" data_type: TYPE_FP32 dims: 1 }\n'
    (model / "config.pbtxt").write_text(config)
    with pytest.raises(ModelRepoError, match="not a CPU twin"):
        delayed_copy(model, tmp_path / "slow", 100)
    assert not (tmp_path / "slow").exists()
