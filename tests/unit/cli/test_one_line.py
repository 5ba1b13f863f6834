"""triton_gke/one_line.py, the argument parser every command shares: a bad option is one line and exit 2, no usage.

Generated bad command lines go to the shared parser in both of its modes (print and exit, raise for the command's
own handler); then each command's real `main` is given a bad option and must print exactly the line it always did.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from triton_gke.one_line import MAKE_TARGET_ENV, SEE_MAKE_HELP, OneLineParser

PROG = "make demo"
KNOWN = ("--stack", "--json", "--help")  # argparse takes any unambiguous prefix of these (allow_abbrev)
# An option that is none of KNOWN nor a prefix of one; no '=', which would give an abbreviation a value.
UNKNOWN_OPTION = (
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_"), min_size=1, max_size=12)
    .map(lambda name: f"--{name}")
    .filter(lambda option: not any(known.startswith(option) for known in KNOWN))
)
# A word that is no option: any text (line breaks included) not starting with '-'; the parser takes no positional.
STRAY_WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1).filter(
    lambda word: not word.startswith("-")
)
BAD_ARGV = st.one_of(
    st.tuples(UNKNOWN_OPTION).map(list),
    st.tuples(STRAY_WORD).map(list),
    st.just(["--stack"]),  # an option missing its value
    st.tuples(STRAY_WORD).map(lambda word: ["--stack", "dev", "--json", *word]),
)


class Refused(Exception):
    """What a command's own handler catches."""


def _parser(**options: Any) -> OneLineParser:
    parser = OneLineParser(prog=PROG, **options)
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--json", action="store_true")
    return parser


def _exit_and_stderr(run: Callable[[], object]) -> tuple[object, str]:
    """The exit code (SystemExit's, or the return value of a command's main) and what went to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = run()
        except SystemExit as done:
            code = done.code
    return code, err.getvalue()


def _assert_one_line(stderr: str) -> str:
    assert len(stderr.splitlines()) == 1 and stderr.endswith("\n"), repr(stderr)
    assert not stderr.startswith("usage:") and "Traceback" not in stderr, repr(stderr)  # no usage block
    return stderr.rstrip("\n")


@given(BAD_ARGV)
@example(["a\nb"])  # argparse quotes a stray word as typed: its line break must not split the error line
@example(["x\u2028y\r\n"])
@settings(max_examples=60, deadline=None)
def test_a_bad_command_line_is_one_line_naming_the_program_and_exit_2(argv: list[str]) -> None:
    code, stderr = _exit_and_stderr(lambda: _parser().parse_args(argv))
    line = _assert_one_line(stderr)
    assert code == 2 and line.startswith(f"error: {PROG}: ") and line.endswith(" (see --help)"), line


@given(BAD_ARGV)
@settings(max_examples=40, deadline=None)
def test_the_make_hint_names_the_target(argv: list[str]) -> None:
    code, stderr = _exit_and_stderr(lambda: _parser(hint=SEE_MAKE_HELP).parse_args(argv))
    line = _assert_one_line(stderr)
    assert code == 2 and line.startswith(f"error: {PROG}: ") and line.endswith(f" (see {PROG} ARGS=--help)"), line


@given(BAD_ARGV)
@example(["a\nb"])
@settings(max_examples=40, deadline=None)
def test_raise_mode_hands_one_line_to_the_command_and_prints_nothing(argv: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(Refused) as refused:
        _parser(hint="usage: {prog} [--stack S]", raise_as=Refused).parse_args(argv)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and message.endswith(f" (usage: {PROG} [--stack S])"), message
    assert err.getvalue() == ""


def test_a_good_command_line_and_help_still_work() -> None:
    assert _parser().parse_args(["--stack", "prod", "--json"]).stack == "prod"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        _parser().parse_args(["--help"])
    assert done.value.code == 0 and out.getvalue().startswith(f"usage: {PROG}")


def _main(module: str) -> Callable[[list[str]], object]:
    return importlib.import_module(module).main


SYNC_USAGE = (
    "usage: triton-gke sync LOCAL_DIR gs://BUCKET/PREFIX [--dry-run] [--allow-mass-delete] [--adopt] [--stage | --pin] "
    "[--hold NAME]"
)


@pytest.mark.parametrize(
    "module,argv,expected",
    [
        ("triton_gke.offline.plan", [], "error: triton-gke plan: unrecognized arguments: --bogus (see --help)"),
        (
            "triton_gke.offline.build_models",
            [],
            "error: triton-gke model-repo: unrecognized arguments: --bogus (see --help)",
        ),
        ("triton_gke.sandbox.run", [], "error: triton-gke sandbox: unrecognized arguments: --bogus (see --help)"),
        ("triton_gke.model_repo.__main__", ["--out", "unused"], "error: unrecognized arguments: --bogus"),
        (
            "triton_gke.model_repo.sync",
            ["unused", "gs://b/p"],
            f"error: unrecognized arguments: --bogus ({SYNC_USAGE})",
        ),
        ("triton_gke.bench.__main__", [], "error: unrecognized arguments: --bogus"),
        ("triton_gke.bench.reports.record", ["unused"], "error: unrecognized arguments: --bogus"),
        ("triton_gke.capacity.compare", ["unused", "unused"], "error: unrecognized arguments: --bogus"),
    ],
)
def test_each_command_refuses_a_bad_option_with_its_own_line(
    module: str, argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MAKE_TARGET_ENV, raising=False)  # run as the console script runs it, not under make
    code, stderr = _exit_and_stderr(lambda: _main(module)([*argv, "--bogus"]))
    assert code == 2 and _assert_one_line(stderr) == expected


@pytest.mark.parametrize(
    "module,target",
    [
        ("triton_gke.offline.plan", "plan"),
        ("triton_gke.offline.build_models", "model-repo"),
        ("triton_gke.sandbox.run", "sandbox"),
    ],
)
@pytest.mark.parametrize("inherited", ["test", "model-repo", "sandbox", "plan"])
def test_under_its_make_target_a_command_names_the_target(
    module: str, target: str, inherited: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make_args names the target it runs (offline/make_args.py); only that very target's command takes the make
    names, so the variable inherited by another program (`make test`'s pytest) changes nothing."""
    monkeypatch.setenv(MAKE_TARGET_ENV, inherited)
    code, stderr = _exit_and_stderr(lambda: _main(module)(["--bogus"]))
    # The make targets and the subcommands share their names: plan, model-repo, sandbox.
    prog, hint = (
        (f"make {target}", f"make {target} ARGS=--help") if inherited == target else (f"triton-gke {target}", "--help")
    )
    assert code == 2 and _assert_one_line(stderr) == f"error: {prog}: unrecognized arguments: --bogus (see {hint})"
