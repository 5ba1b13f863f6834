"""Committed plans of earlier releases, compared with today's program planned with the same project.

The stored plans under tests/data/ were made when every shipped stack file said `gcp:project: my-gcp-project`; the
stack files now name a project each (docs/security.md). The project is in every bucket, service account email and
Workload Identity member, so planning today's program with today's stack files would show each of those replaced,
a change of settings, not of the program. So today's plan takes the stored plan's project (stored_project).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLUSTER = "gcp:container/cluster:Cluster"
# GKE names a project's Workload Identity pool after it: "PROJECT_ID.svc.id.goog"
# (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity); infra/cluster.py sets it on each cluster.
POOL_SUFFIX = ".svc.id.goog"


def stored_project(records: Mapping[str, Mapping[str, Any]]) -> str:
    """The gcp:project a stored plan was made with: its clusters' one Workload Identity pool, less the suffix.

    records: TYPE::NAME -> record (offline/plan_diff.py index_records), as the stored plan holds them.
    """
    pools = {
        record["inputs"]["workloadIdentityConfig"]["workloadPool"]
        for record in records.values()
        if record["type"] == CLUSTER
    }
    assert len(pools) == 1, f"a stored plan's clusters name one Workload Identity pool, not {sorted(pools)}"
    (pool,) = pools
    assert pool.endswith(POOL_SUFFIX), pool
    return pool.removesuffix(POOL_SUFFIX)


def with_stored_project(records: Mapping[str, Mapping[str, Any]], **overrides: Any) -> dict[str, Any]:
    """`overrides` for tests/conftest.py evaluate (or engine_plan) that also plan in the stored plan's project."""
    return {**overrides, "gcp:project": stored_project(records)}
