"""`triton-gke plan --out DIR`: the plan removes only files it wrote itself, and writes no secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from triton_gke.offline.plan import WRITTEN_LIST, kubernetes_objects, write_kubernetes_objects
from triton_gke.offline.runtime import Plan
from triton_gke.settings.errors import ConfigError

PROJECT_DIR = Path(__file__).resolve().parent.parent
# What the offline mocks return for a random provider's password (offline/runtime.py _COMPUTED); the SDK marks
# RandomPassword.result secret, and the plan must never show it.
MOCK_SECRET = "offline-plan-"


def run_plan(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", *args]
    return subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_with_a_stranger_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    # What the tester lost with `--out .`: a policy file beside provider-like folders.
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "PulumiPolicy.yaml").write_text("runtime: python\n")
    before = tree(tmp_path)

    result = run_plan("--out", str(tmp_path))

    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"error: --out: {tmp_path} is not empty and was not written by offline.plan (no {WRITTEN_LIST}); "
        "choose an empty or new folder"
    ]
    assert tree(tmp_path) == before


def test_a_second_plan_replaces_only_its_own_files_and_writes_no_secret(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    first = run_plan("--out", str(out))
    assert first.returncode == 0, first.stderr
    written = set(tree(out)) - {WRITTEN_LIST}
    assert written and set((out / WRITTEN_LIST).read_text().split()) == written
    stranger = out / "gke-us-central1-k8s" / "notes.yaml"  # a file someone put among the plan's own
    stranger.write_text("mine\n")

    second = run_plan("--out", str(out), "--json")

    assert second.returncode == 0, second.stderr
    assert stranger.read_text() == "mine\n"
    assert set(tree(out)) == written | {WRITTEN_LIST, stranger.relative_to(out).as_posix()}
    # No secret value in any output: the YAML, the JSON on stdout, the text plan.
    outputs = [second.stdout, first.stdout, *(b.decode() for b in tree(out).values())]
    assert not [text for text in outputs if MOCK_SECRET in text]
    secrets = [yaml.safe_load((out / name).read_text()) for name in written if name.split("/")[-1].startswith("secret")]
    assert {s["metadata"]["name"] for s in secrets} == {"grafana-admin", "triton-admin-key"}
    for secret in secrets:  # Secret data is kept as a redacted placeholder, its keys shown
        values = {**secret.get("data", {}), **secret.get("stringData", {})}
        assert values and set(values.values()) == {"[secret]"}
    records = json.loads(second.stdout)
    assert all(MOCK_SECRET not in json.dumps(r) for r in records)


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


def test_a_link_planted_among_the_plans_files_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    # The red team's first case: after one plan, one of its YAML files replaced by a link to a file outside.
    out, victim = tmp_path / "plan", tmp_path / "victim.txt"
    assert run_plan("--out", str(out)).returncode == 0
    victim.write_text("keep\n")
    link = out / "gke-us-central1-k8s" / "namespace-cluster-triton.yaml"
    link.unlink()
    link.symlink_to(victim)
    before = snapshot(out)

    result = run_plan("--out", str(out))

    assert result.returncode == 2 and result.stderr.splitlines() == [link_refusal(link)]
    assert victim.read_text() == "keep\n"
    assert snapshot(out) == before  # nothing removed or written before the refusal


def test_a_cluster_folder_replaced_by_a_link_is_refused_and_the_other_folder_kept(tmp_path: Path) -> None:
    # The second case: OUT/<cluster> a link to another folder, which holds a file named like one of the plan's.
    out, other = tmp_path / "plan", tmp_path / "other"
    assert run_plan("--out", str(out)).returncode == 0
    other.mkdir()
    (other / "namespace-cluster-triton.yaml").write_text("mine\n")
    cluster = out / "gke-us-central1-k8s"
    shutil.rmtree(cluster)
    cluster.symlink_to(other, target_is_directory=True)
    before, other_before = snapshot(out), snapshot(other)

    result = run_plan("--out", str(out))

    assert result.returncode == 2 and result.stderr.splitlines() == [link_refusal(cluster)]
    assert snapshot(other) == other_before and snapshot(out) == before


def test_an_out_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    out = tmp_path / "plan"
    out.symlink_to(target, target_is_directory=True)

    result = run_plan("--out", str(out))

    assert result.returncode == 2 and result.stderr.splitlines() == [link_refusal(out)]
    assert not any(target.iterdir())


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
