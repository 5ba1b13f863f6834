"""The settings layer: Pulumi.yaml's schema, the stack file, every domain rule; no Pulumi import anywhere in it.

One entry, `load_stack_settings(config, stack=..., secret_keys=...)`, turns a config mapping into typed, frozen
StackSettings or one ConfigError line. docs/architecture.md says who calls it and where each setting acts.
"""

from triton_gke.one_name import one_name

one_name(__name__)  # imported as `settings` (the checkout's link), this is triton_gke.settings itself

# Below the call on purpose (E402): under the alias the module is already the canonical one.
from triton_gke.settings.errors import ConfigError  # noqa: E402
from triton_gke.settings.stack import from_stack_file, load_stack_settings, stack_config  # noqa: E402
from triton_gke.settings.values import StackSettings  # noqa: E402

__all__ = ["ConfigError", "StackSettings", "from_stack_file", "load_stack_settings", "stack_config"]
