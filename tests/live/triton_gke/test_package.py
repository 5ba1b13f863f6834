"""The wheel: built from the working tree, installed in fresh virtualenvs outside the repository, used there.

What a user gets from `pip install triton_gke-*.whl`: the public components import, the data the code reads at run
time is inside the package (catalogues, capacity records, dashboards, the locustfile, the policy pack, Pulumi.yaml,
the provider's schema), and examples/on-cluster-python plans offline with the installed package's mock runtime
(`triton-gke plan-folder`), so nothing reaches back into the repository. The console script acts on the project in
the current folder (its stack file, its build/), never on site-packages, and works with the base dependencies: every
--help, `sync` (what `pulumi up` runs), and a one-line refusal naming the extra a command needs.

The tests run twice, in two virtualenvs with the wheel and only its declared ranges (no constraints file, as a user
installs it; tests/support/wheel_installs.py): at the highest versions they allow and at the lowest (uv's
lowest-direct, which must reach every declared lower bound). In both, TritonOnCluster with monitoring plans under the
mock runtime and `triton-gke dashboards` writes exactly the committed dashboards: the Grafana SDK's versions carry an
epoch, and a range without an upper bound inside it installed the Grafana 10.1 SDK, which this code cannot use.
The installs share a uv cache in this run's own temporary folder (a fresh run downloads everything once, nothing
from an earlier run is reused); each prints its time (`-s`), which is reported, not asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.support import wheel_installs
from tests.support.checkout import PROJECT_DIR
from tests.support.wheel_installs import Installed
from tests.unit.triton_gke.test_release import CHANGELOG, newest_release, static_version

REPO = PROJECT_DIR
EXAMPLE = REPO / "examples" / "on-cluster-python"
BUILT = REPO / "build" / "model_repository"
DASHBOARDS = REPO / "dashboards"
RELEASE = newest_release(CHANGELOG.read_text(encoding="utf-8"))
# The versions each install's report line names.
REPORTED = ("pulumi", "pulumi-gcp", "pulumi-kubernetes", "grafana-foundation-sdk", "google-cloud-storage", "onnx")

# TritonOnCluster with everything that builds Grafana's dashboards (monitoring) and reads them (autoscaling needs
# monitoring's metrics adapter; monitoring needs the load test), as a user's program would declare it.
MONITORED_PROGRAM = """
import pulumi
from triton_gke import TritonOnCluster

triton = TritonOnCluster(
    "triton",
    {
        "model_repository": "gs://example-models/triton",
        "kubeconfig": "apiVersion: v1",
        "min_replicas": 1,
        "max_replicas": 2,
        "autoscaling": True,
        "monitoring": True,
        "load_test": True,
    },
)
pulumi.export("namespace", triton.namespace)
"""

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
# The code finds its data from contracts/paths.py (the package's own folder): check it reads the installed copies.
from triton_gke.settings import catalogue, schema
from triton_gke.contracts import paths
from triton_gke.capacity import records as capacity_records
assert schema.config_schema()[0] == "triton-gke" and catalogue.DATA_DIR.is_dir()
assert paths.LOCUSTFILE.is_file() and any(capacity_records.RECORDS_DIR.glob("*.json"))
assert str(paths.PACKAGE_DIR) == str(root) and paths.checkout_dir() is None
for name in triton_gke.__all__[1:]:
    getattr(triton_gke, name)
from triton_gke.provider import component_classes, schema_text
assert schema_text() == root.joinpath("schema.json").read_text()
print(triton_gke.__file__)
"""


def attempt(command: list[str], cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Without what an enclosing `make test` exports: under a make target the hints would name `make`.
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TRITON_GKE_MAKE_TARGET")
    clean = {k: v for k, v in os.environ.items() if k not in leaks}
    clean["PYTHONDONTWRITEBYTECODE"] = ""  # the venv is installed --no-compile: its first imports write the bytecode
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=clean | (extra or {}))


def run(command: list[str], cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = attempt(command, cwd, extra)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def refused(command: list[str], cwd: Path) -> str:
    """The one line a refused command prints (exit 2, no traceback)."""
    result = attempt(command, cwd)
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.returncode, result.stderr[-3000:])
    (line,) = result.stderr.splitlines()
    return line


