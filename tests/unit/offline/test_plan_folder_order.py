"""`triton-gke plan-folder --json` lists resources in one order at every run (red team: three runs of the example gave
three orders, since registrations finish in any order under the mock runtime): parents first, siblings sorted."""

from __future__ import annotations

import dataclasses
import random

import pulumi

from triton_gke.offline.plan_folder import resource_rows
from triton_gke.offline.runtime import run_under_mocks


class Box(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Box", name, None, opts)
        for child in ("c", "a", "b"):
            pulumi.CustomResource("test:index:Thing", f"{name}-{child}", {}, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def declare() -> None:
    for name in ("zeta", "alpha", "mid"):
        Box(name)


def test_the_rows_do_not_depend_on_the_order_of_registration() -> None:
    plan = run_under_mocks(declare, "dev", {}, "order")
    rows = resource_rows(plan)
    for seed in range(5):
        shuffled = list(plan.resources)
        random.Random(seed).shuffle(shuffled)
        assert resource_rows(dataclasses.replace(plan, resources=shuffled)) == rows
    names = [row["name"] for row in rows]
    assert names[:4] == ["alpha", "alpha-a", "alpha-b", "alpha-c"]  # a parent, then its children, sorted
