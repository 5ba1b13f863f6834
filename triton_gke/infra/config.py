"""Stack configuration under Pulumi: the one module that reads Pulumi's config.

It hands the settings layer (settings/, no Pulumi there) the config the engine passed this program, the keys set
as secrets and the stack's name, and raises the layer's ConfigError again as a pulumi.RunError, which `pulumi up`
prints as its one line without a traceback (RunError means "a clean exit rather than the usual verbose unhandled
error logic which emits the source program text and complete stack trace",
https://www.pulumi.com/docs/reference/pkg/nodejs/pulumi/pulumi/classes/RunError.html; the Python SDK's RunError is
the same contract). Everything is checked before any resource is declared.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator, Mapping

import pulumi

from triton_gke import settings
from triton_gke.settings.values import StackSettings

# Whether the offline runtime (offline/runtime.py: Pulumi's mock engine, for `make plan` and the tests) runs this
# program. Only there may TRITON_GKE_TODAY move the day the version check judges (settings/versions.py); under a real
# engine the check judges the real date, so no environment variable turns it off for a deployment.
_RUNTIME = {"offline": False}


def mark_offline_runtime() -> None:
    """Called by offline/runtime.py before it runs a program under mocks."""
    _RUNTIME["offline"] = True


class ConfigError(settings.ConfigError, pulumi.RunError):
    """A settings ConfigError as Pulumi's RunError: one line naming the key, no traceback under `pulumi up`."""


class RuntimeConfig(Mapping[str, str]):
    """The config the engine handed this program: every key set ('namespace:name') -> its text.

    Keys: the PULUMI_CONFIG bag, through the public pulumi.runtime.get_config_env(). The python language host puts
    the stack's whole config there before it starts the program (pulumi/pulumi sdk/python/cmd/
    pulumi-language-python/main.go, Run: `PULUMI_CONFIG=<json>`, at 1b5949891b3cefcb9974752b24a5ecef0acc86c8), so
    it names every key set, whether from the stack file, `--config` or an ESC environment. Values as pulumi.Config
    reads them (pulumi.runtime.get_config; JSON values given as JSON).
    """

    def __init__(self) -> None:
        self._keys = _set_keys()

    def __getitem__(self, key: str) -> str:
        value = pulumi.runtime.get_config(key)
        if value is None:
            raise KeyError(key)
        return value if isinstance(value, str) else json.dumps(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def _set_keys() -> set[str]:
    try:
        from_env = pulumi.runtime.get_config_env()
    except ValueError:  # PULUMI_CONFIG is a JSON object of full key -> value
        raise ConfigError("PULUMI_CONFIG: not valid JSON; expected an object of namespace:key to value") from None
    if not isinstance(from_env, dict):
        raise ConfigError("PULUMI_CONFIG: expected a JSON object of namespace:key to value")
    return set(from_env)


def _secret_keys(keys: Mapping[str, str]) -> frozenset[str]:
    """The keys set with --secret: the engine's list (pulumi.runtime's secret keys, also PULUMI_CONFIG_SECRET_KEYS)."""
    marked = {key for key in keys if pulumi.runtime.is_config_secret(key)}
    return frozenset(marked | set(pulumi.runtime.get_config_secret_keys_env()))


def load_stack_settings(today: datetime.date | None = None) -> StackSettings:
    """The running stack's validated settings; raises ConfigError (a pulumi.RunError) on the first problem.

    today: the day kubernetesVersion's end of standard support is judged on; None is the real date, so every
    `pulumi up` and `pulumi preview` judges the version on the day it runs. Only under the offline mock runtime
    (`make plan`, the tests) may TRITON_GKE_TODAY name another day (settings/versions.py): under a real engine it is
    ignored, so no environment variable turns the check off for a deployment. Its warnings (a version near or past
    its end of support) go to pulumi.log.warn, which the engine shows at every preview and update
    ("displayed, alongside all other Pulumi output, in the CLI", https://www.pulumi.com/docs/iac/concepts/logging/).
    """
    config = RuntimeConfig()
    if today is None and not _RUNTIME["offline"]:
        today = datetime.date.today()
    try:
        loaded = settings.load_stack_settings(
            config, stack=pulumi.get_stack(), secret_keys=_secret_keys(config), today=today
        )
    except ConfigError:
        raise
    except settings.ConfigError as err:
        raise ConfigError(str(err)) from None
    for warning in loaded.warnings:
        pulumi.log.warn(warning)
    return loaded
