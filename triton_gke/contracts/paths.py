"""Every folder and file of the package that the code reads, and the project folder's build paths, in one place.

The package's files are found from this file: triton_gke/ is the same folder in a checkout (the top-level infra/,
k8s/, ... are links into it) and in an installed wheel, so a path below holds in both. The project folder (stack
files, build/) is the current working directory, read when called: `pulumi up` runs the program there and the
`triton-gke` commands act on it (settings/schema.py project_dir cites Pulumi's sources).
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
LOCUST_STEPS_FILE = PACKAGE_DIR / "bench" / "locust_steps.py"
MODEL_ANALYZER_CONSTRAINTS = PACKAGE_DIR / "bench" / "model_analyzer-constraints.txt"
CAPACITY_RECORDS_DIR = PACKAGE_DIR / "capacity" / "records"
BUILTIN_DIGESTS = PACKAGE_DIR / "model_repo" / "builtin_digests.json"
TWIN_MODEL_TEMPLATE = PACKAGE_DIR / "model_repo" / "twin_model.py"


def checkout_dir() -> Path | None:
    """The repository folder around the package when this is a checkout (it holds the Makefile and pyproject.toml),
    None for an installed wheel: what only a maintainer's command in a checkout reads or writes (docs/, git)."""
    folder = IMPORT_ROOT
    return folder if (folder / "Makefile").is_file() and (folder / "pyproject.toml").is_file() else None
