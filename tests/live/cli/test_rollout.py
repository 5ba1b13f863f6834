"""`triton-gke rollout` through the real Automation API (pulumi.automation: PulumiCommand(root=...), LocalWorkspace,
Stack.select, set_config, preview with engine events over gRPC, up) against a fake `pulumi` (tests/support/fake_cli.py)
that records its arguments and answers with the recorded preview events of tests/data/rollout/; each region's gate
reads a local HTTP server answering Prometheus' instant-query API. Live: it starts processes."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.fake_cli import install_fake_cli, logged_calls
from triton_gke.cli import rollout
from triton_gke.cli.rollout_machine import (
    Gate,
    GateFigures,
    RolloutPlan,
    applied,
    from_json,
    gated,
    next_action,
    start,
    to_json,
)

DATA = PROJECT_DIR / "tests" / "data" / "rollout"
STACK = "prod"
OVERRIDES = "triton-gke:regionOverrides"
CANARY, SECOND, THIRD = "us-central1", "europe-west4", "asia-east1"
NEW = "25.05-py3"
# When the Automation API runs the CLI (pulumi/automation/_stack.py preview and up, _local_workspace.py set_config,
# get_all_config, stack_outputs; history() for up's summary): the stack's name last, as _run_pulumi_cmd_sync adds it.
PREVIEW = ["preview", "--exec-kind", "auto.local", "--event-log", "*", "--stack", STACK]
UP = ["up", "--yes", "--skip-preview", "--exec-kind", "auto.local", "--stack", STACK]
HISTORY = {
    "kind": "update",
    "startTime": "2026-12-07T03:00:00.000000Z",
    "endTime": "2026-12-07T03:01:00.000000Z",
    "message": "",
    "environment": {},
    "config": {},
    "result": "succeeded",
    "resourceChanges": {"update": 1, "same": 231},
}


def items(*regions_pins: tuple[str, str]) -> str:
    """regionOverrides as the rollout writes it (settings/region_overrides.py as_items, then json.dumps)."""
    return json.dumps([f"{region} {pins}" for region, pins in regions_pins])


def calls(previews: list[tuple[str, str]], up_rc: int = 0) -> dict[str, Any]:
    """The fake pulumi's answers; previews: (regionOverrides value, events file) in order of preference."""
    pulumi = [
        {"args": ["version"], "stdout": "v3.272.0\n"},
        {"args": ["stack", "select", "--stack", STACK]},
        {"args": ["config", "--show-secrets", "--json", "--stack", STACK], "stdout": "=config"},
        {"args": ["config", "set", "*", "--plaintext", "--stack", STACK, "--non-interactive", "--", "*"]},
        *({"args": PREVIEW, "config": {OVERRIDES: value}, "events": f"@{events}"} for value, events in previews),
        {"args": UP, "stdout": "Updating (prod)\n", "stderr": "error: boom\n" if up_rc else "", "rc": up_rc},
        {"args": ["stack", "output", "--json", "--stack", STACK], "stdout": "{}"},
        {"args": ["stack", "output", "--json", "--show-secrets", "--stack", STACK], "stdout": "{}"},
        {
            "args": [
                "stack",
                "history",
                "--json",
                "--show-secrets",
                "--page-size",
                "1",
                "--page",
                "1",
                "--stack",
                STACK,
            ],
            "stdout": json.dumps([HISTORY]),
        },
    ]
    # PulumiCommand.run puts --non-interactive first where a command's words lack it (pulumi/automation/_cmd.py;
    # set_config passes it itself); version is run directly by PulumiCommand's constructor.
    for call in pulumi[1:]:
        if "--non-interactive" not in call["args"]:
            call["args"] = ["--non-interactive", *call["args"]]
    return {"pulumi": pulumi}


