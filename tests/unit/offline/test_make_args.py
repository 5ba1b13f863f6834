"""offline.make_args: the environment -> the program's argv; what a user types after ARGS= reaches the program as
the words they meant. tests/live/offline/test_make_args.py runs real GNU make on the real Makefile."""

from __future__ import annotations

import shlex
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triton_gke.offline import make_args
from triton_gke.offline.make_args import (
    join_args,
    make_command,
    model_repo_hint,
    settings_options,
    settings_words,
    split_args,
    with_model_repo_args,
)
from triton_gke.one_line import MAKE_TARGET_ENV

# Characters a shell, make or JSON treats specially, plus ordinary ones; NUL cannot be in an environment variable.
TRICKY = st.sampled_from(list(" \t\n'\"\\$`#;&|<>()[]{}*?~=,:%-_.") + ["é", "\u2028"])


WORD = st.text(st.one_of(TRICKY, st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")), max_size=12)


TRITON_GKE = ".venv/bin/triton-gke"


# What the Makefile hands make_args for each target: its options, then the program and its first words.
TARGETS_WITH_ARGS = {
    "plan": ["--target", "plan", "--stack", TRITON_GKE, "plan"],
    "sandbox": ["--target", "sandbox", "--stack", TRITON_GKE, "sandbox"],
    "bench": ["--target", "bench", "--stack", TRITON_GKE, "bench"],
    "model-repo": ["--target", "model-repo", "--stack", TRITON_GKE, "model-repo"],
    "capacity-compare": ["--target", "capacity-compare", TRITON_GKE, "capacity", "compare"],
    # test's last recipe line, the quiet live tests (the one before runs all the others on workers; both get ARGS)
    "test": ["--target", "test", "{PY}", "-m", "pytest", "-m", "live and quiet"],
}


@given(st.lists(WORD, max_size=6))
@settings(max_examples=60, deadline=None)
def test_join_then_split_gives_the_same_words(words: list[str]) -> None:
    assert split_args(join_args(words)) == words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # The README's example: double quotes are JSON, not shell quoting.
        ('--set regions=["europe-west4"]', ["--set", 'regions=["europe-west4"]']),
        ('--set \'regions=["a", "b"]\'', ["--set", 'regions=["a", "b"]']),
        ("--duration 60   --users 8", ["--duration", "60", "--users", "8"]),
        ("-k 'readme and not slow'", ["-k", "readme and not slow"]),
        ("--set domain=a#b", ["--set", "domain=a#b"]),  # '#' is no comment
        ("--set x=it\\'s", ["--set", "x=it's"]),
        ("--set x=''", ["--set", "x="]),
        ("", []),
    ],
)
def test_documented_splitting(text: str, words: list[str]) -> None:
    assert split_args(text) == words


