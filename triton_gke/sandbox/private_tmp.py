"""Give tritonserver a /tmp of its own, inside its work folder, through a private mount namespace.

Triton copies every model of a gs:// repository into /tmp/folderXXXXXX (a fixed path) and
removes the copies only when it unloads the model: stopped while loading, or killed, it leaves
~100 MB per model behind, and on a shared machine nobody can tell whose copies they are. With
/tmp bound to WORKDIR/tmp in the server's own mount namespace, the copies live inside the
server's work folder, which TritonServer.close() removes in every case.

Used through TritonServer's `netns` hook (anything with wrap() and forward()): the command is
wrapped as `[nsenter ...] unshare --mount -- sh -c SCRIPT`, and every step execs, so the pid
TritonServer holds is still tritonserver's.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from triton_gke.contracts.paths import PACKAGE_DIR
from triton_gke.sandbox.netns import NetworkNamespace

TMP = Path("/tmp")
# $1 work folder, $2 its private tmp, $3 the work folder's path below /tmp ("" when outside it).
# The work folder is bound back inside the new /tmp first, so paths below it stay valid
# (--backend-directory); --rbind then carries that inner mount along.
_SCRIPT = 'if [ -n "$3" ]; then mount --bind "$1" "$2/$3" || exit 1; fi; mount --rbind "$2" /tmp || exit 1; '
_SCRIPT += 'shift 3; exec "$@"'


@functools.cache
def private_tmp_available() -> bool:
    """True where this process may create a mount namespace and bind-mount in it (root, no seccomp ban),
    and nothing the server needs lives below /tmp (a checkout or venv there would vanish behind the bind)."""
    # The interpreter, the package's code and the project folder (the current one: its build/ holds the models).
    needed = (Path(sys.prefix), PACKAGE_DIR, Path.cwd())
    if any(path.resolve().is_relative_to(TMP) for path in needed):
        return False
    if not (shutil.which("unshare") and shutil.which("mount")):
        return False
    with tempfile.TemporaryDirectory(prefix="sandbox-mount-probe-") as probe:
        command = ["unshare", "--mount", "--", "mount", "--bind", probe, probe]
        try:
            return subprocess.run(command, capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


class PrivateTmp:
    """Wraps commands to run with /tmp = WORKDIR/tmp, in a network namespace when one is given."""

    def __init__(self, workdir: Path, netns: NetworkNamespace | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.netns = netns
        self.tmp = self.workdir / "tmp"
        self._below_tmp = str(self.workdir.relative_to(TMP)) if self.workdir.is_relative_to(TMP) else ""
        (self.tmp / self._below_tmp).mkdir(parents=True, exist_ok=True)

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        args = [str(self.workdir), str(self.tmp), self._below_tmp]
        wrapped = ["unshare", "--mount", "--", "sh", "-c", _SCRIPT, "sh", *args, *cmd]
        return self.netns.wrap(wrapped) if self.netns else wrapped

    def forward(self, port: int) -> int:
        if self.netns is None:
            raise RuntimeError("no network namespace: nothing to forward")
        return self.netns.forward(port)
