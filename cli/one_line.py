"""argparse whose bad option is ONE line on stderr and exit 2, like every other bad input of this project.

argparse's own `error()` prints the whole usage block before the message
(https://docs.python.org/3/library/argparse.html#argparse.ArgumentParser.error); overriding `error()` is the
documented way to change that. `exit_on_error=False` is no substitute: on Python 3.11 an unrecognized argument
still exits through `error()` (https://github.com/python/cpython/issues/121018, fixed in 3.12 and 3.13 only).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

# argparse's own exit status for a bad command line (the link above); the project's exit code for bad input.
EXIT_USAGE = 2
SEE_HELP = "see --help"
# A `make` target takes its options through ARGS (Makefile): `make plan ARGS=--help`.
SEE_MAKE_HELP = "see {prog} ARGS=--help"
# The console script every command runs under (pyproject.toml [project.scripts], cli/main.py).
CONSOLE_SCRIPT = "triton-gke"
# offline/make_args.py sets this to the make target it runs a command for (`plan`), in that command's environment
# only. A command make runs then names itself as the user typed it: `make plan`, options through ARGS.
MAKE_TARGET_ENV = "TRITON_GKE_MAKE_TARGET"


def invoked_as(subcommand: str, make_target: str) -> dict[str, str]:
    """prog and hint of a command a make target runs: `make TARGET` under that target, else `triton-gke SUBCOMMAND`.

    The value must name this very target, so a variable inherited by some other program (`make test` runs pytest
    under target `test`) changes nothing there.
    """
    if os.environ.get(MAKE_TARGET_ENV) == make_target:
        return {"prog": f"make {make_target}", "hint": SEE_MAKE_HELP}
    return {"prog": f"{CONSOLE_SCRIPT} {subcommand}", "hint": SEE_HELP}


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