def _launch(monkeypatch: pytest.MonkeyPatch, argv: list[str], **env: str) -> list[str]:
    """main()'s exec'd command line, captured instead of replacing the test process; it must be told the target."""
    for key in ("ARGS", "STACK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    launched: list[list[str]] = []

    def fake_execve(path: str, command: list[str], environment: dict[str, str]) -> None:
        assert path == command[0] and environment[MAKE_TARGET_ENV] == argv[argv.index("--target") + 1]
        launched.append(command)
        raise SystemExit(0)

    monkeypatch.setattr(make_args.os, "execve", fake_execve)
    monkeypatch.setattr(make_args.os, "dup2", lambda *_: None)
    with pytest.raises(SystemExit):
        make_args.main(argv)
    return launched[0]


@given(words=st.lists(WORD, max_size=5), stack=st.sampled_from(["dev", "prod", "my stack"]))
@settings(max_examples=40, deadline=None)
def test_the_program_gets_exactly_the_words(words: list[str], stack: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        launched = _launch(monkeypatch, TARGETS_WITH_ARGS["plan"], ARGS=join_args(words), STACK=stack)
    assert launched == [TRITON_GKE, "plan", "--stack", stack, *words]


def test_a_program_without_stack_gets_the_words_after_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    launched = _launch(monkeypatch, TARGETS_WITH_ARGS["capacity-compare"], ARGS="'a b' c --max-regression-percent 5")
    assert launched == [TRITON_GKE, "capacity", "compare", "a b", "c", "--max-regression-percent", "5"]
    # The program's own words may start with '-': they are its words, not make_args' options.
    launched = _launch(
        monkeypatch, ["--target", "test", sys.executable, "-m", "pytest"], ARGS="-k 'readme and not slow'"
    )
    assert launched == [sys.executable, "-m", "pytest", "-k", "readme and not slow"]


def test_a_prerequisite_gets_only_the_settings_options(monkeypatch: pytest.MonkeyPatch) -> None:
    text = '--json --set modelMaxBatchSize=32 --out x --set=regions=["us-east4"] --users 8 --config-file f.yaml'
    launched = _launch(
        monkeypatch, ["--target", "model-repo", "--stack", "--prerequisite", TRITON_GKE, "model-repo"], ARGS=text
    )
    assert launched == [
        TRITON_GKE,
        "model-repo",
        "--stack",
        "dev",
        "--set",
        "modelMaxBatchSize=32",
        '--set=regions=["us-east4"]',
        "--config-file",
        "f.yaml",
    ]


OPTION_WORDS = ["--json", "--set", "--set=a=1", "--config-file", "--config-file=f", "x=1", "--out", "--users", "8"]


@given(st.lists(st.sampled_from(OPTION_WORDS), max_size=8))
@settings(max_examples=40, deadline=None)
def test_settings_options_keeps_settings_in_order(words: list[str]) -> None:
    kept = settings_options(words)
    expected: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in ("--set", "--config-file"):
            expected += [words[i], words[i + 1] if i + 1 < len(words) else ""]
            i += 2
            continue
        if words[i].startswith(("--set=", "--config-file=")):
            expected.append(words[i])
        i += 1
    assert kept == expected


@given(st.lists(st.builds(lambda k, v: f"{k}={v}", WORD, WORD), min_size=1, max_size=3))
@settings(max_examples=40, deadline=None)
def test_the_rebuild_hint_pastes_into_a_shell_as_the_same_overrides(pairs: list[str]) -> None:
    hint = model_repo_hint("dev", settings_words(pairs))
    # What a POSIX shell makes of the pasted line (shlex implements sh's quoting).
    argv = shlex.split(hint)
    assert argv[:3] == ["make", "model-repo", "STACK=dev"]
    assert argv[3].startswith("ARGS=")
    assert split_args(argv[3].removeprefix("ARGS=")) == [w for p in pairs for w in ("--set", p)]


def test_the_plan_error_carries_the_overrides_into_the_hint() -> None:
    message = "build/model_repository: built from other model settings; run `make model-repo STACK=dev` first"
    extended = with_model_repo_args(message, "dev", settings_words(["modelMaxBatchSize=32"]))
    assert extended.endswith("run `make model-repo STACK=dev ARGS='--set modelMaxBatchSize=32'` first")
    with_file = with_model_repo_args(message, "dev", settings_words([], "my stack.yaml")).split("`")[1]
    assert split_args(shlex.split(with_file)[3].removeprefix("ARGS=")) == ["--config-file", "my stack.yaml"]
    assert with_model_repo_args(message, "dev", []) == message
    assert make_command("plan", "dev", []) == "make plan STACK=dev"


MARK_WORDS = st.sampled_from(["-m", "--markexpr", "--markexpr=live", "-mlive", "-m=live"])
OTHER_WORDS = st.sampled_from(["-k", "lifecycle", "tests/unit", "-x", "--maxfail=1", "--markers", "-q", "-n", "0"])


@given(before=st.lists(OTHER_WORDS, max_size=4), mark=MARK_WORDS, after=st.lists(OTHER_WORDS, max_size=4))
@settings(max_examples=100, deadline=None)
def test_a_marker_selection_in_args_of_the_test_targets_is_refused_naming_it(
    before: list[str], mark: str, after: list[str]
) -> None:
    """pytest keeps the last -m: one in ARGS would replace the phase's own (the red team: `make test ARGS='-m live'`
    ran the quiet tests beside the others and each live test twice)."""
    for target in make_args.PHASED_TARGETS:
        refused = make_args.refused_marker(target, [*before, mark, *after])
        assert refused and refused.startswith(f"error: ARGS: {mark}: make {target} selects its own tests with -m")
        assert "\n" not in refused
        assert make_args.refused_marker(target, [*before, *after]) is None  # -k, paths, --markers, --maxfail pass
    assert make_args.refused_marker("plan", [*before, mark, *after]) is None  # only the test targets select phases
