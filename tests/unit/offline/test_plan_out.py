"""offline.plan's --out folder in-process: the plan removes only files it wrote itself (generated folders)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.offline.plan_out import WRITTEN_LIST, write_kubernetes_objects
from triton_gke.offline.plan_view import kubernetes_objects
from triton_gke.offline.runtime import Plan
from triton_gke.settings.errors import ConfigError


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- property-based: the out folder boundary
_names = st.text(st.characters(codec="ascii", categories=("L", "N"), include_characters="-_."), min_size=1, max_size=12)


_names = _names.filter(lambda n: n not in (".", "..", WRITTEN_LIST))


@pytest.fixture(scope="module")
def dev_objects(dev_plan: Plan) -> Plan:
    assert kubernetes_objects(dev_plan)
    return dev_plan


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stranger=st.lists(_names, min_size=1, max_size=3), content=st.binary(max_size=64))
def test_any_folder_holding_files_it_did_not_write_is_refused(
    tmp_path_factory: pytest.TempPathFactory, dev_objects: Plan, stranger: list[str], content: bytes
) -> None:
    out = tmp_path_factory.mktemp("out")
    path = out.joinpath(*stranger)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():  # a generated name equal to a folder made above
        return
    path.write_bytes(content)
    before = tree(out)

    with pytest.raises(ConfigError, match="is not empty and was not written by offline.plan"):
        write_kubernetes_objects(dev_objects, out)

    assert tree(out) == before


_hostile = st.sampled_from(["../victim.txt", "../../victim.txt", "{abs}", "./", ".", "", "sub/../../victim.txt"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.one_of(_hostile, _names), max_size=6))
def test_a_tampered_list_never_removes_a_file_outside_the_folder(
    tmp_path_factory: pytest.TempPathFactory, dev_objects: Plan, entries: list[str]
) -> None:
    root = tmp_path_factory.mktemp("root")
    victim = root / "victim.txt"
    victim.write_text("keep\n")
    out = root / "out"
    out.mkdir()
    lines = [e.replace("{abs}", str(victim)) for e in entries]
    (out / WRITTEN_LIST).write_text("\n".join(lines) + "\n")

    written = write_kubernetes_objects(dev_objects, out)

    assert victim.read_text() == "keep\n"
    assert written and all(p.is_file() for p in written)
    assert set((out / WRITTEN_LIST).read_text().split()) == {p.relative_to(out).as_posix() for p in written}


# ---------------------------------------------------------------- links: never written or removed through
def snapshot(folder: Path) -> dict[str, str | bytes]:
    """Every entry under folder by lstat: a link as its target text, a file as its bytes, a folder as 'dir'."""
    entries: dict[str, str | bytes] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            entries[name] = f"-> {os.readlink(path)}"
        else:
            entries[name] = path.read_bytes() if path.is_file() else "dir"
    return entries


def link_refusal(link: Path) -> str:
    return f"error: --out: {link} is a symbolic link; the plan never writes or removes through a link (remove it)"


@pytest.fixture(scope="module")
def planned(dev_objects: Plan, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A folder one plan wrote, and every path in it (files, folders, the list) a link could replace."""
    out = tmp_path_factory.mktemp("planned") / "plan"
    write_kubernetes_objects(dev_objects, out)
    return out, sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(["file", "folder", "dangling"]))
def test_a_link_anywhere_in_the_plans_folder_is_refused_and_nothing_changes(
    tmp_path_factory: pytest.TempPathFactory,
    dev_objects: Plan,
    planned: tuple[Path, list[str]],
    data: st.DataObject,
    kind: str,
) -> None:
    source, paths = planned
    root = tmp_path_factory.mktemp("links")
    out = root / "plan"
    shutil.copytree(source, out)
    outside = root / "outside"
    outside.mkdir()
    (outside / "victim.yaml").write_text("keep\n")
    replaced = out / data.draw(st.sampled_from(paths), label="replaced")
    is_folder = replaced.is_dir()
    shutil.rmtree(replaced) if is_folder else replaced.unlink()
    target = {"file": outside / "victim.yaml", "folder": outside, "dangling": outside / "absent"}[kind]
    replaced.symlink_to(target, target_is_directory=is_folder)
    before, outside_before = snapshot(out), snapshot(outside)

    with pytest.raises(ConfigError) as refused:
        write_kubernetes_objects(dev_objects, out)

    assert str(refused.value) == link_refusal(replaced).removeprefix("error: ")
    assert snapshot(out) == before and snapshot(outside) == outside_before


def test_a_strangers_file_with_a_plan_files_name_is_refused_not_overwritten(
    tmp_path: Path, planned: tuple[Path, list[str]], dev_objects: Plan
) -> None:
    source, _ = planned
    out = tmp_path / "plan"
    shutil.copytree(source, out)
    listed = (out / WRITTEN_LIST).read_text().splitlines()
    (out / WRITTEN_LIST).write_text("".join(f"{line}\n" for line in listed[1:]))  # the first is not the plan's
    (out / listed[0]).write_text("mine\n")
    before = snapshot(out)

    with pytest.raises(ConfigError, match=f"--out: {out / listed[0]} exists and was not written by offline.plan"):
        write_kubernetes_objects(dev_objects, out)

    assert snapshot(out) == before
