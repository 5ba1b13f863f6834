"""The policy pack run exactly as the CLI runs it (`python -m pulumi.policy`), over the analyzer gRPC protocol."""

from __future__ import annotations

import copy
import re
import select
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import evaluate
from tests.unit.policy.test_policies import BY_NAME, POOL, _first, _gpu_pool
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.policy.policies import (
    BUCKET,
)

# The documented levels: policy/README.md's table (`| `name` | level | ...`), which the served pack must match (the
# fresh-clone run of 3f9ce76 found this test still expecting prod-lb-https mandatory after it became advisory).
LEVELS = {
    row.group(1): row.group(2)
    for row in re.finditer(
        r"^\| `([a-z0-9-]+)` \| (advisory|mandatory) \|",
        (PROJECT_DIR / "triton_gke" / "policy" / "README.md").read_text(encoding="utf-8"),
        re.M,
    )
}


PACK_START_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def plans(dev_plan: Plan, prod_plan: Plan) -> dict[str, Plan]:
    return {"dev": dev_plan, "staging": evaluate("staging"), "prod": prod_plan}


# ---------------------------------------------------------------- the pack as the CLI runs it
@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """policy/ served the way `pulumi up --policy-pack policy` starts it: it prints its port, then serves."""
    pack = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "policy"],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([pack.stdout], [], [], PACK_START_TIMEOUT_S)
        line = pack.stdout.readline().strip() if ready else ""
        assert line.isdigit(), f"the pack printed no port: {line!r} {pack.stderr.read() if pack.poll() else ''}"
        with grpc.insecure_channel(f"127.0.0.1:{line}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        pack.kill()  # the pack serves until its host (the CLI) ends it
        pack.wait(timeout=30)
        pack.stdout.close()
        pack.stderr.close()


def _analyze(stub: analyzer_pb2_grpc.AnalyzerStub, resource: PlannedResource) -> list[analyzer_pb2.AnalyzeDiagnostic]:
    properties = struct_pb2.Struct()
    properties.update(resource.inputs)
    request = analyzer_pb2.AnalyzeRequest(
        type=resource.type, properties=properties, urn=resource.urn, name=resource.name
    )
    return list(stub.Analyze(request, timeout=30).diagnostics)


def test_the_pack_declares_every_policy_with_its_enforcement_level(analyzer) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    levels = {p.name: analyzer_pb2.EnforcementLevel.Name(p.enforcementLevel).lower() for p in info.policies}
    assert info.name == "triton-gke-guardrails"
    assert levels == LEVELS


def test_the_pack_blocks_a_public_bucket_and_passes_the_real_one(analyzer, plans: dict[str, Plan]) -> None:
    bucket = _first(plans["prod"], BUCKET)
    assert _analyze(analyzer, bucket) == []
    public = copy.deepcopy(bucket)
    public.inputs["publicAccessPrevention"] = "inherited"
    [diagnostic] = _analyze(analyzer, public)
    assert diagnostic.policyName == "bucket-locked-down"
    assert diagnostic.enforcementLevel == analyzer_pb2.EnforcementLevel.MANDATORY
    assert "publicAccessPrevention 'inherited'" in diagnostic.message


def test_the_pack_only_warns_about_an_untainted_gpu_pool(analyzer, plans: dict[str, Plan]) -> None:
    pool = copy.deepcopy(_gpu_pool(plans["dev"]))
    pool.inputs["nodeConfig"]["taints"] = []
    [diagnostic] = _analyze(analyzer, pool)
    assert diagnostic.policyName == "gpu-node-pools-tainted"
    assert diagnostic.enforcementLevel == analyzer_pb2.EnforcementLevel.ADVISORY


def test_the_pack_accepts_a_long_stacks_own_principals_and_refuses_them_as_its_siblings(
    analyzer, plans: dict[str, Plan]
) -> None:
    """The pack as the CLI serves it imports principals.py from its own folder: two stacks of 55 characters that share
    48 (issue 43) each pass with their own members and are refused with the other's."""
    from tests.unit.policy.test_principals import LONG_STACKS
    from triton_gke.policy.principals import engine_service_account, triton_service_account

    binding = _first(plans["dev"], "gcp:serviceaccount/iAMMember:IAMMember")
    for stack, sibling in (LONG_STACKS, LONG_STACKS[::-1]):
        for member in (f"triton/{triton_service_account(stack)}", f"triton-engines/{engine_service_account(stack)}"):
            grant = copy.deepcopy(binding)
            grant.inputs["member"] = f"{POOL}[{member}]"
            grant.urn = grant.urn.replace("urn:pulumi:dev::", f"urn:pulumi:{stack}::")
            assert _analyze(analyzer, grant) == [], member
            grant.urn = grant.urn.replace(f"urn:pulumi:{stack}::", f"urn:pulumi:{sibling}::")
            [diagnostic] = _analyze(analyzer, grant)
            assert diagnostic.policyName == "workload-identity-per-stack", diagnostic
            assert f"not one of the service accounts of stack {sibling!r}" in diagnostic.message


def test_the_pack_refuses_a_dev_deployment_running_as_triton_prod_in_one_line(analyzer) -> None:
    """Must show (issue 44), as the CLI serves the pack: the Deployment of a dev plan whose serviceAccountName is
    triton-prod, one mandatory diagnostic; the plan's own Triton Deployment, none."""
    from tests.unit.policy.test_kubernetes_principals import _batch_job_as_prod, _dev_program_with, deployment_as_prod

    plan = _dev_program_with(_batch_job_as_prod)
    [diagnostic] = _analyze(analyzer, deployment_as_prod(plan))
    assert diagnostic.policyName == "kubernetes-principal-per-stack", diagnostic
    assert diagnostic.enforcementLevel == analyzer_pb2.EnforcementLevel.MANDATORY
    # pulumi-policy sends the policy's description, a line break, then the violation's one line.
    description, line = diagnostic.message.split("\n")
    assert description == BY_NAME["kubernetes-principal-per-stack"].description
    assert line.startswith("Deployment 'batch-scorer' runs its pods as service account 'triton-prod'"), line
    assert "'triton-prod' in triton: that is triton/triton-prod, the Workload Identity principal of stack 'prod'" in (
        diagnostic.message
    )
    triton = next(r for r in plan.of_type("kubernetes:apps/v1:Deployment") if r.name == "triton-us-central1-deployment")
    assert _analyze(analyzer, triton) == []
