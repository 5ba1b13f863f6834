"""sandbox.run_folder: every temporary folder of a run in one per-run folder, gone after any end, a SIGKILL included."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from triton_gke.sandbox.processes import start_time
from triton_gke.sandbox.run_folder import MARKER, MARKER_KIND, PREFIX, remove_orphans

# A run as sandbox.run starts one: the run state (and with it the run folder) first, then the GCS emulator with the
# repository uploaded, then the sandbox's tritonserver reading gs://. "idle" only opens the run state; "start" is
# the next run's start (sandbox.run.track_this_run). Private /tmp is off: a machine without `unshare` permission.
RUN = r"""
import json, sys, time
from pathlib import Path
from triton_gke.sandbox import components as parts, leftovers
state_dir, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "start":
    cleaned = leftovers.clean_leftovers(state_dir)
    state = leftovers.RunState(state_dir).open()
    state.close()
    print(json.dumps({"processes": cleaned.processes, "folders": cleaned.folders}), flush=True)
    sys.exit(0)
state = leftovers.RunState(state_dir).open()
print("opened", flush=True)
if mode == "idle":
    time.sleep(600)
repo, bucket = sys.argv[3], sys.argv[4]
parts.private_tmp_available = lambda: False
gcs = parts.start_emulator(None)
state.add_folder(gcs.workdir)
parts.upload(gcs, Path(repo), bucket, "models")
server = parts.prepare_triton(f"gs://{bucket}/models", gcs, None, parts.admin_key())
state.add_folder(server.workdir)
state.add_shm_prefix(server.shm_prefix)
parts.launch_triton(server)
print("ready", flush=True)
time.sleep(600)
"""


def child(base: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(base), "PYTHONPATH": str(PROJECT_DIR)}
    return subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        cwd=PROJECT_DIR,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own: killed as a whole, like a closed terminal's
    )


def run_folders(base: Path, pid: int) -> list[Path]:
    return sorted(base.glob(f"{PREFIX}{pid}-*"))


def write_repository(root: Path, weights: str) -> Path:
    """One python-backend model with a 24 MB file: Triton's copy of it takes a moment to download."""
    model = root / "slow_load"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'name: "slow_load"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "IN", data_type: TYPE_FP32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_FP32, dims: [1] }]\n'
    )
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    (model / weights).write_bytes(os.urandom(24 * 2**20))
    return root


def model_copies(base: Path, weights: str) -> list[Path]:
    """Triton's copies of the model, wherever they are: the host /tmp or anywhere below the test's temp base."""
    found = [*Path("/tmp").glob(f"folder??????/{weights}"), *base.rglob(weights)]
    return sorted({path.parent for path in found if path.parent.name.startswith("folder")})


def tritonservers(bucket: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(arg.endswith(f"gs://{bucket}/models") for arg in process.info["cmdline"] or []):
                found.append(process)
    return found


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.parametrize("killed_when", ["loading", "ready"])
def test_a_sigkilled_runs_folder_and_tritons_model_copies_go_at_the_next_start(
    tmp_path: Path, processes, killed_when: str
) -> None:
    base, state_dir = tmp_path / "tmp", tmp_path / "runs"
    base.mkdir()
    weights, bucket = f"weights-{uuid.uuid4().hex}.bin", f"run-folders-{uuid.uuid4().hex[:12]}"
    repo = write_repository(tmp_path / "repo", weights)
    live = child(base, str(state_dir), "idle")
    processes.append(live)
    killed = child(base, str(state_dir), "triton", str(repo), bucket)
    processes.append(killed)
    try:
        assert live.stdout.readline().strip() == "opened" and killed.stdout.readline().strip() == "opened"
        if killed_when == "ready":  # its python stubs run too
            assert killed.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 120  # while loading: killed as soon as the copy begins
        while not model_copies(base, weights) and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        copies = model_copies(base, weights)
        assert copies, "tritonserver made no copy of the model"
        [live_folder] = run_folders(base, live.pid)
        [killed_folder] = run_folders(base, killed.pid)
        # Every temporary folder of the run is in its run folder: Triton's model copies too.
        assert all(copy.is_relative_to(killed_folder) for copy in copies), copies
        assert {p.name for p in base.iterdir()} == {live_folder.name, killed_folder.name}

        os.killpg(killed.pid, signal.SIGKILL)  # the run, not tritonserver: that has a session of its own
        killed.wait()
        assert tritonservers(bucket), "tritonserver should outlive its run"
        time.sleep(0.6)  # let the RunState snapshot thread's last write settle (it died with the run anyway)

        start = child(base, str(state_dir), "start")
        processes.append(start)
        cleaned = json.loads(start.stdout.readline())
        assert start.wait(60) == 0

        assert not [c for c in copies if c.exists()] and not model_copies(base, weights)
        assert not killed_folder.exists() and str(killed_folder) in cleaned["folders"]
        assert psutil.wait_procs(tritonservers(bucket), timeout=10)[1] == []
        # A live run's folder is never touched.
        assert live.poll() is None and (live_folder / MARKER).is_file()
        assert [p.name for p in base.iterdir()] == [live_folder.name]
    finally:
        for process in tritonservers(bucket):
            with contextlib.suppress(psutil.Error):
                process.kill()
        for copy in model_copies(base, weights):
            shutil.rmtree(copy, ignore_errors=True)


# ---------------------------------------------------------------- the cleaner, over generated folders
@pytest.fixture(scope="module")
def dead() -> tuple[int, int]:
    process = subprocess.Popen(["sleep", "0.01"])
    start = start_time(process.pid)
    process.wait()
    assert start is not None
    return process.pid, start


KINDS = ("ours", "no_marker", "bad_marker", "marker_link", "marker_dir", "file", "link", "other_name")


OWNERS = ("live", "dead", "reused")


def marker(pid: int, start: int) -> str:
    return json.dumps({"kind": MARKER_KIND, "pid": pid, "start": start})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(OWNERS)), max_size=10))
