"""The settings layer's one entry reads a stack exactly as the Pulumi adapter does.

`pulumi up` reaches the entry through infra/config.py (the engine's config, secret keys and stack name); the
plan, model build, sandbox and bench reach it with the stack file plus overrides, without Pulumi's mock
engine. Both paths must give the same settings or the same one-line refusal."""

from __future__ import annotations

import inspect
import json
import re

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulumi_kubernetes.provider import ProviderArgs

import triton_gke.infra.config as infra_config
from tests.support.stacks import PROJECT, stack_settings
from triton_gke.offline.runtime import config_string, run_under_mocks
from triton_gke.settings import from_stack_file, load_stack_settings
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.keys import provider_config_keys
from triton_gke.settings.schema import config_schema

KEYS = config_schema()[1]


def test_kubernetes_provider_keys_read_from_source_match_the_installed_class() -> None:
    """settings/keys.py parses pulumi_kubernetes/provider.py instead of importing it: same names as the signature."""
    names = inspect.signature(ProviderArgs.__init__).parameters
    imported = {re.sub(r"_(\w)", lambda m: m.group(1).upper(), n) for n in names if n != "__self__"}
    assert provider_config_keys("kubernetes") == imported
    assert {"kubeconfig", "context", "namespace"} <= imported


def _through_adapter(stack: str, config: dict[str, str]) -> object:
    """The settings as `pulumi up` reads them (infra/config.py under the engine), or the refusal's text."""
    captured: list[object] = []
    try:
        run_under_mocks(lambda: captured.append(infra_config.load_stack_settings()), stack, config, PROJECT)
    except ConfigError as err:
        assert isinstance(err, pulumi.RunError), type(err)  # `pulumi up` prints it without a traceback
        return f"refused: {err}"
    return captured[0]


def _direct(stack: str, config: dict[str, str]) -> object:
    try:
        return load_stack_settings(config, stack=stack)
    except ConfigError as err:
        assert not isinstance(err, pulumi.RunError)
        return f"refused: {err}"


# Values a setting may arrive as: another key's valid default, a small number, a list, a boolean, free text.
VALUES = (
    st.sampled_from([config_string(k.default) for k in KEYS.values() if k.default not in (None, "", [])])
    | st.integers(min_value=-3, max_value=70_000).map(str)
    | st.lists(st.sampled_from(["us-central1", "europe-west4", "original", "10.0.0.0/8", "x"]), max_size=3).map(
        json.dumps
    )
    | st.sampled_from(["true", "false", "null", ""])
    | st.text(max_size=12)
)


@settings(max_examples=40, deadline=None)
@given(
    stack=st.sampled_from(["dev", "staging", "prod"]),
    changes=st.dictionaries(st.sampled_from(sorted(KEYS)), VALUES, max_size=3),
)
def test_the_pure_entry_and_the_pulumi_adapter_agree(stack: str, changes: dict[str, str]) -> None:
    config = stack_settings(stack) | {f"{PROJECT}:{key}": value for key, value in changes.items()}
    assert _direct(stack, config) == _through_adapter(stack, config)


def test_the_offline_entry_reads_the_stack_file_and_overrides() -> None:
    loaded = from_stack_file("dev", {f"{PROJECT}:locustWorkers": "7"})
    assert (loaded.stack, loaded.load_test.workers) == ("dev", 7)
    with pytest.raises(ConfigError, match=r"^triton-gke:locustWorkers: 0 is not valid; expected a number >= 1$"):
        from_stack_file("dev", {f"{PROJECT}:locustWorkers": "0"})
    with pytest.raises(FileNotFoundError, match="Pulumi.nosuch.yaml: no such stack file"):
        from_stack_file("nosuch")


def test_the_adapter_reads_the_keys_the_engine_passes_in_pulumi_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key in the bag the language host passes (PULUMI_CONFIG, pulumi-language-python main.go Run) counts as
    set, a misspelt one is refused, and a bag that is not a JSON object is refused in one line."""
    config = stack_settings("dev")
    config[f"{PROJECT}:locustWorkers"] = "5"
    assert _through_adapter("dev", config).load_test.workers == 5
    config.pop(f"{PROJECT}:locustWorkers")
    config[f"{PROJECT}:locustWorker"] = "5"
    assert _through_adapter("dev", config) == (
        f"refused: {PROJECT}:locustWorker: unknown setting; did you mean locustWorkers?"
    )

    def broken_bag() -> object:
        monkeypatch.setenv("PULUMI_CONFIG", "[1]")
        return infra_config.load_stack_settings()

    with pytest.raises(ConfigError, match="^PULUMI_CONFIG: expected a JSON object of namespace:key to value$"):
        run_under_mocks(broken_bag, "dev", stack_settings("dev"), PROJECT)
