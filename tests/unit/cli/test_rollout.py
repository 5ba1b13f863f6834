"""`triton-gke rollout`'s command line (triton_gke/cli/rollout.py) before any process: its help, the one-line
refusal without a Pulumi CLI, and bad changes refused before anything is written. The runs through the Automation
API are tests/live/cli/test_rollout.py."""

from __future__ import annotations

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.cli import rollout
from triton_gke.cli.main import main as triton_gke


def test_help_names_every_mode_and_the_route(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        triton_gke(["rollout", "--help"])
    assert stopped.value.code == 0
    text = capsys.readouterr().out
    for words in ("--resume", "--abort", "--status", "--change KEY=VALUE", "--prometheus REGION=URL", "port-forward"):
        assert words in text


def test_without_a_pulumi_cli_it_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no pulumi
    monkeypatch.chdir(PROJECT_DIR)
    assert rollout.main(["--stack", "prod", "--change", "tritonImageTag=25.05-py3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: triton-gke rollout: no Pulumi CLI on PATH") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ("capacityScalerPercent=5", "expected KEY=VALUE with KEY one of tritonImageTag, autoscaleQueueTimeMs"),
        ("modelHold=1", "expected KEY=VALUE"),
        ("autoscaleQueueTimeMs=70000", "triton-gke:regionOverrides: 'us-central1 autoscaleQueueTimeMs=70000'"),
        ("tritonImageTag=24.99-py3", "triton-gke:regionOverrides: us-central1 tritonImageTag: "),
    ],
)
def test_a_change_the_stack_would_refuse_is_one_line_before_the_stack_is_touched(
    change: str, refusal: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pulumi").write_text("")  # never run (a unit test starts no process): the refusal is first
    monkeypatch.chdir(PROJECT_DIR)
    prometheus = [f"--prometheus={r}=http://127.0.0.1:9" for r in ("us-central1", "europe-west4", "asia-east1")]
    assert rollout.main(["--stack", "prod", "--pulumi-root", str(tmp_path), *prometheus, "--change", change]) == 2
    err = capsys.readouterr().err
    assert refusal in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("words", "refusal"),
    [(["--resume", "--change", "tritonImageTag=x"], "leave them out"), ([], "name the change")],
)
def test_a_bad_command_line_is_one_line(words: list[str], refusal: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        rollout.main(["--stack", "prod", *words])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and refusal in err and err.count("\n") == 1
