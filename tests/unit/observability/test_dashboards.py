"""observability.dashboards: committed JSON equals the code's, titles, panels, the SLO line."""

from __future__ import annotations

from typing import Any

import pytest

from triton_gke.contracts.paths import DASHBOARD_DIR
from triton_gke.observability.dashboards import dashboards, stale_dashboards
from triton_gke.observability.settings import SloSettings


def test_committed_dashboards_equal_what_the_code_generates() -> None:
    assert stale_dashboards(DASHBOARD_DIR) == [], "run `triton-gke dashboards` and commit dashboards/"


def test_dashboards_have_titles_panels_and_variables() -> None:
    boards = dashboards()
    titles = {name: board["title"] for name, board in boards.items()}
    assert titles == {
        "triton-inference.json": "Triton inference service",
        "triton-gpus.json": "Triton GPUs",
        "triton-load-test.json": "Triton load test",
    }
    for board in boards.values():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        assert variables["region"]["query"] == "label_values(up, region)"
        ids = [panel["id"] for panel in board["panels"]]
        assert len(ids) == len(set(ids)) and board["uid"]
        for panel in board["panels"]:
            assert panel["title"] and panel["description"] and panel["targets"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert all('region="$region"' in target["expr"] for target in panel["targets"])
        _assert_no_overlap([panel["gridPos"] for panel in board["panels"]])
    inference = [panel["title"] for panel in boards["triton-inference.json"]["panels"]]
    for wanted in (
        "Requests per second",
        "p95 latency vs SLO",
        "Queue vs compute time per request",
        "Achieved batch size",
        "Share of requests per pod",
        "Failed requests per second",
    ):
        assert wanted in inference


def _assert_no_overlap(positions: list[dict[str, int]]) -> None:
    cells = set()
    for pos in positions:
        assert pos["x"] + pos["w"] <= 24
        area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & area, f"panels overlap at {pos}"
        cells |= area


def _threshold_lines(board: dict[str, Any]) -> dict[str, list[float]]:
    lines = {}
    for panel in board["panels"]:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        if panel["fieldConfig"]["defaults"].get("custom", {}).get("thresholdsStyle", {}).get("mode", "off") != "off":
            lines[panel["title"]] = [s["value"] for s in steps if s["value"] is not None]
    return lines


@pytest.mark.parametrize("latency_ms", [100, 250])
def test_slo_threshold_line_is_the_slo_latency(latency_ms: int) -> None:
    boards = dashboards(SloSettings(latency_ms=latency_ms))
    assert _threshold_lines(boards["triton-inference.json"])["p95 latency vs SLO"] == [latency_ms]
    assert _threshold_lines(boards["triton-load-test.json"])["Response time p50 / p95 (client side)"] == [latency_ms]
    assert _threshold_lines(boards["triton-inference.json"])["Failure ratio"] == [SloSettings().max_failure_ratio]


def test_the_default_folder_in_the_checkout_is_the_package_s_own(monkeypatch, tmp_path) -> None:
    """In this repository the top-level dashboards/ is a link into triton_gke/, which `--out` refuses: the default
    is the folder the link points to (red team: `make dashboards` failed with "is a symbolic link")."""
    from tests.support.checkout import PROJECT_DIR
    from triton_gke.observability.__main__ import default_out, main

    monkeypatch.chdir(PROJECT_DIR)
    assert default_out() == DASHBOARD_DIR and (PROJECT_DIR / "dashboards").resolve() == DASHBOARD_DIR
    assert main(["--check"]) == 0
    monkeypatch.chdir(tmp_path)  # a user's project: its own dashboards/
    assert default_out() == tmp_path / "dashboards"


def test_check_names_a_missing_dashboard_as_missing(monkeypatch, tmp_path, capsys) -> None:
    from triton_gke.observability.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main(["--check"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.endswith(": missing; run `triton-gke dashboards`") for line in lines)
