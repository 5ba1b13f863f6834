"""A clone has the version (issue 48): it has no git tags, and needs none. In a fresh repository made of the working
tree (no tag, as `git clone` of this repository gives), the built wheel's metadata is pyproject.toml's version and
CHANGELOG.md's newest release, and docs/library.md's install line, run verbatim in a fresh virtualenv, installs that
wheel, whose `triton-gke --version` says the same. Runs git, pip and the console script, so it lives under tests/live/.

The virtualenv sees the test interpreter's packages through a .pth file and pip runs with PIP_NO_INDEX: the
dependencies are those `make setup` installed, nothing is downloaded, and only the wheel itself is installed.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.unit.triton_gke.test_release import CHANGELOG, LIBRARY, newest_release, static_version

GIT = ["git", "-c", "user.name=clone", "-c", "user.email=clone@example.invalid", "-c", "commit.gpgsign=false",
       "-c", "core.hooksPath=/dev/null"]  # fmt: skip
INSTALL_LINE = re.compile(r'^pip install "triton-gke\[models\] @ file://\$PWD/dist/[^"]+"$', re.M)
BUILD_LINE = re.compile(r"^SOURCE_DATE_EPOCH=.* -w dist", re.M)


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree's tracked and untracked (not ignored) files, committed in a repository with no tag."""
    source = tmp_path_factory.mktemp("clone") / "triton-gke"
    files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], PROJECT_DIR).stdout.split("\0")
    for name in filter(None, files):
        path = PROJECT_DIR / name
        if path.is_file() or path.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name, follow_symlinks=False)
    run([*GIT, "init", "-q"], source)
    run([*GIT, "add", "-A"], source)
    run([*GIT, "commit", "-q", "-m", "a clone"], source)
    assert run(["git", "tag", "--list"], source).stdout == "", "a clone has no tags"
    return source


def wheel_version(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        return email.parser.Parser().parsestr(archive.read(name).decode())["Version"]


def test_a_clone_without_tags_builds_and_installs_the_documented_version(clone: Path, tmp_path: Path) -> None:
    version = static_version()
    assert newest_release(CHANGELOG.read_text(encoding="utf-8")) == version
    library = LIBRARY.read_text(encoding="utf-8")
    (install,) = INSTALL_LINE.findall(library)
    # The documented build, with the test's interpreter for the checkout's .venv/bin/python.
    epoch = run(["git", "log", "-1", "--format=%ct"], clone).stdout.strip()
    assert BUILD_LINE.search(library), "docs/library.md builds the wheel into dist/"
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch}
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", "dist"], clone, env)
    (wheel,) = (clone / "dist").glob("triton_gke-*.whl")
    assert wheel_version(wheel) == version and wheel.name == f"triton_gke-{version}-py3-none-any.whl"

    venv = tmp_path / "program-venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    site = Path(sysconfig.get_path("purelib"))
    (own,) = venv.glob("lib/python*/site-packages")
    (own / "zz_dependencies.pth").write_text(f"{site}\n", encoding="utf-8")  # after the venv's own packages
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "PIP_NO_INDEX": "1"}
    env.pop("PYTHONPATH", None)  # the installed wheel, not this checkout
    run(["bash", "-euo", "pipefail", "-c", install], clone, env)  # verbatim, in the checkout, the venv active
    printed = run([str(venv / "bin" / "triton-gke"), "--version"], tmp_path, env).stdout
    assert printed == f"triton-gke {version}\n", printed
