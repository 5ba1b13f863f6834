"""A stack name is a plain Pulumi stack name before it becomes a path, and the plan deletes only files it listed.

What an independent tester found: `make plan STACK=../../../v ARGS='--config-file Pulumi.dev.yaml'` deleted
`*/*.yaml` under a folder outside the checkout (build/plan/<stack> pointed there, and a folder of folders was
taken for an old plan folder)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.offline.plan_out import WRITTEN_LIST, _previously_written, check_out_dir, default_out_dir
from triton_gke.settings import ConfigError, stack_config
from triton_gke.settings.stack import check_stack_name

ALLOWED = set(string.ascii_letters + string.digits + "-_.")


def is_stack_name(name: str) -> bool:
    """Pulumi's rule as the brief states it, written independently of the regular expression under test."""
    return 1 <= len(name) <= 100 and set(name) <= ALLOWED and not name.startswith(".")


_names = st.one_of(
    st.text(alphabet=sorted(ALLOWED), min_size=0, max_size=110),
    st.text(alphabet=sorted(ALLOWED | set("/\\ \n\t~:*$'\"é")), min_size=0, max_size=30),
    st.sampled_from([".", "..", "../v", "../../../v", "../etc/passwd", "dev/..", "/tmp/x", ".hidden", "dev\n"]),
)


@settings(max_examples=60, deadline=None)
@given(name=_names)
def test_only_plain_stack_names_are_accepted_and_none_leaves_build_plan(name: str) -> None:
    if is_stack_name(name):
        assert check_stack_name(name) == name
        assert default_out_dir(name).parent == PROJECT_DIR / "build" / "plan"
        assert default_out_dir(name).name == name
        return
    with pytest.raises(ConfigError) as refused:
        check_stack_name(name)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"stack {name!r}: not a Pulumi stack name")
    with pytest.raises(ConfigError, match="not a Pulumi stack name"):
        default_out_dir(name)
    with pytest.raises(ConfigError, match="not a Pulumi stack name"):  # even with a stack file given
        stack_config(name, config_file=PROJECT_DIR / "Pulumi.dev.yaml")


def test_a_folder_of_folders_without_the_list_is_nobodys_plan(tmp_path: Path) -> None:
    # The old rule took every */*.yaml of such a folder for an old plan's files and removed them.
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "keep.yaml").write_text("mine: true\n")

    assert _previously_written(tmp_path) == []
    with pytest.raises(ConfigError) as refused:
        check_out_dir(tmp_path, "--stack dev")
    assert str(refused.value) == (
        f"--stack dev: {tmp_path} is not empty and was not written by offline.plan (no {WRITTEN_LIST}); "
        "choose an empty or new folder"
    )
    assert (tmp_path / "configs" / "keep.yaml").read_text() == "mine: true\n"


def test_a_refused_out_folder_names_the_option_the_user_gave(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match=f"^--out: {tmp_path} is not empty"):
        check_out_dir(tmp_path)
    with pytest.raises(ConfigError, match=f"^--stack prod: {tmp_path} is not empty"):
        check_out_dir(tmp_path, "--stack prod")
