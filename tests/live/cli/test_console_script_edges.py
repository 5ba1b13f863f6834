"""`triton-gke` where a red team pushed it: no extras installed, a reader that stops early, a bad --out, sync's
order of checks, a binary plan file, planning a program folder, the provider's schema.

Every refusal is one line on stderr and exit 2, never a traceback (cli/main.py, triton_gke/one_line.py).
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.cli import main as cli
from triton_gke.one_line import MAKE_TARGET_ENV

REPO = PROJECT_DIR


TRITON_GKE = Path(sys.executable).parent / "triton-gke"


EXAMPLE = REPO / "examples" / "on-cluster-python"


# The base install (pyproject.toml [project].dependencies) lacks these: the extras bring them.
EXTRA_ONLY = ("onnxruntime", "psutil", "locust", "prometheus_client", "matplotlib", "gcp_storage_emulator")


# The console script with those modules absent: sys.modules[name] = None makes their import fail as a missing one.
WITHOUT_EXTRAS = f"""
import sys
for name in {EXTRA_ONLY!r}:
    sys.modules[name] = None
from triton_gke.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


NEEDS = {
    ("model-repo",): "models",
    ("model-repo", "custom"): "models",
    ("lifecycle-table",): "models",
    ("sandbox",): "local",
    ("smoke",): "local",
    ("bench",): "local",
    ("bench", "pa-rates"): "local",
    ("bench", "report"): "local",
    ("bench", "tune"): "local",
}