def test_the_cleaner_removes_exactly_dead_owners_folders_with_our_marker(dead, entries) -> None:
    me = os.getpid()
    owners = {"live": (me, start_time(me)), "dead": dead, "reused": (me, (start_time(me) or 0) + 1)}
    with tempfile.TemporaryDirectory() as root:
        base, outside = Path(root) / "base", Path(root) / "outside"
        base.mkdir()
        outside.mkdir()
        canary = outside / "canary"
        canary.write_text("keep")
        expected_gone = set()
        for number, (kind, owner) in enumerate(entries):
            pid, start = owners[owner]
            path = base / (f"{PREFIX}{pid}-{number}" if kind != "other_name" else f"triton-sandbox-{number}")
            text = marker(pid, start)
            if kind == "file":
                path.write_text(text)
                continue
            if kind == "link":  # a link to a folder of ours elsewhere, with a dead owner: never followed
                target = outside / f"{PREFIX}{number}"
                target.mkdir()
                (target / MARKER).write_text(marker(*dead))
                path.symlink_to(target, target_is_directory=True)
                continue
            path.mkdir()
            (path / "inner-link").symlink_to(outside, target_is_directory=True)  # rmtree must not follow it
            (path / "data").write_bytes(b"x" * 100)
            if kind in ("ours", "other_name"):
                (path / MARKER).write_text(text)
            elif kind == "bad_marker":
                (path / MARKER).write_text(text[:-3])
            elif kind == "marker_link":
                (outside / f"marker-{number}").write_text(marker(*dead))
                (path / MARKER).symlink_to(outside / f"marker-{number}")
            elif kind == "marker_dir":
                (path / MARKER).mkdir()
            if kind == "ours" and owner != "live":
                expected_gone.add(path)
        before = {p for p in base.iterdir()}

        removed = set(remove_orphans(base))

        assert removed == expected_gone
        assert {p for p in base.iterdir()} == before - expected_gone
        assert canary.read_text() == "keep"
        assert all((outside / f"{PREFIX}{n}" / MARKER).is_file() for n, (k, _) in enumerate(entries) if k == "link")


SIGTERMED = r"""
import sys, time
from triton_gke.sandbox import run_folder
from triton_gke.sandbox.processes import run_interruptible
def body():
    print(run_folder.RunFolder().base, run_folder._active[-1].path, flush=True)
    time.sleep(600)
    return 0
with run_folder.this_run():
    sys.exit(run_interruptible(body, "stopped"))
"""


def test_sigterm_removes_the_run_folder(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(PROJECT_DIR)}
    process = subprocess.Popen(
        [sys.executable, "-c", SIGTERMED], cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        base, folder = process.stdout.readline().split()
        assert Path(base) == tmp_path and Path(folder).is_dir()
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 128 + signal.SIGTERM
        assert not Path(folder).exists() and list(tmp_path.iterdir()) == []
    finally:
        process.kill()
        process.wait()


def test_processes_still_running_in_an_orphaned_folder_are_stopped_first(tmp_path: Path, dead) -> None:
    orphan = tmp_path / f"{PREFIX}{dead[0]}-x"
    orphan.mkdir()
    (orphan / MARKER).write_text(marker(*dead))
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    inside = subprocess.Popen(sleep, env={**os.environ, "TMPDIR": str(orphan / "triton-sandbox-1" / "tmp")})
    lookalike = subprocess.Popen(sleep, env={**os.environ, "TMPDIR": f"{orphan}-not-it"})  # a prefix, not inside
    try:
        assert remove_orphans(tmp_path) == [orphan]
        assert inside.wait(10) is not None and not orphan.exists()
        assert lookalike.poll() is None
    finally:
        for process in (inside, lookalike):
            process.kill()
            process.wait()
