"""The ARGS of the make targets: `make plan ARGS='--set regions=["europe-west4"]'`.

    .venv/bin/python -m triton_gke.offline.make_args --target TARGET [--stack] [--prerequisite] PROGRAM [WORD...]

The Makefile runs every target that takes ARGS through this program, e.g. `--target plan --stack
.venv/bin/triton-gke plan`. The Makefile exports ARGS and STACK unexpanded (`$(value ...)`), so they reach this
program exactly as typed after the shell removed the outer quotes; it never lets a shell see them again. This
program splits ARGS into words and replaces itself (exec, same process: Ctrl-C reaches the program directly, and
the program's exit status is the recipe's) with `PROGRAM [WORD...] [--stack STACK] ARGS-WORDS...`, telling it the
make TARGET in TRITON_GKE_MAKE_TARGET (its messages then name `make TARGET`, triton_gke/one_line.py).

How ARGS is split (one rule for every target): at spaces, tabs and newlines; text in single quotes is one
word and kept literally; a backslash outside single quotes keeps the next character. Double quotes are ordinary
characters, so JSON needs no escaping: ARGS='--set regions=["europe-west4"]' gives the two words `--set` and
`regions=["europe-west4"]`, and ARGS="--set 'regions=[\"a\", \"b\"]'" a value with a space.

--prerequisite: MODULE builds something the make goal needs (the model repository before a plan, a sandbox or a
benchmark). It gets only the words of ARGS that choose settings (`--set KEY=VALUE`, `--config-file FILE`), so it
builds from the same settings the goal uses, and its output goes to stderr, so stdout stays the goal's
(`make plan ARGS=--json > plan.json` is pure JSON). A goal that takes no settings options (`make bench`: it
measures the stack file's settings) is refused them here, before anything is built; the Makefile exports its
goals as MAKE_ARGS_GOALS.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.one_line import MAKE_TARGET_ENV, join_args, model_repo_command, split_args

SETTINGS_OPTIONS = ("--set", "--config-file")
# make goals whose program has no settings options: given them, the rebuilt model repository and the run disagree.
NO_SETTINGS_GOALS = frozenset({"bench", "tune"})


def settings_options(words: Sequence[str]) -> list[str]:
    """Only the options that choose settings (`--set KEY=VALUE`, `--config-file FILE`, or `--opt=VALUE`), in order."""
    kept: list[str] = []
    rest = iter(words)
    for word in rest:
        if word in SETTINGS_OPTIONS:
            kept += [word, next(rest, "")]
        elif word.startswith(tuple(f"{option}=" for option in SETTINGS_OPTIONS)):
            kept.append(word)
    return kept


def refused_settings(settings_words: Sequence[str], goals: Sequence[str]) -> str | None:
    """The one-line error for settings options given to a goal that takes none; None when there is none to give."""
    goal = next((goal for goal in goals if goal in NO_SETTINGS_GOALS), None)
    if goal is None or not settings_words:
        return None
    option = settings_words[0].split("=", 1)[0]
    return (
        f"error: ARGS: {option}: make {goal} takes no settings options (--set, --config-file); it measures the "
        "stack file's settings: edit Pulumi.<STACK>.yaml or name another STACK"
    )


# The test targets select their phases with -m (Makefile); pytest keeps the last -m, so one in ARGS would replace it.
PHASED_TARGETS = ("test", "test-fast")
MARK_OPTIONS = ("-m", "--markexpr")  # pytest's spellings (--markexpr=EXPR, -mEXPR too)


def refused_marker(target: str, words: Sequence[str]) -> str | None:
    """The one-line error for a -m in ARGS of make test/test-fast (the red team: `make test ARGS='-m live'` ran the
    quiet tests beside the others, and every live test twice); None when there is none."""
    if target not in PHASED_TARGETS:
        return None
    for word in words:
        if word in MARK_OPTIONS or word.startswith("--markexpr=") or (word.startswith("-m") and word[:2] != "--"):
            return (
                f"error: ARGS: {word[:40]}: make {target} selects its own tests with -m (its phases); select with "
                "-k EXPRESSION or test paths, or run .venv/bin/python -m pytest -m ... yourself"
            )
    return None


def make_command(target: str, stack: str, words: Sequence[str]) -> str:
    """A `make` command line that, pasted into a POSIX shell, runs `target` of `stack` with exactly `words`."""
    command = ["make", target, f"STACK={shlex.quote(stack)}"]
    if words:
        command.append(f"ARGS={shlex.quote(join_args(words))}")
    return " ".join(command)


def settings_words(set_pairs: Sequence[str], config_file: object | None = None) -> list[str]:
    """The command-line words for these `--set` pairs and config file."""
    words = [word for pair in set_pairs for word in ("--set", pair)]
    return words + (["--config-file", str(config_file)] if config_file else [])


def model_repo_hint(stack: str, words: Sequence[str]) -> str:
    """The command that builds the model repository from these settings options (for a 'rebuild' hint): a make
    target where make runs, else the console script (triton_gke/one_line.py model_repo_command)."""
    return model_repo_command(stack, words)


def with_model_repo_args(message: str, stack: str, words: Sequence[str]) -> str:
    """`message` with its model-repo hint (`make model-repo STACK=...`) extended by the caller's settings options.

    Run directly, `triton-gke plan --set ...` plans with overrides the hint must repeat, or the pasted command
    would build the repository the plan just refused again.
    """
    if not words:
        return message
    return message.replace(f"`{model_repo_hint(stack, ())}`", f"`{model_repo_hint(stack, words)}`")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triton_gke.offline.make_args", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    parser.add_argument("--target", required=True, help="the make target that runs PROGRAM ($@)")
    parser.add_argument("--stack", action="store_true", help="pass --stack $STACK (default dev) before ARGS")
    parser.add_argument(
        "--prerequisite", action="store_true", help="only the settings options of ARGS; output on stderr"
    )
    # REMAINDER: the program's own words may start with '-' (`.venv/bin/python -m pytest`).
    parser.add_argument("command", nargs=argparse.REMAINDER, help="PROGRAM [WORD...]: what to run, ARGS after it")
    return parser


def launch(target: str, command: list[str]) -> NoReturn:
    """Echo the command as a user would type it (the program's name, not its path) and exec it, naming TARGET."""
    print(shlex.join([Path(command[0]).name, *command[1:]]), file=sys.stderr, flush=True)
    os.execve(command[0], command, os.environ | {MAKE_TARGET_ENV: target})


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    if not opts.command:
        print("error: make_args: name the program to run after the options", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = os.environ.get("ARGS", "")
    try:
        words = split_args(text)
    except ValueError as err:
        print(f"error: ARGS: {str(err).lower()} in {text!r}; quote a word with spaces as 'WORD'", file=sys.stderr)
        return EXIT_BAD_INPUT
    marker = refused_marker(opts.target, words)
    if marker:
        print(marker, file=sys.stderr)
        return EXIT_BAD_INPUT
    if opts.prerequisite:
        words = settings_options(words)
        refused = refused_settings(words, os.environ.get("MAKE_ARGS_GOALS", "").split())
        if refused:
            print(refused, file=sys.stderr)
            return EXIT_BAD_INPUT
    if opts.stack:
        stack = os.environ.get("STACK", "dev")
        if not stack.strip():
            print("error: STACK is empty; name a stack file Pulumi.<STACK>.yaml, e.g. STACK=dev", file=sys.stderr)
            return EXIT_BAD_INPUT
        words = ["--stack", stack, *words]
    if opts.prerequisite:
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    launch(opts.target, [*opts.command, *words])


if __name__ == "__main__":
    sys.exit(main())