def env() -> dict[str, str]:
    leaks = ("ARGS", "STACK", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", MAKE_TARGET_ENV)
    return {k: v for k, v in os.environ.items() if k not in leaks}


def run(*command: str, cwd: Path = REPO, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("capture_output", True)
    return subprocess.run(command, cwd=cwd, text=True, timeout=300, env=kwargs.pop("env", env()), **kwargs)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: "), line
    return line


# --- no extras -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("words", list(NEEDS), ids=" ".join)
def test_help_needs_no_extra(words: tuple[str, ...]) -> None:
    done = run(sys.executable, "-c", WITHOUT_EXTRAS, *words, "--help")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith(f"usage: triton-gke {' '.join(words)}"), done.stdout[:200]


@pytest.mark.parametrize("words", list(NEEDS), ids=" ".join)
def test_a_missing_extra_is_one_line_naming_it(words: tuple[str, ...], tmp_path: Path) -> None:
    extra = NEEDS[words]
    args = ["--out", str(tmp_path / "x")] if words == ("model-repo", "custom") else []
    args = [str(tmp_path)] if words == ("bench", "report") else args
    line = one_line(run(sys.executable, "-c", WITHOUT_EXTRAS, *words, *args))
    assert line == f"error: triton-gke {' '.join(words)} needs the {extra!r} extra: {cli.install_hint(extra)}"


def test_what_pulumi_up_runs_needs_no_extra() -> None:
    """`pulumi up` runs the sync (ModelUpload) and the NEG cleanup: their modules import without any extra."""
    probe = WITHOUT_EXTRAS.split("from triton_gke")[0] + (
        "import triton_gke.model_repo.sync, triton_gke.model_repo.sync_source, triton_gke.infra.neg_cleanup\n"
        "import onnx.checker\n"  # the sync's check of every .onnx it serves: a base dependency
    )
    done = run(sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr
    dependencies = (REPO / "pyproject.toml").read_text().split("[project.optional-dependencies]")[0]
    assert '"onnx>=1.23,<2"' in dependencies


# --- a reader that stops early ------------------------------------------------------------------------------------
@pytest.mark.parametrize("words", [["--help"], ["capacity", "--help"], ["provider", "--schema"]], ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(words: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte, as `| head -c 0` would be
    try:
        done = run(str(TRITON_GKE), *words, stdout=write, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode in (0, 141), (done.returncode, done.stderr)


def test_a_reader_stopping_midway_through_a_json_plan_is_quiet() -> None:
    with subprocess.Popen(
        [str(TRITON_GKE), "plan-folder", str(EXAMPLE), "--json"],
        cwd=REPO,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.read(300)
        process.stdout.close()
        error = process.stderr.read()
        process.wait(timeout=120)
    assert "Traceback" not in error and "BrokenPipeError" not in error, error
    assert process.returncode in (0, 141), process.returncode


# --- dashboards --out ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["file", "fifo", "devnull", "empty", "link", "link inside"])
def test_dashboards_out_must_be_a_plain_folder(kind: str, tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    out = {"file": "plain", "fifo": "fifo", "devnull": os.devnull, "empty": "", "link": "link", "link inside": "real"}
    (tmp_path / "plain").write_text("mine\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(target)
    if kind == "link inside":
        (target / "triton-inference.json").symlink_to(tmp_path / "plain")
    line = one_line(run(str(TRITON_GKE), "dashboards", "--out", out[kind], cwd=tmp_path))
    assert line.startswith("error: triton-gke dashboards: "), line
    assert (tmp_path / "plain").read_text() == "mine\n"  # nothing written through a link or into a file
    assert [p.name for p in target.iterdir()] == (["triton-inference.json"] if kind == "link inside" else [])


def test_dashboards_writes_into_a_new_folder_and_checks_it(tmp_path: Path) -> None:
    written = run(str(TRITON_GKE), "dashboards", "--out", "boards", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert run(str(TRITON_GKE), "dashboards", "--check", "--out", "boards", cwd=tmp_path).returncode == 0


# --- sync, plan-diff ----------------------------------------------------------------------------------------------
def test_sync_checks_the_local_source_before_credentials(tmp_path: Path) -> None:
    no_credentials = env() | {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json")}
    no_credentials.pop("STORAGE_EMULATOR_HOST", None)
    done = run(str(TRITON_GKE), "sync", "nonexist", "gs://bucket/m", "--dry-run", cwd=tmp_path, env=no_credentials)
    assert one_line(done) == "error: local model repository not found: nonexist"


def test_plan_diff_of_a_binary_file_says_it_is_binary(tmp_path: Path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00binary")
    line = one_line(run(str(TRITON_GKE), "plan-diff", str(binary), str(binary)))
    assert line == f"error: {binary}: binary data (a NUL byte at 2); not a plan file (make plan ARGS=--json)", line


# --- plan-folder --------------------------------------------------------------------------------------------------
@pytest.fixture
def program(tmp_path: Path) -> Path:
    folder = tmp_path / "program"
    shutil.copytree(EXAMPLE, folder)
    return folder


def test_plan_folder_json_has_providers_urns_dependencies_and_output_values(program: Path) -> None:
    done = run(str(TRITON_GKE), "plan-folder", str(program), "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    by_name = {r["name"]: r for r in plan["resources"]}
    deployment = next(r for r in plan["resources"] if r["type"] == "kubernetes:apps/v1:Deployment")
    assert deployment["provider"] == "cluster" and deployment["providerUrn"].endswith("::cluster")
    assert deployment["urn"].startswith("urn:pulumi:dev::triton-on-cluster::") and deployment["dependsOn"]
    assert all(urn in {r["urn"] for r in plan["resources"]} for urn in deployment["dependsOn"])
    assert by_name["cluster"]["provider"] is None
    assert plan["outputs"] == {
        "grpc_endpoint": "triton.triton.svc.cluster.local:8001",
        "http_endpoint": "http://triton.triton.svc.cluster.local:8000",
        "namespace": "triton",
    }


def test_the_module_entry_plans_a_folder(program: Path) -> None:
    done = run(sys.executable, "-m", "triton_gke.offline.plan_folder", str(program), "--json")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["outputs"]) == {"grpc_endpoint", "http_endpoint", "namespace"}
    line = one_line(run(sys.executable, "-m", "triton_gke.offline.plan_folder", str(program), "--stack", "nope"))
    assert line.startswith("error: python -m triton_gke.offline.plan_folder: "), line
    removed = run(sys.executable, "-m", "triton_gke.offline.runtime", str(program), "--json")
    assert removed.returncode == 2 and removed.stdout == "", removed  # the old entry: refused, never a silent 0
    expected = "error: python -m triton_gke.offline.runtime was removed: run `triton-gke plan-folder"
    assert one_line(removed).startswith(expected)


@pytest.mark.parametrize(
    "case,expected",
    [
        ("missing folder", "{folder}: no such folder"),
        ("no project file", "{folder}: no Pulumi.yaml; not a Pulumi project folder"),
        ("unknown stack", "{folder}: Pulumi.nope.yaml: no such stack file; its stacks: dev"),
        ("bad stack name", "--stack '../x': not a Pulumi stack name"),
        (
            "refused args",
            "{folder}: TritonOnCluster 'triton': min_replicass: unknown field; did you mean min_replicas?",
        ),
        ("bad config", "--config 'oops': expected KEY=VALUE"),
        ("no program", "{folder}/__main__.py: no such program file"),
        ("main not a path", "{folder}/Pulumi.yaml: main: expected a path, got list"),
    ],
)
def test_plan_folder_refuses_in_one_line(case: str, expected: str, program: Path) -> None:
    words = [str(program)]
    if case == "missing folder":
        shutil.rmtree(program)
    elif case == "no project file":
        (program / "Pulumi.yaml").unlink()
    elif case == "unknown stack":
        words += ["--stack", "nope"]
    elif case == "bad stack name":
        words += ["--stack", "../x"]
    elif case == "refused args":
        main = program / "__main__.py"
        main.write_text(main.read_text().replace('"min_replicas": 1', '"min_replicass": 1'))
    elif case == "no program":
        (program / "__main__.py").unlink()
    elif case == "main not a path":
        project = program / "Pulumi.yaml"
        project.write_text(project.read_text() + "main: [a, b]\n")
    else:
        words += ["--config", "oops"]
    done = run(str(TRITON_GKE), "plan-folder", *words)
    line = one_line(done)
    assert line.startswith("error: triton-gke plan-folder: " + expected.format(folder=program)), line
    assert done.returncode == 2


@pytest.mark.parametrize("code", [0, 3])
def test_a_program_that_calls_sys_exit_plans_or_fails_in_one_line(code: int, program: Path) -> None:
    """sys.exit(0) ends the program as under the engine (what it declared is planned); any other code fails the plan
    with exit 1, never the program's own code (3 is `plan`'s manifest code): red team."""
    main = program / "__main__.py"
    main.write_text(main.read_text() + f"\nimport sys\nsys.exit({code})\n")
    done = run(str(TRITON_GKE), "plan-folder", str(program), "--json")
    if code == 0:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["resources"]
    else:
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.splitlines() == [
            f"error: triton-gke plan-folder: {main}: ProgramExitError: the program exited with code {code}"
        ]


# --- provider -----------------------------------------------------------------------------------------------------
def test_provider_help_lists_both_options_and_the_schema_is_the_committed_one() -> None:
    helped = run(str(TRITON_GKE), "provider", "--help")
    assert helped.returncode == 0 and "--schema" in helped.stdout and "--write-schema" in helped.stdout
    assert helped.stdout.startswith("usage: triton-gke provider")
    printed = run(str(TRITON_GKE), "provider", "--schema")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads((REPO / "triton_gke" / "schema.json").read_text())


def test_provider_write_schema_refuses_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    installed = tmp_path / "site-packages" / "triton_gke"
    installed.mkdir(parents=True)
    spec = importlib.machinery.ModuleSpec("triton_gke", None, origin=str(installed / "__init__.py"))
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: spec)
    assert cli.main(["provider", "--write-schema"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: triton-gke provider: --write-schema: {installed}/schema.json belongs to an "), line
    assert not (installed / "schema.json").exists()
