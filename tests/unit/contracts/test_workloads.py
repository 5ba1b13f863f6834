"""The stack's `access` output and the Triton alerts use the contracts the objects they point at are built from.

An `access` command that forwards to a port or namespace the Service does not have, or an alert on a job name the
Prometheus config does not define (`absent(up{job=...})` would fire for ever), fails silently in a real cluster.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.contracts.workloads import GRAFANA_PORT, LOCUST_WEB_PORT, PROMETHEUS_PORT
from triton_gke.observability.prometheus_config import prometheus_config
from triton_gke.observability.rules import TRITON_JOB, rules
from triton_gke.observability.settings import TRITON_PODS, SloSettings
from triton_gke.offline.runtime import Plan

SERVICE = "kubernetes:core/v1:Service"
PORT_FORWARD = re.compile(r"kubectl -n (\S+) port-forward svc/(\S+) (\d+):(\d+)")


def service_ports(plan: Plan) -> dict[tuple[str, str], set[int]]:
    """(namespace, Service name) -> the ports it declares."""
    found: dict[tuple[str, str], set[int]] = {}
    for service in plan.of_type(SERVICE):
        meta: dict[str, Any] = service.inputs["metadata"]
        found[(meta["namespace"], meta["name"])] = {int(p["port"]) for p in service.inputs["spec"]["ports"]}
    return found


def test_every_access_command_forwards_a_port_its_service_declares(dev_plan: Plan) -> None:
    services = service_ports(dev_plan)
    for region, commands in dev_plan.outputs["access"].items():
        forwards = {name: PORT_FORWARD.search(text) for name, text in commands.items() if name != "credentials"}
        assert set(forwards) == {"triton", "locust", "grafana", "prometheus"}, region
        for name, match in forwards.items():
            assert match, (region, name, commands[name])
            namespace, service, local, remote = match.groups()
            assert local == remote and int(remote) in services[(namespace, service)], (region, name)
            assert f"http://localhost:{local}" in commands[name] or name == "prometheus"


def test_the_web_ui_ports_are_the_contracts_and_the_access_text_is_unchanged(dev_plan: Plan) -> None:
    access = dev_plan.outputs["access"]["us-central1"]
    assert access["locust"] == (
        f"kubectl -n load port-forward svc/locust-master {LOCUST_WEB_PORT}:{LOCUST_WEB_PORT}  "
        f"# then http://localhost:{LOCUST_WEB_PORT}"
    )
    assert access["grafana"].startswith(
        f"kubectl -n monitoring port-forward svc/grafana {GRAFANA_PORT}:{GRAFANA_PORT}  "
        f"# then http://localhost:{GRAFANA_PORT}, user admin"
    )
    assert (
        access["prometheus"] == f"kubectl -n monitoring port-forward svc/prometheus {PROMETHEUS_PORT}:{PROMETHEUS_PORT}"
    )
    assert (LOCUST_WEB_PORT, GRAFANA_PORT, PROMETHEUS_PORT) == (8089, 3000, 9090)  # the programs' own defaults
    # The deploy page's smoke step after `pulumi up` is this line's two halves.
    assert access["triton"] == (
        "kubectl -n triton port-forward svc/triton 8000:8000  # then: triton-gke smoke http://localhost:8000"
    )
    steps = (PROJECT_DIR / "docs" / "deploy-steps.md").read_text()
    forward, smoke = access["triton"].replace("# then: triton-gke", ".venv/bin/triton-gke").split("  ")
    assert f"\n{forward} &\n{smoke}  " in steps


@settings(max_examples=25, deadline=None)
@given(region=st.from_regex(r"[a-z]{2,8}-[a-z]{2,8}[1-9]", fullmatch=True))
def test_every_job_a_rule_names_is_a_scrape_job_of_the_prometheus_config(region: str) -> None:
    jobs = {job["job_name"] for job in prometheus_config(region, "dev")["scrape_configs"]}
    expressions = [rule["expr"] for group in rules(SloSettings(), region)["groups"] for rule in group["rules"]]
    named = {job for expression in expressions for job in re.findall(r'job="([^"]*)"', expression)}
    assert named and named <= jobs
    assert TRITON_PODS.job == TRITON_JOB and TRITON_JOB in named
