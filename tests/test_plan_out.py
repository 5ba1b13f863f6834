"""`python -m offline.plan --out DIR`: the plan removes only files it wrote itself, and writes no secret."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.config import ConfigError
from offline.plan import WRITTEN_LIST, kubernetes_objects, write_kubernetes_objects
from offline.runtime import Plan

PROJECT_DIR = Path(__file__).resolve().parent.parent
# What the offline mocks return for a random provider's password (offline/runtime.py _COMPUTED); the SDK marks
# RandomPassword.result secret, and the plan must never show it.
MOCK_SECRET = "offline-plan-"


def run_plan(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "offline.plan", "--stack", "dev", *args]
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
