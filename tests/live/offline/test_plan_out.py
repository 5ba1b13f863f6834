"""`triton-gke plan --out DIR` as a process: the plan removes only files it wrote itself, and writes no secret."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.checkout import PROJECT_DIR
from tests.unit.offline.test_plan_out import link_refusal, snapshot, tree
from triton_gke.offline.plan_out import WRITTEN_LIST

# What the offline mocks return for a random provider's password (offline/runtime.py _COMPUTED); the SDK marks
# RandomPassword.result secret, and the plan must never show it.
MOCK_SECRET = "offline-plan-"


def run_plan(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", *args]
    return subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)


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
    assert {s["metadata"]["name"] for s in secrets} == {
        "grafana-admin",
        "triton-admin-key",
        "triton-inference-keys",  # the inference key (issue 44), Triton's side and Locust's
        "locust-inference-headers",
    }
    for secret in secrets:  # Secret data is kept as a redacted placeholder, its keys shown
        values = {**secret.get("data", {}), **secret.get("stringData", {})}
        assert values and set(values.values()) == {"[secret]"}
    records = json.loads(second.stdout)
    assert all(MOCK_SECRET not in json.dumps(r) for r in records)


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
