"""The built-in models are byte-reproducible: built from an empty cache on one thread and on every core, each file
is the one published in model_repo/builtin_digests.json (so a `pulumi up` from any machine re-uploads nothing).

The published digests are also what another CPU model builds: `qemu-x86_64 -cpu Haswell` (AVX2, no AVX-512) ran the
same command to `same` for every file (docs/model-repository.md, "Reproducible builds"); emulated, it took 32 minutes,
too long to repeat here.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.model_repo.digests import ROLES, published

# docs/model-repository.md, verbatim (tests/unit/docs/test_readme.py NOT_RUN points here).
DOCUMENTED = ".venv/bin/python -m triton_gke.model_repo.check_digests"
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _first_cpu_only() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.mark.parametrize("threads", ["one", "all"])
def test_builtin_models_built_from_an_empty_cache_are_the_published_bytes(threads: str) -> None:
    env = {**os.environ, **(ONE_THREAD if threads == "one" else {})}
    for name in ONE_THREAD if threads == "all" else ():
        env.pop(name, None)
    done = subprocess.run(
        ["bash", "-c", DOCUMENTED],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=_first_cpu_only if threads == "one" else None,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {line.split()[0]: line.split()[-1] for line in done.stdout.splitlines()}
    assert verdicts == dict.fromkeys(ROLES, "same"), done.stdout
    assert len(published()) == len(ROLES)
