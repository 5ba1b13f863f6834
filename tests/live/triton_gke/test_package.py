"""The wheel: built from the working tree, installed in a fresh virtualenv outside the repository, used there.

What a user gets from `pip install triton_gke-*.whl`: the public components import, the data the code reads at run
time is inside the package (catalogues, capacity records, dashboards, the locustfile, the policy pack, Pulumi.yaml,
the provider's schema), and examples/on-cluster-python plans offline with the installed package's mock runtime
(`triton-gke plan-folder`), so nothing reaches back into the repository. The console script acts on the project in
the current folder (its stack file, its build/), never on site-packages, and works with the base dependencies: every
--help, `sync` (what `pulumi up` runs), and a one-line refusal naming the extra a command needs. The install reuses
pip's cache and constraints.txt's pins (about a minute warm; the first run downloads the dependencies once).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

REPO = PROJECT_DIR
EXAMPLE = REPO / "examples" / "on-cluster-python"
BUILT = REPO / "build" / "model_repository"
INSTALL_BUDGET_S = 180

CHECK_DATA = """
import importlib.resources as resources, triton_gke
root = resources.files("triton_gke")
wanted = ["Pulumi.yaml", "schema.json", "py.typed", "infra/data/gcp_regions.csv", "infra/data/gcp_t4_zones.csv",
          "infra/data/gcp_vm_prices.csv", "infra/data/gke_gpu_drivers.csv", "infra/data/replacement_rules.yaml",
          "dashboards/triton-inference.json", "loadtest/locustfile.py", "loadtest/arrivals.py",
          "policy/PulumiPolicy.yaml", "policy/requirements.txt", "policy/__main__.py"]
missing = [name for name in wanted if not root.joinpath(name).is_file()]
records = [p for p in root.joinpath("capacity/records").iterdir() if p.name.endswith(".json")]
assert not missing and records, (missing, records)
# The code finds its data from its own file (Path(__file__).parent.parent): check it reads the installed copies.
from triton_gke.settings import catalogue, schema
from triton_gke.contracts import loadtest
from triton_gke.capacity import records as capacity_records
assert schema.config_schema()[0] == "triton-gke" and catalogue.DATA_DIR.is_dir()
assert loadtest.LOCUSTFILE.is_file() and any(capacity_records.RECORDS_DIR.glob("*.json"))
for name in triton_gke.__all__[1:]:
    getattr(triton_gke, name)
from triton_gke.provider import component_classes, schema_text
assert schema_text() == root.joinpath("schema.json").read_text()
print(triton_gke.__file__)
"""


def attempt(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Without what an enclosing `make test` exports: under a make target the hints would name `make`.
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TRITON_GKE_MAKE_TARGET")
    clean = {k: v for k, v in os.environ.items() if k not in leaks}
    clean["PYTHONDONTWRITEBYTECODE"] = ""  # the venv is installed --no-compile: its first imports write the bytecode
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=clean)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = attempt(command, cwd)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def refused(command: list[str], cwd: Path) -> str:
    """The one line a refused command prints (exit 2, no traceback)."""
    result = attempt(command, cwd)
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.returncode, result.stderr[-3000:])
    (line,) = result.stderr.splitlines()
    return line


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the working tree (tracked and untracked, not ignored files), built from a copy: no build/ here."""
    work = tmp_path_factory.mktemp("wheel")
    files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], REPO).stdout.split("\0")
    source = work / "source"
    for name in filter(None, files):
        path = REPO / name
        if path.is_file() or path.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name, follow_symlinks=False)
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(work / "dist")], source)
    (built,) = (work / "dist").glob("triton_gke-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the repository with the wheel and its dependencies (pinned by constraints.txt)."""
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(root / "venv")], root)
    python = root / "venv" / "bin" / "python"
    started = time.monotonic()
    # --no-compile: byte-compiling every installed module (pulumi_gcp has thousands) cost 31 of the install's 50 CPU-s
    # here; Python compiles what the tests import on first import. What is installed is the same.
    install = [str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)]
    run([*install, "-c", str(REPO / "constraints.txt")], root)
    took = time.monotonic() - started
    print(f"wheel install: {took:.0f} s")
    assert took < INSTALL_BUDGET_S, f"installing the wheel took {took:.0f} s (budget {INSTALL_BUDGET_S} s)"
    return python


def test_installed_package_imports_components_and_carries_its_data(venv: Path, tmp_path: Path) -> None:
    out = run([str(venv), "-c", CHECK_DATA], tmp_path).stdout
    assert "site-packages/triton_gke/__init__.py" in out, out


