"""Shared helpers: evaluate the real program (or one component) under Pulumi's mock runtime."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from triton_gke.offline.runtime import Plan, config_string, run_program, run_under_mocks  # noqa: E402
from triton_gke.settings import stack_config  # noqa: E402
from triton_gke.settings.schema import config_schema  # noqa: E402

PROJECT = config_schema()[0]


def stack_settings(stack: str, **overrides: Any) -> dict[str, str]:
    """The stack file's config with `overrides` (project keys by short name, python values)."""
    config = stack_config(stack)
    for key, value in overrides.items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = config_string(value)
    return config


def evaluate(stack: str = "dev", **overrides: Any) -> Plan:
    return run_program(stack, stack_settings(stack, **overrides), PROJECT)


def evaluate_component(declare: Callable[[], Any], stack: str = "dev", **overrides: Any) -> Plan:
    return run_under_mocks(declare, stack, stack_settings(stack, **overrides), PROJECT)


@pytest.fixture(scope="session", autouse=True)
def built_model_repository() -> None:
    """The program refuses to plan without the repository it uploads; dev and prod share the reference settings."""
    from triton_gke.offline import build_models

    assert build_models.main(["--stack", "dev"]) == 0


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return evaluate("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return evaluate("prod")
