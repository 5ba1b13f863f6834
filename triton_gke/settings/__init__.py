"""The settings layer: Pulumi.yaml's schema, the stack file, every domain rule; no Pulumi import anywhere in it.

One entry, `load_stack_settings(config, stack=..., secret_keys=...)`, turns a config mapping into typed, frozen
StackSettings or one ConfigError line. docs/architecture.md says who calls it and where each setting acts.
"""

from triton_gke.settings.errors import ConfigError
from triton_gke.settings.stack import from_stack_file, load_stack_settings, stack_config
from triton_gke.settings.values import StackSettings

__all__ = ["ConfigError", "StackSettings", "from_stack_file", "load_stack_settings", "stack_config"]
