"""Every folder and file of the package that the code reads, and the project folder's build paths, in one place.

The package's files are found from this file: triton_gke/ is the same folder in a checkout (the top-level infra/,
k8s/, ... are links into it) and in an installed wheel, so a path below holds in both. The project folder (stack
files, build/) is the current working directory, read when called: `pulumi up` runs the program there and the
`triton-gke` commands act on it (project_dir below cites Pulumi's sources).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# The folder that holds triton_gke/: what a subprocess puts on PYTHONPATH to import this very package.
IMPORT_ROOT = PACKAGE_DIR.parent

# Package data (pyproject.toml [tool.setuptools.package-data] ships each of these in the wheel).
PROJECT_FILE = PACKAGE_DIR / "Pulumi.yaml"  # the settings' schema; a link to the project's in a checkout
SCHEMA_FILE = PACKAGE_DIR / "schema.json"  # the component provider's schema
DATA_DIR = PACKAGE_DIR / "infra" / "data"
REPLACEMENT_RULES = DATA_DIR / "replacement_rules.yaml"
TOOLCHAIN_CSV = DATA_DIR / "triton_toolchain.csv"
DASHBOARD_DIR = PACKAGE_DIR / "dashboards"
LOADTEST_DIR = PACKAGE_DIR / "loadtest"
LOCUSTFILE = LOADTEST_DIR / "locustfile.py"
ARRIVALS_FILE = LOADTEST_DIR / "arrivals.py"  # imported by the locustfile from its own folder
LOCUST_STEPS_FILE = PACKAGE_DIR / "bench" / "runners" / "locust_steps.py"
MODEL_ANALYZER_CONSTRAINTS = PACKAGE_DIR / "bench" / "model_analyzer-constraints.txt"
CAPACITY_RECORDS_DIR = PACKAGE_DIR / "capacity" / "records"
BUILTIN_DIGESTS = PACKAGE_DIR / "model_repo" / "builtin_digests.json"
TWIN_MODEL_TEMPLATE = PACKAGE_DIR / "model_repo" / "twin_model.py"
GPU_TWIN_MODEL_TEMPLATE = PACKAGE_DIR / "model_repo" / "gpu_twin_model.py"
GPU_TWIN_SERVICE = PACKAGE_DIR / "model_repo" / "gpu_service.py"  # copied beside it: its timing rule
T4_SERVICE_CURVES = PACKAGE_DIR / "model_repo" / "data" / "t4_service_curves.csv"


# ---------------------------------------------------------------- the project folder and its build/


def project_dir() -> Path:
    """The Pulumi project folder a command or program acts on: the current working directory, read when called.

    Under `pulumi up` the engine runs the program with the project folder as its working directory: the language
    host gets it as RunRequest.pwd, "The program's working directory" (pulumi/pulumi proto/pulumi/language.proto),
    which the engine sets to the folder of Pulumi.yaml, or to the folder `main:` names ("So that any relative paths
    inside of the program are correct, we still need to pass the pwd of the main program's parent directory",
    pulumi/pulumi pkg/engine/project.go getPwdMain; the project file reference: "By default, the program's working
    directory is assumed to be the location of `Pulumi.yaml`", https://www.pulumi.com/docs/iac/concepts/projects/
    project-file/ `main`). The `triton-gke` commands act on the current folder, as `pulumi` itself does ("At
    runtime, the nearest parent folder containing a `Pulumi.yaml` file determines the current project",
    https://www.pulumi.com/docs/iac/concepts/projects/). In this repository both are the repository root.
    """
    return Path.cwd()


def build_dir() -> Path:
    """The project's build/ folder: the built model repository, plans, sandbox and bench outputs, caches."""
    return project_dir() / "build"


BUILT_REPOSITORY_NAME = "model_repository"


def built_repository() -> Path:
    """build/model_repository (absolute): the repository `pulumi up` uploads, as the current folder names it."""
    return build_dir() / BUILT_REPOSITORY_NAME


def model_cache_dir() -> Path:
    """build/cache: downloaded and exported ONNX files, shared by every build of the project."""
    return build_dir() / "cache"


def cpu_twin_repository() -> Path:
    """build/model_repository_cpu: the CPU twins local runs serve."""
    return build_dir() / "model_repository_cpu"


def sandbox_build_dir() -> Path:
    """build/sandbox: the sandbox's outputs, its lock and its runs' state."""
    return build_dir() / "sandbox"


def bench_build_dir() -> Path:
    """build/bench: the CPU twins the bench serves, per stack."""
    return build_dir() / "bench"


# The runs of the bench's commands (and gpu-check), relative to the project folder: their default --out is a dated
# folder below it, and a checkout's committed runs live there, outside the package (the wheel ships none).
BENCH_RESULTS = Path("results", "bench")


def bench_results_dir() -> Path:
    """results/bench of the current project: where bench, its tuners and gpu-check write by default."""
    return project_dir() / BENCH_RESULTS


def tools_dir() -> Path:
    """build/tools: perf_analyzer and Model Analyzer, installed on first use."""
    return build_dir() / "tools"


def in_checkout() -> bool:
    """Whether the current folder is this repository's checkout (where its Makefile and links are)."""
    checkout = checkout_dir()
    return checkout is not None and Path.cwd().resolve() == checkout


def checkout_dir() -> Path | None:
    """The repository folder around the package when this is a checkout, None for an installed wheel: what only a
    maintainer's command in a checkout reads or writes (docs/, git). A checkout is told by what only it has: the
    top-level infra/ that links into this very package, beside the Makefile (a user's project with a Makefile and
    the package vendored beside it, `pip install --target .`, has no such link)."""
    folder = IMPORT_ROOT
    link = folder / "infra"
    if not (link.is_symlink() and (folder / "Makefile").is_file()):
        return None
    return folder if link.resolve() == (PACKAGE_DIR / "infra").resolve() else None
