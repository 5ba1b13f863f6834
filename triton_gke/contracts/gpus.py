"""What one GPU holds: the memory the model repository's instances and batches must fit in.

Here, not in settings/, because two rooms check against it: the settings layer (settings/serving.py, the stack's
variants) and the model repository builder (model_repo/settings.py), which sits below settings/.
"""

from __future__ import annotations

# Memory of one GPU, in bytes, by Compute Engine accelerator name: what a model repository's instances and their
# batches must fit in (model_repo/settings.py gpu_memory_problem). NVIDIA T4: "Memory size 16 GB" GDDR6 (NVIDIA T4
# datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf,
# and the T4 board product brief PB-09256-001, Table 2 "Memory Specifications"). Read as 16 x 10^9 bytes, below
# the 15,360 MiB (16.1 x 10^9) nvidia-smi reports on a T4, so a refusal is never caused by rounding.
# NVIDIA L4: 24 GB GDDR6 (third-party copies of the spec table only: modal-labs docs "NVIDIA L4 ... 24GB of GPU
# memory"; no NVIDIA datasheet in a stored copy here). The one home of GPU memory: infra/data/gpu_types.csv, which
# holds every other fact of a GPU type, has no memory column (settings/gpu_types.py GpuType.memory_bytes reads this),
# and tests/unit/contracts/test_homes_followed.py checks both tables, and every other one keyed by a GPU name, have
# the same GPUs.
GPU_MEMORY_BYTES = {"nvidia-tesla-t4": 16 * 10**9, "nvidia-l4": 24 * 10**9}


def gpu_memory_bytes(accelerator: str) -> int | None:
    """Memory of one `accelerator` GPU in bytes; None when this catalogue does not know it."""
    return GPU_MEMORY_BYTES.get(accelerator)
