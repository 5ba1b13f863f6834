"""argparse whose bad option is ONE line on stderr and exit 2, like every other bad input of this project.

argparse's own `error()` prints the whole usage block before the message
(https://docs.python.org/3/library/argparse.html#argparse.ArgumentParser.error); overriding `error()` is the
documented way to change that. `exit_on_error=False` is no substitute: on Python 3.11 an unrecognized argument
still exits through `error()` (https://github.com/python/cpython/issues/121018, fixed in 3.12 and 3.13 only).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

# argparse's own exit status for a bad command line (the link above); the project's exit code for bad input.
EXIT_USAGE = 2
SEE_HELP = "see --help"
# A `make` target takes its options through ARGS (Makefile): `make plan ARGS=--help`.
SEE_MAKE_HELP = "see {prog} ARGS=--help"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line: printed and exit 2, or raised for the caller's own handler.

    hint: text in parentheses after the message ("{prog}" becomes the program name), None for none.
    raise_as: raise this exception with the message (and hint) instead of printing; the command's own
    `except` then prints it the way it prints its other errors, and exits 2 there.
    """

    def __init__(
        self,
        *args: Any,
        hint: str | None = SEE_HELP,
        raise_as: Callable[[str], Exception] | None = None,
        **kwargs: Any,
    ) -> None:
        # No prefix matching: with it `--set` was read as `--settle-seconds` by a parser without --set, and a new
        # option could change what an old abbreviation means (allow_abbrev,
        # https://docs.python.org/3/library/argparse.html#allow-abbrev). Options are spelled out in full.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.hint = hint
        self.raise_as = raise_as

    def error(self, message: str) -> NoReturn:
        # argparse quotes stray arguments as typed; one holding a line break must not split the error line.
        text = " ".join(message.splitlines())
        if self.hint is not None:
            text = f"{text} ({self.hint.format(prog=self.prog)})"
        if self.raise_as is not None:
            raise self.raise_as(text)
        self.exit(EXIT_USAGE, f"error: {self.prog}: {text}\n")


def file_path(text: str) -> Path:
    """An argparse `type` for a file option: an empty word is refused as "empty path" (Path('') is '.', a folder)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path; name a file")
    return Path(text)
