"""Triton's startup budget, rollout and model updates: the setting's boundary, the rollout model, and the plan graph
that `make plan --json` prints (dependsOn, customTimeouts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import PROJECT, PROJECT_DIR, evaluate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_deploy_invariants import rollout_waves
from triton_gke.k8s.triton import (
    ADMIN_KEY_HEADER,
    MODEL_DIGEST_ANNOTATION,
    STARTUP_PROBE_PERIOD_S,
    startup_probe_failures,
    triton_server_args,
    triton_timeouts,
)
from triton_gke.model_repo.build import BuildResult
from triton_gke.sandbox.triton import TritonServer
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.serving import MAX_STARTUP_MINUTES

pytest_plugins = ("tests.triton_fixtures",)

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _triton(plan):
    (deployment,) = [d for d in plan.of_type(DEPLOYMENT) if d.inputs["metadata"]["name"] == "triton"]
    return deployment


# ---- tritonStartupMinutes: the boundary -------------------------------------------------------------------------


@FEW
@given(minutes=st.integers(min_value=10, max_value=MAX_STARTUP_MINUTES))
def test_a_valid_budget_drives_the_probe_and_every_wait(minutes):
    plan = evaluate("dev", tritonStartupMinutes=minutes)
    deployment = _triton(plan)
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    probe = container["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] == minutes * 60
    assert deployment.custom_timeouts == {"create": f"{minutes}m", "update": f"{minutes}m"}  # dev: 1 pod at most
    services = [s for s in plan.of_type("kubernetes:core/v1:Service") if s.inputs["metadata"]["namespace"] == "triton"]
    assert services and all(s.custom_timeouts == {"create": f"{minutes}m", "update": f"{minutes}m"} for s in services)


@FEW
@given(
    value=st.one_of(
        st.integers(max_value=9),
        st.integers(min_value=MAX_STARTUP_MINUTES + 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.booleans(),
    )
)
def test_a_bad_budget_is_refused_in_one_line_naming_the_key(value):
    with pytest.raises(ConfigError) as refused:
        evaluate("dev", tritonStartupMinutes=value)
    message = str(refused.value)
    assert message.startswith(f"{PROJECT}:tritonStartupMinutes: ") and "\n" not in message


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


@FEW
@given(minutes=st.integers(min_value=10, max_value=MAX_STARTUP_MINUTES), pods=st.integers(min_value=1, max_value=50))
def test_timeouts_and_probe_derive_from_one_budget(minutes, pods):
    deployment, service = triton_timeouts(minutes, pods)
    assert startup_probe_failures(minutes) * STARTUP_PROBE_PERIOD_S == minutes * 60
    assert (deployment.create, deployment.update) == (f"{minutes}m", f"{minutes * pods}m")
    assert (service.create, service.update) == (f"{minutes}m", f"{minutes}m")


# ---- the rollout model ------------------------------------------------------------------------------------------


@FEW
@given(data=st.data(), replicas=st.integers(min_value=1, max_value=30))
def test_one_pod_at_a_time_always_completes_on_the_nodes_it_has(data, replicas):
    nodes = data.draw(st.integers(min_value=replicas, max_value=replicas + 5))
    waves = rollout_waves(replicas, nodes, max_surge=0, max_unavailable=1)
    assert waves is not None and waves <= replicas


@FEW
@given(replicas=st.integers(min_value=1, max_value=30), surge=st.integers(min_value=1, max_value=5))
def test_a_surge_without_a_spare_gpu_node_never_completes(replicas, surge):
    """The default (maxSurge 1 for up to 3 pods, maxUnavailable 0) on a pool already at its maximum deadlocks."""
    assert rollout_waves(replicas, nodes=replicas, max_surge=surge, max_unavailable=0) is None


@FEW
@given(replicas=st.integers(min_value=1, max_value=30), spare=st.integers(min_value=1, max_value=5))
def test_a_surge_completes_when_the_autoscaler_may_add_a_node(replicas, spare):
    """The model is not rigged: the same surge strategy completes once a spare node is allowed."""
    assert rollout_waves(replicas, nodes=replicas + spare, max_surge=1, max_unavailable=0) is not None


# ---- model updates ----------------------------------------------------------------------------------------------


def test_a_model_change_changes_the_pod_template_and_nothing_else_in_it(monkeypatch):
    """The digest is the only template difference between two model repositories: a rollout, and only then."""
    import triton_gke.infra.model_upload as model_upload
    templates = {}
    for digest in ("a" * 64, "b" * 64):
        monkeypatch.setattr(model_upload, "built_repository_digest", lambda *_a, d=digest, **_k: d)
        templates[digest] = _triton(evaluate("dev")).inputs["spec"]["template"]
    first, second = templates.values()
    assert first["metadata"]["annotations"][MODEL_DIGEST_ANNOTATION] == "a" * 64
    assert second["metadata"]["annotations"][MODEL_DIGEST_ANNOTATION] == "b" * 64
    assert first["spec"] == second["spec"]


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
    fixed_ports = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=")
    args = [
        a for a in triton_server_args(str(repository), gpu=False, admin_key="k")[1:] if not a.startswith(fixed_ports)
    ]
    # Were the GKE flags a polling mode, a 1 s interval would load the new model within the wait below.
    args.append("--repository-poll-secs=1")
    with TritonServer(repository, extra_args=args, ready_timeout_s=240) as server:
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


def test_plan_json_prints_each_resources_dependencies_and_timeouts():
    result = subprocess.run(
        [sys.executable, "-m", "triton_gke.offline.plan", "--stack", "dev", "--json"],
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
