"""One import name per module, in a fresh interpreter started from the checkout root (triton_gke/one_name.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.checkout import PROJECT_DIR


def python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)


def test_import_infra_from_the_checkout_root_is_triton_gke_infra() -> None:
    """The line issue 45 asks for, as a user types it."""
    result = python("-c", "import infra, triton_gke.infra; print(infra is triton_gke.infra)")
    assert (result.returncode, result.stdout, result.stderr) == (0, "True\n", "")


def test_python_m_through_the_link_runs_the_canonical_module() -> None:
    """`python -m infra.neg_cleanup`, the NEG cleanup's command line in a stack deployed before the package existed
    (docs/deploying.md), runs what `python -m triton_gke.infra.neg_cleanup` runs."""
    old, new = python("-m", "infra.neg_cleanup", "--help"), python("-m", "triton_gke.infra.neg_cleanup", "--help")
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stdout == new.stdout and "neg_cleanup" in old.stdout
