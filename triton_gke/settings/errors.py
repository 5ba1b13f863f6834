"""The one error of the settings layer: a bad setting, in one line naming the key (or file) and what is allowed.

A plain Exception, so the model build, sandbox, bench and plan catch it without Pulumi; under `pulumi up` the
adapter (infra/config.py) raises it again as a pulumi.RunError, which the engine prints without a traceback.
"""

from __future__ import annotations


class ConfigError(Exception):
    """One line naming the key, the bad value and what is allowed."""
