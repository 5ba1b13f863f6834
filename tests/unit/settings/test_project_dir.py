"""The project a command acts on is the current folder (contracts/paths.py project_dir): build outputs, stack
files, the sandbox lock and the rebuild hints follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.one_line import MAKE_TARGET_ENV, model_repo_command

REPO = PROJECT_DIR


def test_hints_name_make_only_where_make_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton_gke.model_repo.manifest import rebuild

    monkeypatch.delenv(MAKE_TARGET_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # a project of a user's: no Makefile of this repository
    assert model_repo_command("dev") == "triton-gke model-repo --stack dev"
    assert rebuild() == "rebuild with triton-gke model-repo"
    assert model_repo_command("dev", ["--set", "a=b c"]) == "triton-gke model-repo --stack dev --set 'a=b c'"
    monkeypatch.setenv(MAKE_TARGET_ENV, "plan")  # run through make
    assert model_repo_command("dev") == "make model-repo STACK=dev"
    monkeypatch.delenv(MAKE_TARGET_ENV)
    monkeypatch.chdir(REPO)  # this checkout, whose Makefile has the target
    assert rebuild("dev") == "rebuild with make model-repo STACK=dev"


def test_build_outputs_and_stack_files_follow_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triton_gke.bench.runners import runner
    from triton_gke.contracts.paths import PACKAGE_DIR
    from triton_gke.infra import model_upload
    from triton_gke.model_repo.build import default_cache_dir
    from triton_gke.offline import build_models, plan
    from triton_gke.sandbox import leftovers, single_run
    from triton_gke.settings import stack_config
    from triton_gke.settings.schema import config_schema

    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    assert model_upload.built_repository() == model_upload.BUILT_REPOSITORY == build / "model_repository"
    assert build_models.cpu_twins() == build / "model_repository_cpu"
    assert plan.default_out_dir("dev") == build / "plan" / "dev"
    assert single_run.default_lock_file() == single_run.LOCK_FILE
    assert single_run.default_lock_file() == build / "sandbox" / ".sandbox.lock"
    assert leftovers.default_state_dir() == leftovers.STATE_DIR
    assert leftovers.default_state_dir() == build / "sandbox" / ".runs"
    assert runner.bench_build_dir() == build / "bench"
    assert default_cache_dir() == build / "cache"
    with pytest.raises(FileNotFoundError, match=r"^Pulumi\.dev\.yaml: no such stack file$"):
        stack_config("dev")  # this folder has none, though the package's folder (the checkout) has one
    (tmp_path / "Pulumi.mine.yaml").write_text((REPO / "Pulumi.dev.yaml").read_text())
    assert stack_config("mine")["triton-gke:regions"] == '["us-central1"]'
    # The schema is the package's own Pulumi.yaml, wherever the project is.
    assert config_schema()[0] == "triton-gke" and (PACKAGE_DIR / "Pulumi.yaml").is_file()