GOOD = [
    (items((CANARY, "capacityScalerPercent=10")), "scaler.jsonl"),
    (items((CANARY, f"tritonImageTag={NEW} capacityScalerPercent=10")), f"change-{CANARY}.jsonl"),
    (items((CANARY, f"tritonImageTag={NEW}")), "scaler.jsonl"),
    (items((CANARY, f"tritonImageTag={NEW}"), (SECOND, f"tritonImageTag={NEW}")), f"change-{SECOND}.jsonl"),
    (
        items((CANARY, f"tritonImageTag={NEW}"), (SECOND, f"tritonImageTag={NEW}"), (THIRD, f"tritonImageTag={NEW}")),
        f"change-{THIRD}.jsonl",
    ),
    # The canary's way back after a breach: its old pins, still weighted down, then ramped.
    (items((CANARY, "capacityScalerPercent=10")), "scaler.jsonl"),
    ("[]", "scaler.jsonl"),
]


class Prometheus(BaseHTTPRequestHandler):
    """GET /REGION/api/v1/query: the region's p95 (ms) or error ratio as an instant vector."""

    p95: dict[str, float] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        region = url.path.split("/")[1]
        query = parse_qs(url.query)["query"][0]
        value = self.p95[region] if query.startswith("max(") else 0.001
        body = {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, str(value)]}]},
        }
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[tuple[str, type[Prometheus]]]:
    handler = type("RegionPrometheus", (Prometheus,), {"p95": {CANARY: 80.0, SECOND: 80.0, THIRD: 80.0}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with bin/pulumi (the fake; PulumiCommand(root=) runs ROOT/bin/pulumi), its scenario and log."""
    folder = tmp_path / "scenario"
    folder.mkdir()
    for name in DATA.iterdir():
        shutil.copy(name, folder / name.name)
    install_fake_cli(tmp_path / "root" / "bin", "pulumi")
    monkeypatch.setenv("FAKE_CLI_DIR", str(folder))
    monkeypatch.setenv("FAKE_CLI_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.chdir(PROJECT_DIR)  # the project folder: Pulumi.prod.yaml, as `pulumi` finds it
    return folder


def run(fake: Path, url: str, *words: str, previews: list[tuple[str, str]] = GOOD, up_rc: int = 0) -> int:
    (fake / "calls.json").write_text(json.dumps(calls(previews, up_rc)))
    gates = [f"--prometheus={r}={url}/{r}" for r in (CANARY, SECOND, THIRD)]
    root = str(fake.parent / "root")
    return rollout.main(
        ["--stack", STACK, "--pulumi-root", root, "--windows", "2", "--window-seconds", "0", *gates, *words]
    )


def pulumi_calls() -> list[list[str]]:
    """The fake's calls, without the --non-interactive the Automation API puts first."""
    calls = [c["args"] for c in logged_calls(Path(os.environ["FAKE_CLI_LOG"])) if c["tool"] == "pulumi"]
    return [args[1:] if args[:1] == ["--non-interactive"] else args for args in calls]


def overrides_set() -> list[str]:
    return [a[-1] for a in pulumi_calls() if a[:3] == ["config", "set", OVERRIDES]]


def stored(fake: Path) -> Any:
    states = [a[-1] for a in pulumi_calls() if a[:3] == ["config", "set", rollout.STATE_KEY]]
    return from_json(states[-1])


def test_a_good_change_reaches_every_region_one_step_at_a_time(fake, prometheus, capsys):
    url, _ = prometheus
    assert run(fake, url, "--change", f"tritonImageTag={NEW}") == 0
    words = [a[0] for a in pulumi_calls() if a[0] in ("preview", "up")]
    assert words == ["preview", "up"] * 5  # drain, change, ramp of the canary; then one change per wave
    assert overrides_set() == [value for value, _ in GOOD[:5]]
    state = stored(fake)
    assert state.outcome == "passed" and [g.region for g in state.gates] == [CANARY, SECOND, THIRD]
    out = capsys.readouterr().out
    assert "rollout passed" in out and f"{CANARY}: passed: p95 ms [80.0, 80.0] (SLO 100)" in out


def test_a_canary_breach_reverts_the_canary_only_and_stops_with_the_figures(fake, prometheus, capsys):
    url, handler = prometheus
    handler.p95[CANARY] = 150.0
    assert run(fake, url, "--change", f"tritonImageTag={NEW}") == 1
    assert overrides_set() == [GOOD[0][0], GOOD[1][0], GOOD[5][0], "[]"]  # drain, change, revert, ramp
    assert not any(SECOND in v or THIRD in v for v in overrides_set())  # the other regions were never touched
    out = capsys.readouterr().out
    assert "rollout breach" in out and f"{CANARY}: BREACH: p95 ms [150.0, 150.0] (SLO 100)" in out


def test_a_gpu_pool_replacement_in_a_preview_is_refused_before_any_region_changes(fake, prometheus, capsys):
    url, _ = prometheus
    previews = [(GOOD[0][0], "gpu-pool-replaced.jsonl"), *GOOD[1:]]
    assert run(fake, url, "--change", f"tritonImageTag={NEW}", previews=previews) == 1
    assert not any(a[0] == "up" for a in pulumi_calls())
    assert overrides_set() == [GOOD[0][0], "[]"]  # the step's value, then the config as the stack runs
    out = capsys.readouterr().out
    assert (
        "preview refused: replace gcp:container/nodePool:NodePool::gke-us-central1-gpu: takes down a GPU node pool"
        in out
    )


def test_a_preview_changing_a_region_outside_the_wave_is_refused(fake, prometheus, capsys):
    url, _ = prometheus
    previews = [GOOD[0], (GOOD[1][0], "outside-wave.jsonl"), *GOOD[2:]]
    assert run(fake, url, "--change", f"tritonImageTag={NEW}", previews=previews) == 1
    assert [a[0] for a in pulumi_calls() if a[0] == "up"] == ["up", "up"]  # the drain, then its ramp: nothing else
    assert "region asia-east1 is outside this step (us-central1)" in capsys.readouterr().out


def test_a_failed_up_reverts_the_wave(fake, prometheus, capsys):
    url, _ = prometheus
    assert run(fake, url, "--change", f"tritonImageTag={NEW}", up_rc=1) == 1
    assert stored(fake).outcome == "failed"
    assert "pulumi up failed" in capsys.readouterr().out


def stored_at_second_gate() -> str:
    """A rollout another operator left after the second wave's change, before its gate."""
    plan = RolloutPlan(change={"tritonImageTag": NEW}, waves=((CANARY,), (SECOND,), (THIRD,)))
    state = start(plan, {})
    while (action := next_action(state)) is not None:
        if isinstance(action, Gate) and action.regions == (SECOND,):
            break
        if isinstance(action, Gate):
            state = gated(state, [GateFigures(r, (1.0,), (0.0,), 100, 0.01, True) for r in action.regions])
        else:
            state = applied(state, action)
    return to_json(state)


def test_another_operator_resumes_the_stored_rollout(fake, prometheus, capsys):
    url, _ = prometheus
    (fake / "config.json").write_text(json.dumps({rollout.STATE_KEY: stored_at_second_gate()}))
    assert run(fake, url, "--resume") == 0
    assert overrides_set() == [GOOD[4][0]]  # only the last wave was left: gate, then its change
    assert stored(fake).outcome == "passed"


def test_abort_reverts_the_wave_in_flight(fake, prometheus, capsys):
    url, _ = prometheus
    (fake / "config.json").write_text(json.dumps({rollout.STATE_KEY: stored_at_second_gate()}))
    previews = [(items((CANARY, f"tritonImageTag={NEW}")), f"change-{SECOND}.jsonl")]
    assert run(fake, url, "--abort", previews=previews) == 1
    assert overrides_set() == [previews[0][0]]  # europe-west4 back on its last good pins (none)
    assert stored(fake).outcome == "aborted"
