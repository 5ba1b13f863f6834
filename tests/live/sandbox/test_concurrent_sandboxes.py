"""Two sandboxes at once: the second is refused in one line naming the first; their ports never collide."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.project_folder import make_project_folder, own_tmpdir
from triton_gke.sandbox import single_run
from triton_gke.sandbox.gcs_emulator import NAMESPACE_PORT, GcsEmulator
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder of this test's own, the current one: single_run.LOCK_FILE is read from the current folder,
    so the lock checked here is the one its sandboxes take, and no other test's sandbox holds it."""
    folder = make_project_folder(tmp_path / "project")
    monkeypatch.chdir(folder)
    return folder


def child_env(tmp_path: Path) -> dict[str, str]:
    """Run folders in a $TMPDIR of the test's own: their orphan cleanup never touches another test's."""
    return {**os.environ, **own_tmpdir(tmp_path / "tmp")}


def sandbox(out: Path, project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "triton_gke.sandbox.run", "--duration", "5", "--users", "1", "--out", str(out)]
    return subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def holder_of(lock_file: Path) -> str:
    return lock_file.read_text() if lock_file.exists() else ""


def test_a_second_sandbox_is_refused_in_one_line_naming_the_running_one(tmp_path: Path, project: Path) -> None:
    # Two runs would both rebuild build/model_repository_cpu and the second would wipe the first's outputs.
    env = child_env(tmp_path)
    first = sandbox(tmp_path / "one", project, env)
    try:
        deadline = time.monotonic() + 120
        while not holder_of(single_run.LOCK_FILE).startswith(f"{first.pid} ") and first.poll() is None:
            assert time.monotonic() < deadline, "the first sandbox never took the lock"
            time.sleep(0.2)
        if first.poll() is not None:
            # Its project folder is this test's own: no other sandbox can hold the lock, so this is a failure.
            pytest.fail(f"the first sandbox ended before the test saw it hold the lock: {first.communicate()[1]}")
        since = holder_of(single_run.LOCK_FILE).split()[1]

        second = subprocess.run(
            [sys.executable, "-m", "triton_gke.sandbox.run", "--out", str(tmp_path / "two")],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert second.returncode == 1
        assert second.stderr.splitlines() == [
            f"error: another sandbox is running in this checkout (pid {first.pid}, started {since}); wait for it "
            f"to finish or stop it (kill {first.pid}): two runs would share build/model_repository_cpu and their "
            "results folder"
        ]
        assert not (tmp_path / "two").exists()  # refused before its results folder was touched
        assert first.poll() is None  # the running one is left alone
    finally:
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM, stderr
    with single_run.only_run():  # released with the run: the next one may start
        pass


def test_the_lock_dies_with_its_holder_even_by_kill_9(tmp_path: Path) -> None:
    lock_file = tmp_path / "sandbox.lock"
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom sandbox.single_run import only_run\n"
        f"with only_run(Path({str(lock_file)!r})):\n    print('held', flush=True)\n    time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT_DIR, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        busy = rf"\(pid {holder.pid}, started \d\d:\d\d:\d\d\)"
        with pytest.raises(single_run.SandboxBusy, match=busy), single_run.only_run(lock_file):
            pass
    finally:
        holder.kill()
        holder.communicate(timeout=30)

    with single_run.only_run(lock_file):  # no stale lock: flock(2) locks end with their process
        pass


@pytest.mark.skipif(not isolation_available(), reason="needs permission for network namespaces (unshare -n)")
def test_two_emulators_bind_the_same_port_each_in_its_own_namespace_and_keep_their_data() -> None:
    # Inside each run's namespace the emulator has the port Triton is given; out here each is a free port.
    with (
        NetworkNamespace() as one,
        NetworkNamespace() as two,
        GcsEmulator(netns=one) as first,
        GcsEmulator(netns=two) as second,
    ):
        assert first.port == second.port == NAMESPACE_PORT
        assert first.host_port != second.host_port
        first.client().create_bucket("first-only")
        second.client().create_bucket("second-only")
        assert [b.name for b in first.client().list_buckets()] == ["first-only"]
        assert [b.name for b in second.client().list_buckets()] == ["second-only"]
