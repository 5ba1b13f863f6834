"""The real program (or one component) evaluated under Pulumi's mock runtime, with a shipped stack's settings.

    evaluate("prod", minReplicas=2)          the stack program (__main__.py) with one setting changed
    evaluate_component(declare, "dev")       what `declare()` declares, under the same settings
    stack_settings("dev", gpuType=None)      the stack file's config, a key changed or removed

Imported by test modules and fixtures, which pytest imports only after tests/conftest.py has run: that is what sets
TRITON_GKE_TODAY (the day the version check judges, so the shipped stacks' plans do not change with the calendar),
loads the Hypothesis profile and puts the checkout first on sys.path. Imported without that day set (outside
pytest), it refuses in one line rather than plan against the real date.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from triton_gke.offline.runtime import Plan, config_string, run_program, run_under_mocks
from triton_gke.settings import stack_config
from triton_gke.settings.schema import config_schema
from triton_gke.settings.versions import TODAY_ENV

if not os.environ.get(TODAY_ENV):
    raise ImportError(f"tests.support.stacks: {TODAY_ENV} is unset; run under pytest (tests/conftest.py sets it)")

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
