"""sandbox.leftovers: the next run stops a killed run's own processes only, verified through /proc."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.sandbox.leftovers import RunState, clean_leftovers
from triton_gke.sandbox.processes import command_line, start_time

# A command line like the sandbox's own children (a python -m module), but nobody's sandbox.
LOOKALIKE = [sys.executable, "-c", "import time; time.sleep(600)", "gcp_storage_emulator", "start"]


@pytest.fixture
def lookalike() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(LOOKALIKE)
    yield process
    process.kill()
    process.wait()


def no_run_folders(tmp_path: Path) -> Path:
    """An empty folder to scan for orphaned run folders (clean_leftovers' folder_base; default $TMPDIR, /tmp): the
    cleanup then never removes another test's or another sandbox's run folder, nor counts it in what it cleaned."""
    base = tmp_path / "run-folders"
    base.mkdir(exist_ok=True)
    return base


def dead_owner() -> dict[str, int]:
    """The pid and start time of a process that has exited: the owner of a killed run."""
    process = subprocess.Popen(["true"])
    start = start_time(process.pid) or 1
    process.wait()
    return {"pid": process.pid, "start": start}


def write_state(state_dir: Path, owner: dict[str, int], processes: list[dict], shm=(), folders=()) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / f"{uuid.uuid4().hex}.json"
    state = {"owner": owner, "processes": processes, "shm_prefixes": list(shm), "folders": [str(f) for f in folders]}
    path.write_text(json.dumps(state))
    return path


def wait_until_ready(process: subprocess.Popen[bytes]) -> None:
    for _ in range(100):
        if command_line(process.pid) == LOOKALIKE:
            return
        subprocess.run(["sleep", "0.05"], check=True)
    pytest.fail("the test's process did not start")


def test_a_recorded_process_is_stopped_and_the_run_state_removed(tmp_path: Path, lookalike) -> None:
    wait_until_ready(lookalike)
    record = {"pid": lookalike.pid, "start": start_time(lookalike.pid), "commands": [LOOKALIKE]}
    path = write_state(tmp_path, dead_owner(), [record])

    cleaned = clean_leftovers(tmp_path, folder_base=no_run_folders(tmp_path))

    assert cleaned.processes == [lookalike.pid] and lookalike.wait(10) is not None
    assert not path.exists()


def test_shm_files_and_folders_only_with_the_runs_own_names(tmp_path: Path) -> None:
    run = f"triton_sandbox_{900000 + uuid.uuid4().int % 99999}_0_"
    own = Path("/dev/shm") / f"{run}region"
    similar = Path("/dev/shm") / f"{run[:-3]}_01_region"  # another server's prefix that starts the same
    tmp = Path(tempfile.gettempdir())
    own_folder = Path(tempfile.mkdtemp(prefix="triton-sandbox-"))
    stranger_folder = Path(tempfile.mkdtemp(prefix="mine-"))
    deep_folder = tmp_path / "triton-sandbox-notdirectlyintmp"
    deep_folder.mkdir()
    for shm in (own, similar):
        shm.write_bytes(b"x")
    try:
        folders = [own_folder, stranger_folder, deep_folder, tmp / "..", Path("/etc")]
        write_state(tmp_path / "runs", dead_owner(), [], shm=[run, "../etc/", "triton_sandbox_"], folders=folders)

        cleaned = clean_leftovers(tmp_path / "runs", folder_base=no_run_folders(tmp_path))

        assert cleaned.shm_files == [str(own)] and not own.exists() and similar.exists()
        assert cleaned.folders == [str(own_folder)] and not own_folder.exists()
        assert stranger_folder.is_dir() and deep_folder.is_dir() and Path("/etc").is_dir()
    finally:
        similar.unlink(missing_ok=True)
        own.unlink(missing_ok=True)
        stranger_folder.rmdir()


def test_a_run_still_alive_is_left_alone(tmp_path: Path, lookalike) -> None:
    wait_until_ready(lookalike)
    record = {"pid": lookalike.pid, "start": start_time(lookalike.pid), "commands": [LOOKALIKE]}
    alive_owner = {"pid": lookalike.pid, "start": start_time(lookalike.pid)}  # a second sandbox, running
    path = write_state(tmp_path, alive_owner, [record])

    assert not clean_leftovers(tmp_path, folder_base=no_run_folders(tmp_path))
    assert lookalike.poll() is None and path.exists()


def test_this_runs_state_records_its_children_and_goes_on_a_clean_exit(tmp_path: Path) -> None:
    state = RunState(tmp_path, folder_base=no_run_folders(tmp_path)).open()  # its run folder not in /tmp
    child = subprocess.Popen(LOOKALIKE)
    try:
        wait_until_ready(child)
        state.snapshot()
        recorded = json.loads(state.path.read_text())
        assert {"pid": child.pid, "start": start_time(child.pid), "commands": [LOOKALIKE]} in recorded["processes"]
    finally:
        child.kill()
        child.wait()
        state.close()
    assert not state.path.exists()


# ---------------------------------------------------------------- property-based: a lookalike always survives


@pytest.fixture(scope="module")
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(LOOKALIKE)
    wait_until_ready(process)
    yield process
    process.kill()
    process.wait()


_mutations = st.one_of(
    st.tuples(st.just("start"), st.integers(min_value=-(10**6), max_value=10**6).filter(bool)),
    st.tuples(st.just("arg"), st.integers(min_value=0, max_value=len(LOOKALIKE) - 1)),
    st.tuples(st.just("extra"), st.text(max_size=8)),
    st.tuples(st.just("drop"), st.integers(min_value=0, max_value=len(LOOKALIKE) - 1)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations, suffix=st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1))
def test_a_process_with_another_start_time_or_command_line_is_never_signalled(
    tmp_path_factory: pytest.TempPathFactory, bystander: subprocess.Popen[bytes], mutation: tuple, suffix: str
) -> None:
    kind, value = mutation
    start, command = start_time(bystander.pid), list(LOOKALIKE)
    if kind == "start":
        start += value  # the pid was reused by a process started at another time
    elif kind == "arg":
        command[value] += suffix  # a similar command line
    elif kind == "extra":
        command.append(value)
    else:
        del command[value]
    state_dir = tmp_path_factory.mktemp("runs")
    write_state(state_dir, dead_owner(), [{"pid": bystander.pid, "start": start, "commands": [command]}])

    cleaned = clean_leftovers(state_dir, folder_base=no_run_folders(state_dir))

    assert cleaned.processes == [] and cleaned.spared == [bystander.pid]
    assert bystander.poll() is None


def test_unreadable_state_is_dropped_without_acting_on_it(tmp_path: Path, lookalike) -> None:
    (tmp_path / "broken.json").write_text('{"owner": {"pid": 1')
    assert not clean_leftovers(tmp_path, folder_base=no_run_folders(tmp_path))
    assert not (tmp_path / "broken.json").exists() and lookalike.poll() is None


def test_a_zombie_or_missing_pid_has_no_start_time() -> None:
    process = subprocess.Popen(["true"])
    for _ in range(100):
        if start_time(process.pid) is None:
            break
        subprocess.run(["sleep", "0.02"], check=True)
    assert start_time(process.pid) is None  # exited, not yet reaped: a zombie counts as gone
    process.wait()
    assert start_time(process.pid) is None and command_line(process.pid) is None


def test_the_run_state_holds_the_run_folder_and_the_next_run_removes_a_dead_ones(tmp_path: Path) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    state = RunState(tmp_path / "runs", folder_base=base).open()
    folder = state.run_folder.path
    try:
        assert folder is not None and folder.parent == base
        assert Path(tempfile.mkdtemp(prefix="triton-sandbox-")).parent == folder  # the run's temp folders go inside
        assert json.loads(state.path.read_text())["run_folder"] == str(folder)
        assert clean_leftovers(tmp_path / "runs", folder_base=base).folders == []  # its own run: alive
    finally:
        state.close()
    assert not folder.exists() and not state.path.exists()

    killed = base / "triton-gke-run-1-killed"
    killed.mkdir()
    (killed / ".triton-gke-run.json").write_text(json.dumps({"kind": "triton-gke-run", **dead_owner()}))
    assert clean_leftovers(tmp_path / "runs", folder_base=base).folders == [str(killed)]
    assert list(base.iterdir()) == []
