"""The documentation site builds cleanly: `mkdocs build --strict` (mkdocs.yml: Material theme, `strict: true`)
into a temporary folder; any warning fails the build, so a broken link, a missing anchor or a page left out of
`nav` fails this test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.checkout import PROJECT_DIR
from tests.unit.docs.test_pages import _config, _nav_pages

MKDOCS = Path(sys.executable).with_name("mkdocs")


def test_the_site_builds_strictly_without_a_warning(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, not a build warning
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    for page in _nav_pages(_config()["nav"]):
        # mkdocs writes PAGE.md as PAGE/index.html, and a folder's index.md as that folder's index.html.
        built = Path(page).parent if Path(page).name == "index.md" else Path(page).with_suffix("")
        assert (tmp_path / "site" / built / "index.html").is_file(), page
