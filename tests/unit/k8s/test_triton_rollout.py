"""Triton's startup budget and rollout: the setting's boundary, the rollout model, and a model change's effect on
the pod template."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT, evaluate
from tests.unit.infra.test_deploy_invariants import rollout_waves
from triton_gke.k8s.triton import (
    MODEL_DIGEST_ANNOTATION,
    STARTUP_PROBE_PERIOD_S,
    startup_probe_failures,
    triton_timeouts,
)
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.serving import MAX_STARTUP_MINUTES

pytest_plugins = ("tests.support.triton_fixtures",)


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
    import triton_gke.infra.system as system  # where the program takes the built repository's digest

    templates = {}
    for digest in ("a" * 64, "b" * 64):
        monkeypatch.setattr(system, "built_repository_digest", lambda *_a, d=digest, **_k: d)
        templates[digest] = _triton(evaluate("dev")).inputs["spec"]["template"]
    first, second = templates.values()
    assert first["metadata"]["annotations"][MODEL_DIGEST_ANNOTATION] == "a" * 64
    assert second["metadata"]["annotations"][MODEL_DIGEST_ANNOTATION] == "b" * 64
    assert first["spec"] == second["spec"]
