"""Bounds asked of the settings layer itself (issue 45): what a stack's settings accept, found by trying values, so
an agreement test sees the settings' own bound, not a constant it hopes the settings use."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from tests.support.stacks import stack_settings
from triton_gke.settings import ConfigError


def largest_gpu_max_nodes(stack: ModuleType, region: str, zones: tuple[str, ...]) -> int:
    """The largest gpuMaxNodes `stack.load_stack_settings` (settings/stack.py, or a test's copy) accepts for a dev
    stack in `region` with all its `zones`: doubling, then halving the gap; never computed from GKE's limits."""
    load: Callable[..., object] = stack.load_stack_settings

    def accepted(nodes: int) -> bool:
        config = stack_settings("dev", regions=[region], zones=list(zones), gpuMaxNodes=nodes)
        try:
            load(config, stack="dev")
        except ConfigError as err:
            assert "gpuMaxNodes" in str(err), err  # refused for the node count, not for something else
            return False
        return True

    low, high = 1, 2
    while accepted(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if accepted(middle) else (low, middle)
    return low
