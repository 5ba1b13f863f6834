"""`triton-gke e2e` against recorded tool output: fake pulumi, gcloud, kubectl (tests/support/fake_cli.py, the gcloud
one through tests/support/fake_gcloud.py) answer from tests/data/e2e/, so the order of the steps, the parsing of
the outputs and listings, and the refusal without credentials are the command's own. Live: it starts processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.fake_cli import install_fake_cli, logged_calls
from tests.support.fake_gcloud import install_fake_gcloud
from triton_gke.cli import e2e

DATA = PROJECT_DIR / "tests" / "data" / "e2e"
LISTED = ["clusters", "network-endpoint-groups", "disks", "firewall-rules", "addresses", "buckets"]
CHECKS = ["gcloud auth", "gcloud auth", "pulumi whoami", "pulumi config"]


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the clean recording, the fakes alone on PATH, and the log of their calls."""
    folder = tmp_path / "scenario"
    shutil.copytree(DATA / "clean", folder)
    bin_dir = tmp_path / "bin"
    install_fake_gcloud(bin_dir)
    for tool in ("pulumi", "kubectl", "triton-gke", "locust"):
        install_fake_cli(bin_dir, tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_CLI_DIR", str(folder))
    monkeypatch.setenv("FAKE_CLI_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("FAKE_CLI_ENV", "saddr,inference_headers,TRITON_INFERENCE_KEY_HEADER,TRITON_INFERENCE_KEY")
    return folder


def run_e2e(folder: Path) -> int:
    """The command's run with the fakes: smoke and Locust from PATH too (the CLI takes them from its install)."""
    bin_dir = Path(os.environ["PATH"])
    tools = e2e.Tools(
        pulumi=str(bin_dir / "pulumi"),
        gcloud=str(bin_dir / "gcloud"),
        kubectl=str(bin_dir / "kubectl"),
        smoke=(str(bin_dir / "triton-gke"), "smoke"),
        locust=str(bin_dir / "locust"),
    )
    args = Namespace(stack="dev", locust_seconds=5, rate=1.0, users=1, model="original")
    return e2e.run(args, tools)


def steps(folder: Path) -> list[str]:
    """Each logged call as TOOL and its first word (its second for gcloud compute/container/storage listings)."""
    calls = logged_calls(Path(os.environ["FAKE_CLI_LOG"]))
    named = []
    for call in calls:
        args = call["args"] or [""]
        word = args[1] if args[0] in ("compute", "container", "storage") else args[0]
        named.append(f"{call['tool']} {word}" if call["tool"] in ("gcloud", "pulumi") else call["tool"])
    return named


def test_a_clean_run_goes_up_checks_destroys_and_lists_in_order(scenario, capsys):
    assert run_e2e(scenario) == 0
    assert steps(scenario) == [
        *CHECKS,
        "pulumi up",
        "pulumi stack",
        "kubectl",
        "triton-gke",
        "locust",
        "pulumi destroy",
        *(f"gcloud {word}" for word in LISTED),
    ]
    calls = logged_calls(Path(os.environ["FAKE_CLI_LOG"]))
    smoke, locust = calls[7], calls[8]
    header = json.loads((scenario / "outputs.json").read_text())["inferenceKeyHeader"]
    assert smoke["args"] == ["smoke", "http://127.0.0.1:41234"]
    assert smoke["env"]["TRITON_INFERENCE_KEY_HEADER"] == header
    assert smoke["env"]["TRITON_INFERENCE_KEY"] == "e2e-recorded-key"
    assert locust["env"] == {"saddr": "127.0.0.1:41234", "inference_headers": f"{header}=e2e-recorded-key"}
    assert "-t" in locust["args"] and locust["args"][locust["args"].index("-t") + 1] == "5s"
    assert "LEFT" not in capsys.readouterr().err


def test_an_orphaned_neg_in_the_listing_fails_naming_it(scenario, capsys):
    shutil.copy(DATA / "orphaned-neg" / "network-endpoint-groups.json", scenario)
    assert run_e2e(scenario) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if "LEFT" in line or "FAILED" in line]
    assert lines == ["e2e: LEFT: NEG triton-dev-us-central1-http (us-central1-a)"]


def test_a_failing_up_still_destroys_and_lists(scenario, capsys):
    calls = json.loads((scenario / "calls.json").read_text())
    up = next(call for call in calls["pulumi"] if call["args"][0] == "up")
    up |= {"rc": 255, "stderr": "error: update failed\n"}
    (scenario / "calls.json").write_text(json.dumps(calls))
    assert run_e2e(scenario) == 1
    assert steps(scenario) == [*CHECKS, "pulumi up", "pulumi destroy", *(f"gcloud {word}" for word in LISTED)]
    assert "e2e: FAILED: pulumi up --stack dev failed (exit 255)" in capsys.readouterr().err


def cli(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The console's own path: triton_gke.cli.main e2e --stack dev, in this checkout."""
    code = "import sys; from triton_gke.cli.main import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, "e2e", "--stack", "dev"],
        env=env | {"PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_refused(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: triton-gke e2e: ") and words in done.stderr, done.stderr


def test_without_the_tools_it_refuses_in_one_line_and_calls_nothing(tmp_path, scenario):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    done = cli(dict(os.environ) | {"PATH": str(empty)})
    assert_refused(done, "pulumi and gcloud and kubectl not on PATH")
    assert steps(scenario) == []


def test_without_a_gcloud_account_it_refuses_before_anything_is_created(scenario):
    (scenario / "auth-list.json").write_text("[]\n")
    done = cli(dict(os.environ))
    assert_refused(done, "no active gcloud account: run `gcloud auth login`")
    assert steps(scenario) == ["gcloud auth"]


def test_without_a_pulumi_login_it_refuses_before_anything_is_created(scenario):
    calls = json.loads((scenario / "calls.json").read_text())
    calls["pulumi"][0] |= {"rc": 255, "stdout": "", "stderr": "error: PULUMI_ACCESS_TOKEN must be set for login\n"}
    (scenario / "calls.json").write_text(json.dumps(calls))
    done = cli(dict(os.environ))
    assert_refused(done, "pulumi is not logged in (error: PULUMI_ACCESS_TOKEN must be set for login)")
    assert steps(scenario) == ["gcloud auth", "gcloud auth", "pulumi whoami"]