# Git in a copy, whatever the user's git configuration asks (signing, hooks).
GIT = ["git", "-c", "user.name=release", "-c", "user.email=release@example.invalid", "-c", "commit.gpgsign=false",
       "-c", "tag.gpgsign=false", "-c", "core.hooksPath=/dev/null"]  # fmt: skip


def build_wheel(source: Path, dist: Path, epoch: str | None = None) -> Path:
    """`pip wheel .` in `source`; `epoch` as SOURCE_DATE_EPOCH (the wheel's timestamps), as docs/library.md builds."""
    extra = {"SOURCE_DATE_EPOCH": epoch} if epoch else {}
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(dist)], source, extra)
    (built,) = dist.glob("triton_gke-*.whl")
    return built


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree (tracked and untracked, not ignored files: no build/ here), committed in a git
    repository of its own with no tag at all, as a clone of this repository is."""
    source = tmp_path_factory.mktemp("wheel") / "source"
    files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], REPO).stdout.split("\0")
    for name in filter(None, files):
        path = REPO / name
        if path.is_file() or path.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name, follow_symlinks=False)
            if not path.is_symlink():  # the modes git records (644, 755), as a checkout under umask 022 has them
                (source / name).chmod(0o755 if path.stat().st_mode & 0o100 else 0o644)
    run([*GIT, "init", "-q"], source)
    run([*GIT, "add", "-A"], source)
    run([*GIT, "commit", "-q", "-m", "the working tree"], source)
    return source


def commit_time(source: Path) -> str:
    return run(["git", "log", "-1", "--format=%ct", "HEAD"], source).stdout.strip()


@pytest.fixture(scope="module")
def wheel(source: Path) -> Path:
    """The wheel built from the commit, its timestamps the commit's (SOURCE_DATE_EPOCH)."""
    return build_wheel(source, source.parent / "dist", commit_time(source))


def test_the_wheel_is_the_static_version(wheel: Path, highest: Installed) -> None:
    """The version is pyproject.toml's, the newest release in CHANGELOG.md, with no tag in the repository: the
    wheel's name, its metadata and the installed package's __version__ (what the component provider reports to
    Pulumi) all say it."""
    assert static_version() == RELEASE and wheel.name == f"triton_gke-{RELEASE}-py3-none-any.whl"
    out = run([str(highest.python), "-c", "import triton_gke; print(triton_gke.__version__)"], wheel.parent).stdout
    assert out.strip() == RELEASE


def test_a_git_archive_builds_the_same_wheel_byte_for_byte(source: Path, wheel: Path) -> None:
    """`git archive HEAD` holds no .git, and needs none: the version is static. Built with the same
    SOURCE_DATE_EPOCH from the archive, the wheel is the checkout's, byte for byte (tar.umask 022: the wheel records
    file modes)."""
    archive = source.parent / "archive.tar"
    run([*GIT, "-c", "tar.umask=0022", "archive", "-o", str(archive), "HEAD"], source)
    unpacked = source.parent / "unpacked"
    unpacked.mkdir()
    run(["tar", "-xf", str(archive), "-C", str(unpacked)], unpacked)
    built = build_wheel(unpacked, source.parent / "dist-archive", commit_time(source))
    assert built.name == wheel.name and built.read_bytes() == wheel.read_bytes()


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two installs' shared download cache: this run's own, empty at first."""
    return tmp_path_factory.mktemp("uv-cache")


def installed(resolution: str, wheel: Path, cache: Path, factory: pytest.TempPathFactory) -> Installed:
    result = wheel_installs.install(wheel, factory.mktemp(f"venv-{resolution}"), resolution, cache)
    print(wheel_installs.report(result, REPORTED))
    return result


@pytest.fixture(scope="module")
def highest(wheel: Path, uv_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel at the highest versions its declared ranges allow: what `pip install WHEEL` gives a user today."""
    return installed("highest", wheel, uv_cache, tmp_path_factory)


