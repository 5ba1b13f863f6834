"""argparse whose bad option is ONE line on stderr and exit 2, like every other bad input of this project.

argparse's own `error()` prints the whole usage block before the message
(https://docs.python.org/3/library/argparse.html#argparse.ArgumentParser.error); overriding `error()` is the
documented way to change that. `exit_on_error=False` is no substitute: on Python 3.11 an unrecognized argument
still exits through `error()` (https://github.com/python/cpython/issues/121018, fixed in 3.12 and 3.13 only).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import in_checkout

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


_ARGS_SPECIAL = frozenset(" \t\r\n'\\")


def make_runs_here() -> bool:
    """Whether a hint may name a `make` target: make runs this command, or the current folder is this repository's
    checkout (its Makefile has the targets). Installed from the wheel, neither: a hint names the console script."""
    if os.environ.get(MAKE_TARGET_ENV):
        return True
    return in_checkout()


# make's ARGS both ways, in one place: split_args reads what the Makefile passes (offline/make_args.py), join_args
# writes what a hint tells the user to type; split_args(join_args(words)) == words (tests/unit/offline/test_make_args).
def split_args(text: str) -> list[str]:
    """ARGS as words; ValueError (shlex's message) for an unclosed quote or a trailing backslash."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # '#' is an ordinary character: a value may contain one
    lexer.quotes = "'"  # double quotes stay literal (JSON)
    lexer.escapedquotes = ""  # inside single quotes nothing is special
    return list(lexer)


def join_args(words: Iterable[str]) -> str:
    """The text of make's ARGS that split_args turns back into exactly `words`."""
    return " ".join(_quote_arg(word) for word in words)


def _quote_arg(word: str) -> str:
    if word and not _ARGS_SPECIAL.intersection(word):
        return word
    # A single quote cannot appear inside single quotes: close, add it escaped, reopen (as in POSIX sh).
    return "'" + word.replace("'", "'\\''") + "'"


def hint_command(make: str, console: str) -> str:
    """The command a hint names: the make target where make runs (make_runs_here), else the console script's."""
    return make if make_runs_here() else console


def model_repo_command(stack: str | None = None, words: Sequence[str] = ()) -> str:
    """The command that builds a stack's model repository with these settings options, to paste into a shell:
    `make model-repo STACK=dev ARGS=...` where make runs (make_runs_here), else `triton-gke model-repo --stack dev`."""
    if not make_runs_here():
        return shlex.join([CONSOLE_SCRIPT, "model-repo", *(["--stack", stack] if stack else []), *words])
    command = ["make", "model-repo", *([f"STACK={shlex.quote(stack)}"] if stack else [])]
    return " ".join(command + ([f"ARGS={shlex.quote(join_args(words))}"] if words else []))


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
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {text}\n")


def file_path(text: str) -> Path:
    """An argparse `type` for a file option: an empty word is refused as "empty path" (Path('') is '.', a folder)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path; name a file")
    return Path(text)


def folder_path(text: str) -> Path:
    """An argparse `type` for a folder option: an empty word is refused (Path('') would be the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path; name a folder")
    return Path(text)
