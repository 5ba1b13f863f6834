"""sandbox.run_folder: the run folder is the default temporary directory until closed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from triton_gke.sandbox import run_folder
from triton_gke.sandbox.run_folder import RunFolder, remove_orphans


# ---------------------------------------------------------------- this process's run folder
def test_the_run_folder_is_the_default_temporary_directory_until_closed(tmp_path: Path) -> None:
    before = (tempfile.gettempdir(), os.environ.get("TMPDIR"))
    with RunFolder(tmp_path) as folder:
        assert folder.path is not None and folder.path.parent == tmp_path
        assert Path(tempfile.mkdtemp()).parent == folder.path and os.environ["TMPDIR"] == str(folder.path)
        assert run_folder.base_dir() == tmp_path
        assert remove_orphans(tmp_path) == []  # its owner (this process) runs
        path = folder.path
    assert not path.exists()
    assert (tempfile.gettempdir(), os.environ.get("TMPDIR")) == before