@pytest.fixture(scope="module")
def lowest(wheel: Path, uv_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel at the lowest versions its declared ranges allow (the direct ones; what they pull in: highest)."""
    return installed("lowest-direct", wheel, uv_cache, tmp_path_factory)


@pytest.fixture(scope="module", params=["highest", "lowest"])
def venv(request: pytest.FixtureRequest) -> Path:
    """The python of a fresh virtualenv with the wheel and only its declared ranges: at the top, then the bottom."""
    return request.getfixturevalue(request.param).python


def test_lowest_install_gets_every_declared_lower_bound(lowest: Installed) -> None:
    # A lower bound that cannot be installed (pulumi>=3.200 while every provider needs 3.231) or a range with none
    # claims versions nobody tested; the other tests run at exactly these bounds.
    assert wheel_installs.unreached_lower_bounds(lowest) == []


def test_highest_install_takes_the_grafana_sdk_the_code_is_written_for(highest: Installed) -> None:
    # The SDK's versions are EPOCH!GRAFANA_VERSION with a higher epoch for an older Grafana within one release, so
    # `>=1769699379!11.6.0` alone resolved to 1769699998!10.1.0 (the Grafana 10.1 SDK: an AttributeError at run time).
    sdk = highest.versions[canonicalize_name("grafana-foundation-sdk")]
    assert (sdk.epoch, sdk.release[:2]) == (1769699379, (11, 6)), sdk


def test_monitoring_component_and_dashboards_work_at_these_versions(venv: Path, tmp_path: Path) -> None:
    program = tmp_path / "program"
    shutil.copytree(EXAMPLE, program)
    (program / "__main__.py").write_text(MONITORED_PROGRAM)
    command = [str(venv), "-m", "triton_gke.offline.plan_folder", str(program), "--stack", "dev", "--json"]
    plan = json.loads(run(command, tmp_path).stdout)
    types = [r["type"] for r in plan["resources"]]
    assert "triton-gke:index:TritonOnCluster" in types and "kubernetes:autoscaling/v2:HorizontalPodAutoscaler" in types
    (boards,) = [r for r in plan["resources"] if r["name"].endswith("grafana-dashboards")]
    committed = {p.name: p.read_text() for p in DASHBOARDS.glob("*.json")}
    assert committed and boards["inputs"]["data"] == committed  # the SDK at these versions builds the same JSON
    # The console script, in a user's project folder: writes them, then finds them current.
    project = tmp_path / "project"
    project.mkdir()
    triton_gke = str(venv.parent / "triton-gke")
    written = run([triton_gke, "dashboards"], project).stdout.split()
    assert sorted(Path(p).name for p in written) == sorted(committed)
    assert {p.name: p.read_text() for p in (project / "dashboards").iterdir()} == committed
    run([triton_gke, "dashboards", "--check"], project)


def test_installed_package_imports_components_and_carries_its_data(venv: Path, tmp_path: Path) -> None:
    out = run([str(venv), "-c", CHECK_DATA], tmp_path).stdout
    assert "site-packages/triton_gke/__init__.py" in out, out


def test_python_example_plans_offline_from_the_installed_package(venv: Path, tmp_path: Path) -> None:
    program = tmp_path / "program"
    shutil.copytree(EXAMPLE, program)
    command = [str(venv), "-m", "triton_gke.offline.plan_folder", str(program), "--stack", "dev", "--json"]
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
        "error: triton-gke sandbox needs the 'local' extra: reinstall triton-gke from its wheel or checkout with "
        "[local] (in a checkout: pip install '.[local]')"
    )
    assert refused([triton_gke, "model-repo", "--stack", "dev"], project) == (
        "error: triton-gke model-repo needs the 'models' extra: reinstall triton-gke from its wheel or checkout "
        "with [models] (in a checkout: pip install '.[models]')"
    )
    # What `pulumi up` runs, with the base dependencies alone: the sync (its .onnx check) and the NEG cleanup.
    run([str(venv), "-c", "import onnx.checker, triton_gke.model_repo.sync, triton_gke.infra.neg_cleanup"], project)
    line = refused([triton_gke, "sync", "nonexist", "gs://bucket/models", "--dry-run"], project)
    assert line == "error: local model repository not found: nonexist"
    schema = venv.parent.parent / "lib"
    line = refused([triton_gke, "provider", "--write-schema"], project)
    assert line.startswith("error: triton-gke provider: --write-schema: ") and "site-packages" in line, line
    assert [p for p in schema.glob("python*/site-packages/triton_gke/schema.json")], "the installed schema is gone"
