"""Typed reading of the project's keys from the config mapping, with one-line errors naming the key."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from triton_gke.settings.errors import ConfigError
from triton_gke.settings.schema import Key


class Reader:
    """Typed access to the project's config keys, with one-line errors naming the key."""

    def __init__(self, project: str, keys: dict[str, Key], config: Mapping[str, str]) -> None:
        self.project = project
        self.keys = keys
        # Full key ('namespace:name') -> value as the engine passes it: text, lists and maps as JSON.
        self.config = config

    def full(self, key: str) -> str:
        return f"{self.project}:{key}"

    def fail(self, key: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{self.full(key)}: {show(value)} is not valid; {allowed}")

    def raw(self, key: str) -> Any:
        spec = self.keys[key]
        text = self.config.get(self.full(key))
        if text is None:
            return spec.default
        if not isinstance(text, str):  # PULUMI_CONFIG (a JSON bag) may carry JSON values; the engine sends text
            text = json.dumps(text)
        if len(text) > MAX_VALUE_CHARS:
            raise self.fail(key, text, f"longer than {MAX_VALUE_CHARS:,} characters")
        if spec.type == "string":
            if text == "null":
                # What `pulumi up` passes for an empty value (`key:` or `~`) in a stack file (Pulumi's
                # sdk/go/common/resource/config/object.go marshals a nil value as JSON null); no setting means it.
                raise self.fail(key, text, "an empty value in the stack file; remove the line or quote the text")
            return text
        try:
            # NaN and Infinity are not JSON (Python's json takes them); a 4,300-digit number is a ValueError too.
            return json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise self.fail(key, text, f"expected {_a(spec.type)}") from None

    def string(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self.fail(key, value, "expected a string")
        return clean_text(self, key, value.strip())

    def path(self, key: str) -> str:
        """A file path, relative to the project: text the file system can take (a longer name is an OSError)."""
        value = self.string(key)
        parts = Path(value).parts
        if len(os.fsencode(value)) > PATH_MAX or any(len(os.fsencode(part)) > NAME_MAX for part in parts):
            raise self.fail(key, value, f"a path of at most {PATH_MAX} bytes, {NAME_MAX} per file or folder name")
        return value

    def integer(
        self, key: str, minimum: int = 0, maximum: int | None = None, why: str = "", too_large: str = ""
    ) -> int:
        """A whole number >= `minimum` and, given `maximum`, <= `maximum`.

        Above the maximum the error says `too_large`, or else "expected a number from MIN to MAX (why)", where
        `why` names the limit and so its source.
        """
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, value, "expected a whole number")
        if value < minimum:
            raise self.fail(key, value, f"expected a number >= {minimum}")
        if maximum is not None and value > maximum:
            limit = f" ({why})" if why else ""
            raise self.fail(key, value, too_large or f"expected a number from {minimum} to {maximum:,}{limit}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self.fail(key, value, "expected true or false")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, value, "expected a list of strings")
        return tuple(clean_text(self, key, v.strip()) for v in value)

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        value = self.string(key)
        if value not in allowed:
            raise self.fail(key, value, f"allowed: {', '.join(allowed)}")
        return value


# Longest value a setting may hold: far above any real one (a CIDR list of a few hundred ranges).
MAX_VALUE_CHARS = 64 * 1024
SHOWN_CHARS = 200
# C0 and C1 control characters and Unicode's line and paragraph separators (YAML reads those as line breaks too).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Linux limits (limits.h): a longer path or name is ENAMETOOLONG, an OSError, when the file is looked at.
PATH_MAX = 4096
NAME_MAX = 255


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def clean_text(reader: Reader, key: str, value: str) -> str:
    """Text without control characters: no setting holds a newline, tab or NUL (a NUL even breaks file paths)."""
    if CONTROL.search(value):
        raise reader.fail(key, value, "control characters (newline, tab, NUL...) are not allowed")
    return value


def show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


def _a(type_name: str) -> str:
    return {"array": "a list (JSON array)", "integer": "a whole number", "boolean": "true or false"}.get(
        type_name, type_name
    )
