"""Triton's rollout against the real thing: a running tritonserver with the GKE flags never changes its models,
and the plan graph that `make plan --json` prints (dependsOn, customTimeouts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.checkout import PROJECT_DIR
from tests.unit.k8s.test_triton_rollout import DEPLOYMENT
from triton_gke.contracts.triton import ADMIN_KEY_HEADER, cluster_flags
from triton_gke.model_repo.build import BuildResult
from triton_gke.sandbox.triton import TritonServer

pytest_plugins = ("tests.support.triton_fixtures",)


def test_the_plan_command_refuses_a_bad_budget_with_exit_code_2():
    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--set", "tritonStartupMinutes=5"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "tritonStartupMinutes" in result.stderr
    assert "Traceback" not in result.stderr


def _status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(
        url, method=method, data=b"{}" if method == "POST" else None, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_a_running_triton_with_the_gke_flags_never_changes_its_models(model_repos: BuildResult, tmp_path: Path):
    """Real tritonserver, GKE command line: a model added to its repository is not served, and even the admin key
    cannot load it. Only a new pod (the digest in the template) brings a model change."""
    repository = tmp_path / "repo"
    repository.mkdir()
    shutil.copytree(Path(model_repos.cpu_out) / "original", repository / "original")
    # Were the GKE flags a polling mode, a 1 s interval would load the new model within the wait below.
    flags = cluster_flags(str(repository), gpu=False, admin_key="k").replaced({"repository-poll-secs": "1"})
    with TritonServer(repository, flags=flags, ready_timeout_s=240) as server:
        base = f"http://{server.http_url}/v2"
        shutil.copytree(Path(model_repos.cpu_out) / "trt_fp32", repository / "trt_fp32")
        deadline = time.monotonic() + 12  # a poll would find it in 1 s and load it in a few (2 CPU cores)
        while time.monotonic() < deadline:
            assert _status(f"{base}/models/trt_fp32/ready") != 200, "a running Triton picked up a new model"
            time.sleep(1)
        assert _status(f"{base}/models/original/ready") == 200
        load = _status(f"{base}/repository/models/trt_fp32/load", "POST", {ADMIN_KEY_HEADER: "k"})
        assert load >= 400, "model control mode none refuses loads"
        assert _status(f"{base}/models/trt_fp32/ready") != 200


# ---- the graph in make plan --json ------------------------------------------------------------------------------
def test_plan_json_prints_each_resources_dependencies_and_timeouts(tmp_path: Path) -> None:
    result = subprocess.run(  # --out: its YAML not in the shared build/plan/dev
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--json", "--out", str(tmp_path)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    records = {r["urn"]: r for r in json.loads(result.stdout)}
    assert all({"dependsOn", "customTimeouts", "protect"} <= set(r) for r in records.values())
    assert all(set(r["dependsOn"]) <= set(records) for r in records.values()), "dependsOn names planned URNs"
    (triton,) = [r for r in records.values() if r["type"] == DEPLOYMENT and r["inputs"]["metadata"]["name"] == "triton"]
    waited = {records[u]["name"] for u in triton["dependsOn"]}
    # Explicit (IAM members, binding) and implied by inputs (the upload's output in the args, the Secret's name).
    assert {"models-workload-identity", "models-objectViewer", "models-legacyBucketReader", "models-sync"} <= waited
    assert triton["customTimeouts"] == {"create": "40m", "update": "40m"}
    (binding,) = [r for r in records.values() if r["name"] == "models-workload-identity"]
    assert any(records[u]["type"] == "gcp:container/cluster:Cluster" for u in binding["dependsOn"])
