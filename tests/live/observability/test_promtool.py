"""The generated Prometheus config, rules and dashboards, checked by Prometheus' own promtool.

promtool comes with Debian's `prometheus` package (apt-get install prometheus). Its build has no
kubernetes_sd, so the config is checked in its file_sd form (same relabelling). Each alert is
unit-tested with `promtool test rules`: it fires on the series it is meant for, stays quiet
otherwise, and its annotations name the region."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.observability.test_prometheus_config import REGION
from tests.unit.observability.test_rules import (
    ALERT_CASES,
    SLO,
)
from triton_gke.observability.dashboards import dashboards, panel_queries
from triton_gke.observability.prometheus_config import (
    prometheus_config,
    render_yaml,
)
from triton_gke.observability.rules import rules_yaml
from triton_gke.observability.settings import SloSettings
from triton_gke.sandbox.prometheus import to_file_sd, write_file_sd_targets

PROMTOOL = shutil.which("promtool")


needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing: apt-get install prometheus")


# Grafana variables, replaced by what Grafana would send.
GRAFANA_VARIABLES = {"$region": REGION, "$model": ".*", "$__rate_interval": "1m", "$__range": "1h"}


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- config and rules pass promtool
@needs_promtool
def test_prometheus_config_passes_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(rules_yaml(SloSettings(), REGION))
    config = prometheus_config(REGION, "prod", rule_files=[str(tmp_path / "rules.yml")])
    for job in ("triton", "dcgm-exporter", "locust"):
        write_file_sd_targets(tmp_path / "sd", job, [])
    (tmp_path / "prometheus.yml").write_text(render_yaml(to_file_sd(config, tmp_path / "sd")))
    result = promtool("check", "config", tmp_path / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 19 rules found" in result.stdout


@needs_promtool
def test_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(rules_yaml(SloSettings(), REGION))
    result = promtool("check", "rules", tmp_path / "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr


LATENCY = 'triton:request_latency_ms:quantile{quantile="0.95"}'


def _unit_test_file(rules_file: Path, alert: str) -> dict[str, Any]:
    tests = []
    for name, input_series, eval_time, expected in ALERT_CASES[alert]:
        tests.append(
            {
                "name": name,
                "interval": "15s",
                "input_series": input_series,
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": expected}],
            }
        )
    return {"rule_files": [str(rules_file)], "evaluation_interval": "15s", "tests": tests}


@needs_promtool
@pytest.mark.parametrize("alert", sorted(ALERT_CASES))
def test_alert_fires_on_its_series_and_stays_quiet_otherwise(tmp_path: Path, alert: str) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(rules_yaml(SLO, REGION))
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(_unit_test_file(rules_file, alert), sort_keys=False))
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# ---------------------------------------------------------------- dashboards
def grafana_to_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


def _variable_selectors(board: dict[str, Any]) -> list[str]:
    """The series selector inside each label_values(selector, label) variable query."""
    queries = [v.get("query", "") for v in board["templating"]["list"] if v["type"] == "query"]
    return [m.group(1) for q in queries if (m := re.fullmatch(r"label_values\((.+), *\w+\)", q))]


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    exprs = [expr for board in dashboards().values() for _, expr in panel_queries(board)]
    exprs += [sel for board in dashboards().values() for sel in _variable_selectors(board)]
    wrapped = [{"record": f"dashboard:query_{i}", "expr": grafana_to_promql(e)} for i, e in enumerate(exprs)]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": wrapped}]}))
    result = promtool("check", "rules", tmp_path / "queries.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout
