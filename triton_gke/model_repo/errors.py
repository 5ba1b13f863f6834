"""The one error type the model repository builder raises for bad input."""

from __future__ import annotations

from functools import partial
from typing import Any


class ModelRepoError(ValueError):
    """Bad settings or model input; str() is one line naming the key or file.

    A ModelRepoSettings rule says which field it judged as data: `field` (a ModelRepoSettings field name, e.g.
    "triton_image_tag") and `reason` (the line without the field), so the settings layer names its own stack key
    (settings/serving.py MODEL_FIELD_KEYS) and a component its own argument without reading the text.
    `subject` is what the line starts with when it is not the field itself (e.g. "variant 'trt_int8'").
    Errors of files and commands (build, sync, the CLI's options) give the whole line alone: field is then None.
    """

    def __init__(self, reason: str, *, field: str | None = None, subject: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.subject = subject
        prefix = subject or field
        super().__init__(f"{prefix}: {reason}" if prefix else reason)

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or pickled with its data: the default would rebuild it from the message alone, without the field.
        return (partial(type(self), field=self.field, subject=self.subject), (self.reason,))