def test_python_example_plans_offline_from_the_installed_package(venv: Path, tmp_path: Path) -> None:
    program = tmp_path / "program"
    shutil.copytree(EXAMPLE, program)
    command = [str(venv), "-m", "triton_gke.offline.runtime", str(program), "--stack", "dev", "--json"]
    plan = json.loads(run([*command, "--config", "kubeconfig=apiVersion: v1"], tmp_path).stdout)
    types = [r["type"] for r in plan["resources"]]
    assert "triton-gke:index:TritonOnCluster" in types and "pulumi:providers:kubernetes" in types
    deployments = [r for r in plan["resources"] if r["type"] == "kubernetes:apps/v1:Deployment"]
    images = [c["image"] for d in deployments for c in d["inputs"]["spec"]["template"]["spec"]["containers"]]
    assert any(image.startswith("nvcr.io/nvidia/tritonserver:") for image in images), images
    assert types.count("kubernetes:core/v1:Service") >= 1
    assert {"namespace", "http_endpoint", "grpc_endpoint"} <= set(plan["outputs"])


def test_python_example_without_kubeconfig_uses_its_own_provider(venv: Path, tmp_path: Path) -> None:
    program = tmp_path / "program"
    shutil.copytree(EXAMPLE, program)
    command = [str(venv.parent / "triton-gke"), "plan-folder", str(program), "--json"]
    plan = json.loads(run(command, tmp_path).stdout)
    providers = [r for r in plan["resources"] if r["type"] == "pulumi:providers:kubernetes"]
    assert [p["name"] for p in providers] == ["cluster"] and providers[0]["parent"] is None
    deployments = [r for r in plan["resources"] if r["type"] == "kubernetes:apps/v1:Deployment"]
    assert deployments and all(d["provider"] == "cluster" for d in deployments)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project folder outside the repository: its own stack file and stack program, no build yet."""
    folder = tmp_path / "my-project"
    folder.mkdir()
    (folder / "Pulumi.dev.yaml").write_text((REPO / "Pulumi.dev.yaml").read_text())
    shutil.copy(REPO / "__main__.py", folder)
    return folder


def test_installed_commands_act_on_the_current_project_folder(venv: Path, project: Path) -> None:
    triton_gke = str(venv.parent / "triton-gke")
    # The project's stack file is read (no "no such stack file"); its own build is what is missing, and the hint
    # names the console script: an installed package has no Makefile.
    line = refused([triton_gke, "plan", "--stack", "dev"], project)
    assert (
        line
        == "error: build/model_repository: no model repository built; run `triton-gke model-repo --stack dev` first"
    )
    if not (BUILT / ".model_repo.json").is_file():
        pytest.skip("the rest needs `make model-repo STACK=dev` (build/model_repository) in the repository")
    (project / "build").mkdir()
    (project / "build" / "model_repository").symlink_to(BUILT)
    plan = json.loads(run([triton_gke, "plan", "--stack", "dev", "--json"], project).stdout)
    assert any(r["type"] == "triton-gke:index:TritonGkeSystem" for r in plan)
    assert (project / "build" / "plan" / "dev").is_dir()  # written into the project, not into site-packages


def test_installed_commands_need_no_extra_for_help_and_name_the_missing_one(venv: Path, project: Path) -> None:
    triton_gke = str(venv.parent / "triton-gke")
    for words in (["model-repo"], ["model-repo", "custom"], ["lifecycle-table"], ["sandbox"], ["bench"]):
        assert run([triton_gke, *words, "--help"], project).stdout.startswith(f"usage: triton-gke {' '.join(words)}")
    assert run([triton_gke, "bench", "pa-rates", "--help"], project).stdout.startswith("usage: triton-gke bench")
    assert refused([triton_gke, "sandbox"], project) == (
        "error: triton-gke sandbox needs the 'local' extra: pip install 'triton-gke[local]'"
    )
    assert refused([triton_gke, "model-repo", "--stack", "dev"], project) == (
        "error: triton-gke model-repo needs the 'models' extra: pip install 'triton-gke[models]'"
    )
    # What `pulumi up` runs, with the base dependencies alone: the sync (its .onnx check) and the NEG cleanup.
    run([str(venv), "-c", "import onnx.checker, triton_gke.model_repo.sync, triton_gke.infra.neg_cleanup"], project)
    line = refused([triton_gke, "sync", "nonexist", "gs://bucket/models", "--dry-run"], project)
    assert line == "error: local model repository not found: nonexist"
    schema = venv.parent.parent / "lib"
    line = refused([triton_gke, "provider", "--write-schema"], project)
    assert line.startswith("error: triton-gke provider: --write-schema: ") and "site-packages" in line, line
    assert [p for p in schema.glob("python*/site-packages/triton_gke/schema.json")], "the installed schema is gone"
