"""cli.main in-process: generated unknown subcommands and options are one line and exit 2."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from triton_gke.cli import main as cli

# ------------------------------------------------------------------ generated bad command lines
# Any text (line breaks, control and non-ASCII characters included) that names no subcommand.
UNKNOWN_WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1).filter(
    lambda word: word not in cli.COMMANDS and word not in ("-h", "--help", "--version")
)


def _run_in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@given(word=UNKNOWN_WORD, rest=st.lists(st.text(max_size=8), max_size=3))
@example(word="plan\nsandbox", rest=[])
@example(word="--stack", rest=["dev"])
@example(word="x\u2028y\r", rest=[])
@settings(max_examples=80, deadline=None)
def test_an_unknown_subcommand_or_option_is_one_line_exit_2(word: str, rest: list[str]) -> None:
    code, out, err = _run_in_process([word, *rest])  # nothing is imported or run: only the dispatcher answers
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.endswith(" (see triton-gke --help)\n"), repr(err)


def test_version_prints_the_installed_distributions_and_takes_no_more_words() -> None:
    import importlib.metadata

    code, out, err = _run_in_process(["--version"])
    assert (code, out, err) == (0, f"triton-gke {importlib.metadata.version('triton-gke')}\n", "")
    code, out, err = _run_in_process(["--version", "plan"])
    assert code == 2 and out == "" and len(err.splitlines()) == 1


@given(parent=st.sampled_from([n for n, c in cli.COMMANDS.items() if c.children]), word=UNKNOWN_WORD)
@settings(max_examples=40, deadline=None)
def test_an_unknown_nested_subcommand_is_one_line_exit_2(parent: str, word: str) -> None:
    if word.startswith("-") or word in cli.COMMANDS[parent].children:
        return  # an option goes to the parent's own parser (checked above with --no-such-option)
    code, out, err = _run_in_process([parent, word])
    assert code == 2 and out == "" and len(err.splitlines()) == 1, repr(err)
    assert err.startswith(f"error: triton-gke {parent}: unknown subcommand ")


def test_a_missing_module_past_the_check_names_its_extra(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """A command without an extra of its own that still imports one (a module's import inside main)."""

    def missing(name: str) -> None:
        raise ModuleNotFoundError(f"No module named {name!r}", name="psutil")

    monkeypatch.setattr(cli.importlib, "import_module", missing)
    assert cli.main(["plan-diff", "a", "b"]) == 2
    assert capsys.readouterr().err == (
        "error: triton-gke plan-diff needs the 'local' extra: reinstall triton-gke from its wheel or checkout with "
        "[local] (in a checkout: pip install '.[local]')\n"
    )


def test_short_commands_collect_garbage_less_often_than_python_s_default() -> None:
    """Full collections over pulumi_gcp's objects cost a plan ~40 % of its CPU (cli/main.py GC_THRESHOLDS)."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's default
    try:
        code, _, _ = _run_in_process(["--help"])
        assert code == 0
        assert gc.get_threshold() == cli.GC_THRESHOLDS
        assert cli.GC_THRESHOLDS[0] >= 100 * 700
        gc.set_threshold(700, 10, 10)
        with contextlib.suppress(SystemExit):  # the subcommand's own --help exits through argparse
            _run_in_process(["sandbox", "--help"])  # minutes long: the defaults, so cyclic garbage cannot pile up
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
