"""tests/data/cli_flags.json was recorded by hand from Google's and Kubernetes' reference pages; where the real gcloud
and kubectl are installed (this machine has both: the red team of issue 48 found them), each recorded flag is asked of
the command's own --help, a check that does not share the recorder's reading of the pages. Skipped, saying so, where
the tool is absent (CI's machine need not have it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.support.checkout import PROJECT_DIR

RECORDED = json.loads((PROJECT_DIR / "tests" / "data" / "cli_flags.json").read_text(encoding="utf-8"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
IMPLIED = {"--help", "-h"}  # every command takes them; kubectl's --help does not list itself


def help_flags(command: list[str]) -> set[str]:
    """Every --flag (and --no-flag for --[no-]flag) and -x the command's --help text names (`kubectl options` is
    itself the list: asked as it is)."""
    argv = command if command == ["kubectl", "options"] else [*command, "--help"]
    text = ANSI.sub("", subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout)
    found = {f"--{m.group(2)}" for m in re.finditer(r"--(\[no-\])?([a-z0-9][a-z0-9-]*)", text)}
    found |= {f"--no-{m.group(1)}" for m in re.finditer(r"--\[no-\]([a-z0-9][a-z0-9-]*)", text)}
    return found | set(re.findall(r"(?<![\w-])(-[a-zA-Z])\b", text))


@pytest.mark.parametrize("name", sorted(RECORDED["commands"]))
def test_every_recorded_flag_is_one_the_installed_command_lists(name: str) -> None:
    words = name.split()
    if shutil.which(words[0]) is None:
        pytest.skip(f"{words[0]} is not installed here: the recorded flags stand on their reference page only")
    recorded = set(RECORDED["commands"][name]["flags"]) - IMPLIED
    missing = recorded - help_flags(words)
    assert not missing, f"{name}: recorded but not in its --help: {sorted(missing)}"


@pytest.mark.parametrize(
    ("table", "command"),
    # gcloud's wide flags as the page they were recorded from lists them (its GCLOUD WIDE FLAGS section); kubectl's
    # global options as `kubectl options` lists them ("a list of global command-line options", port-forward's help).
    [("gcloud_wide", ["gcloud", "compute", "project-info", "describe"]), ("kubectl_global", ["kubectl", "options"])],
)
def test_the_flags_every_command_takes_are_the_tools_own(table: str, command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed here: the recorded flags stand on their reference page only")
    missing = set(RECORDED[table]["flags"]) - IMPLIED - help_flags(command)
    assert not missing, sorted(missing)
