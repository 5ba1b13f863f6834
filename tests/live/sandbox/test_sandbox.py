"""`triton-gke sandbox` end to end: real tritonserver, GCS emulator, Prometheus and Locust.

Each run is a subprocess marked by an environment variable that every process it starts
inherits, so anything left behind is found by that mark, by the shared-memory prefix of its
Triton (which carries the sandbox's pid) and by the pids seen while it ran. The model has
random weights: these tests check the sandbox's plumbing and cleanup, not predictions.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.support.project_folder import make_project_folder, own_tmpdir
from triton_gke.contracts.triton import triton_server_args
from triton_gke.infra.naming import gcp_name
from triton_gke.sandbox import components as parts
from triton_gke.sandbox import leftovers, out_folder
from triton_gke.sandbox.components import ComponentError
from triton_gke.sandbox.netns import NetworkNamespace, isolation_available
from triton_gke.sandbox.private_tmp import private_tmp_available
from triton_gke.settings import from_stack_file as load_settings

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")


MARK_KEY = "SANDBOX_TEST_RUN"


SHM = Path("/dev/shm")
# Where the tests' project folders go: outside /tmp, as a user's checkout is, so tritonserver gets a /tmp of its own
# (sandbox/private_tmp.py refuses a project folder below /tmp, which its bind mount would hide). /var/tmp is there on
# every FHS system ("/var/tmp : Temporary files preserved between system reboots",
# https://refspecs.linuxfoundation.org/FHS_3.0/fhs/ch05s15.html).
PROJECT_BASE = Path("/var/tmp")


Start = Callable[..., "SandboxRun"]


@dataclass
class SandboxRun:
    """A running `triton-gke sandbox`, with every process it started as seen while it ran."""

    process: subprocess.Popen[bytes]
    folder: Path
    mark: str
    project: Path  # its project folder: build/sandbox/ (lock, .runs) and the rebuilt repository of this test only
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    commands: set[str] = field(default_factory=set)
    folders: set[Path] = field(default_factory=set)  # Triton's work folder and model copies
    _done: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None

    def watch(self) -> SandboxRun:
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        return self

    def _watch(self) -> None:
        while not self._done.is_set() and self.process.poll() is None:
            try:
                children = psutil.Process(self.process.pid).children(recursive=True)
            except psutil.Error:
                break
            for child in children:
                self.seen.setdefault(child.pid, child)
                self._note(child)
            time.sleep(0.2)

    def _note(self, child: psutil.Process) -> None:
        try:
            command = child.cmdline()
        except psutil.Error:
            return
        self.commands.add(" ".join(command))
        if len(command) > 1 and command[0].endswith("triton_python_backend_stub"):
            self.folders.add(Path(command[0]).parents[2])  # WORKDIR/backends/python/stub
            self.folders.add(Path(command[1]).parents[1])  # COPY/<version>/model.py

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"sandbox still running after {timeout_s} s:\n{self.stdout}")
        finally:
            self._done.set()
            if self._watcher is not None:
                self._watcher.join()  # the sets it fills are read from here on

    def wait_for_output(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.stdout:
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {text!r} in the sandbox's output:\n{self.stdout}\n{self.stderr}")
            time.sleep(0.2)

    @property
    def stdout(self) -> str:
        return (self.folder / "stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self.folder / "stderr").read_text(errors="replace")

    def leftovers(self) -> list[str]:
        """Everything of this run that still exists: processes, shared memory, Triton's folders."""
        found = [f"pid {p.pid}" for p in self.seen.values() if _alive(p)]
        for process in psutil.process_iter(["pid", "environ", "cmdline"]):
            environ = process.info.get("environ") or {}
            if environ.get(MARK_KEY) == self.mark:
                found.append(f"marked pid {process.info['pid']}: {process.info.get('cmdline')}")
        prefix = f"triton_sandbox_{self.process.pid}_"
        found += [str(path) for path in SHM.glob(f"{prefix}*")]
        found += [str(folder) for folder in self.folders if folder.exists()]
        return found


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie; is_running() also checks the pid was not reused since."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Start]:
    """Runs in a project folder and $TMPDIR of this test's own (its runs share both, as two runs in one checkout
    do): the one-run lock, the run states, the rebuilt repository, the run folders and the orphans the next run
    removes are never another test's."""
    runs: list[SandboxRun] = []
    base = Path(tempfile.mkdtemp(prefix="triton-gke-sandbox-test-", dir=PROJECT_BASE))
    project = make_project_folder(base / "project")
    tmpdir = own_tmpdir(tmp_path / "tmp")

    def start(*args: str, env: dict[str, str] | None = None) -> SandboxRun:
        mark = uuid.uuid4().hex
        folder = tmp_path / f"run{len(runs)}"
        folder.mkdir()
        environment = {**os.environ, **tmpdir, **(env or {}), MARK_KEY: mark}
        command = [sys.executable, "-m", "triton_gke.sandbox.run", "--out", str(folder / "out"), *args]
        with (folder / "stdout").open("wb") as out, (folder / "stderr").open("wb") as err:
            # Its own process group, as in a terminal: Ctrl-C reaches every process of the group.
            process = subprocess.Popen(
                command, cwd=project, env=environment, stdout=out, stderr=err, start_new_session=True
            )
        run = SandboxRun(process, folder, mark, project).watch()
        runs.append(run)
        return run

    yield start
    for run in runs:  # a failed test must not leave its sandbox running
        if run.process.poll() is None:
            run.process.send_signal(signal.SIGTERM)
            run.wait(60)
    shutil.rmtree(base, ignore_errors=True)  # its model repositories: ~250 MB


def assert_nothing_left(run: SandboxRun) -> None:
    deadline = time.monotonic() + 5  # the kernel reaps orphans a moment after their parent exits
    while run.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert run.leftovers() == []


def error_lines(run: SandboxRun) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.strip()]


def test_a_short_run_reports_real_load_and_leaves_nothing_behind(sandbox: Start) -> None:
    # 10 s, not 5: the report reads Locust's _stats.csv, rewritten once a second and not at exit (locust 2.47
    # stats.py stats_writer, CSV_STATS_INTERVAL_SEC), and Prometheus scrapes every 2 s: on busy cores a 5 s run
    # could report its first requests late or give a rate too few samples.
    run = sandbox("--duration", "10", "--users", "2", "--keep-data")
    code = run.wait(240)

    assert code == 0, f"{run.stdout}\n{run.stderr}"
    assert "sandbox report: stack dev" in run.stdout and "random weights" in run.stdout
    # As in a user's checkout (PROJECT_BASE): the model copies in a /tmp of Triton's own where it can have one.
    assert f"model copies in {'its own /tmp' if private_tmp_available() else 'its work folder'}" in run.stdout
    out = run.folder / "out"
    report = json.loads((out / "report.json").read_text())
    locust = report["locust"]
    assert locust["rps"] > 0 and locust["requests"] > 0 and locust["failures"] == 0
    assert 0 < locust["p50_ms"] <= locust["p95_ms"]
    triton = report["triton"]
    assert triton["batch_size"] >= 1 and triton["compute_ms_per_request"] > 0
    assert triton["queue_ms_per_request"] >= 0 and triton["latency_quantile_ms"] > 0
    assert set(report["alerts"]) == {"firing", "pending"}
    # Only the model under load can breach its SLO: the other loaded twins get no requests.
    alerted = {a.get("model") for state in ("firing", "pending") for a in report["alerts"][state]}
    assert alerted <= {None, "original"}, report["alerts"]
    assert report["targets"] == {"triton": True, "locust": True, "prometheus": True}
    assert report["prometheus_queries"]["batch_size"]["result"]
    assert (report["model"], report["users"], report["duration_s"]) == ("original", 2, 10)
    settings = load_settings("dev")
    bucket = gcp_name(settings.project, "dev", "triton-models", max_len=63)
    assert report["bucket"] == f"gs://{bucket}/{settings.model_store.prefix}"  # the stack's bucket and prefix
    gke = triton_server_args(report["bucket"], gpu=False, admin_key="***", inference_key="***")[1:]
    # The key's check before the load (issue 44): refused without it over HTTP and gRPC, served with it.
    assert re.search(r"served without it http 0/5, grpc 0/5, with it http 5/5, grpc 5/5", run.stdout), run.stdout
    ports = ("--http-port", "--grpc-port", "--metrics-port")
    expected = [a for a in gke if a.split("=")[0] not in ports] if report["network"] == "host" else gke
    assert set(expected) <= set(report["triton_command"])
    for name in ("locust.json", "locust_stats.csv", "prometheus.yml", "rules.yml", "tritonserver.log"):
        assert (out / name).is_file(), name
    assert any((out / "prometheus-data").iterdir())
    # It wrote what sandbox/out_folder.py lists as its own, and lists it: the next run into OUT removes just that.
    assert {p.name for p in out.iterdir()} == {*out_folder.OUTPUTS["load"], out_folder.WRITTEN_LIST}
    out_folder.check_out_folder(out, "load")  # `make sandbox` twice: its own earlier output is taken
    for part in ("tritonserver", "triton_python_backend_stub", "gcp_storage_emulator", "prometheus", "locust"):
        assert any(part in command for command in run.commands), part
    assert_no_secret_written(run, out)
    assert_nothing_left(run)
    assert not [p for p in run_states(run) if _owner(p) == run.process.pid]  # a clean exit


def admin_keys(run: SandboxRun) -> set[str]:
    """The admin and inference key(s) tritonserver really ran with, read from its command line while it ran."""
    pattern = re.compile(r"--http-restricted-api=[^ :]+:[^ =]+=(\S+)")
    return {match.group(1) for command in run.commands for match in pattern.finditer(command)}


def assert_no_secret_written(run: SandboxRun, out: Path) -> None:
    """No file under OUT (logs, report, CSV, Prometheus files and TSDB) and no output line holds the key."""
    keys = admin_keys(run)
    assert keys and all(len(key) >= 16 for key in keys)  # the real key was seen, so the grep below can fail
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "tritonserver.log" for p in files)
    leaks = [str(p) for p in files for key in keys if key.encode() in p.read_bytes()]
    leaks += [stream for stream in ("stdout", "stderr") for key in keys if key in getattr(run, stream)]
    assert leaks == []


def test_ctrl_c_mid_run_stops_everything_promptly(sandbox: Start) -> None:
    run = sandbox("--duration", "120", "--users", "1")
    run.wait_for_output("Locust: ", 180)
    time.sleep(2)
    os.killpg(run.process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    # The wait only ends a hang (stopping Triton, Prometheus, Locust and the emulator takes seconds, more on busy
    # cores). A run that ignored Ctrl-C would go on to its 120 s and end 0 with a report: code and files tell.
    code = run.wait(240)

    assert code == 130
    assert "interrupted by SIGINT" in run.stderr and "Traceback" not in run.stderr
    assert not (run.folder / "out" / "report.json").exists()
    assert any("tritonserver" in command for command in run.commands) and run.folders
    assert_nothing_left(run)


def test_an_unavailable_gcs_emulator_is_named_in_one_line(sandbox: Start, tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "gcp_storage_emulator"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("raise SystemExit('emulator made unavailable by the test')\n")
    run = sandbox("--duration", "5", env={"PYTHONPATH": str(broken.parent)})
    code = run.wait(120)

    assert code == 1
    assert error_lines(run) == ["error: GCS emulator did not start: emulator made unavailable by the test"]
    assert "models READY" not in run.stdout
    assert_nothing_left(run)


def test_a_prometheus_that_cannot_start_is_named_and_the_rest_stopped(sandbox: Start, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "prometheus"
    fake.write_text("#!/bin/sh\necho 'level=error msg=\"made unavailable by the test\"' >&2\nexit 1\n")
    fake.chmod(0o755)
    run = sandbox("--duration", "5", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    code = run.wait(240)

    assert code == 1
    assert error_lines(run) == ['error: Prometheus did not start: level=error msg="made unavailable by the test"']
    assert "uploaded" in run.stdout and "models READY" not in run.stdout
    assert any("gcp_storage_emulator" in command for command in run.commands)
    assert_nothing_left(run)


def test_a_repository_tritonserver_cannot_load_is_named_with_its_log_line(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        netns = stack.enter_context(NetworkNamespace()) if isolation_available() else None
        gcs = parts.start_emulator(netns)
        stack.callback(gcs.stop)
        gcs.client().create_bucket("empty")
        server = parts.prepare_triton("gs://empty/models", gcs, netns, parts.admin_key())
        stack.callback(parts.stop_triton, server, [], tmp_path / "tritonserver.log")
        with pytest.raises(ComponentError) as failure:
            parts.launch_triton(server)

    assert str(failure.value) == (
        "tritonserver could not load the model repository from gs://empty/models: "
        "error: creating server: Invalid argument - repository path is not a valid directory"
    )
    assert "repository path is not a valid directory" in (tmp_path / "tritonserver.log").read_text()
    assert not server.is_running() and not server.workdir.exists()
    assert not list(SHM.glob(f"{server.shm_prefix}*"))


# ---------------------------------------------------------------- a run killed with SIGKILL
def test_the_next_run_stops_what_a_killed_run_left_and_nothing_else(sandbox: Start, tmp_path: Path) -> None:
    killed = sandbox("--duration", "120", "--users", "1")
    killed.wait_for_output("Locust: ", 180)
    time.sleep(1)
    os.kill(killed.process.pid, signal.SIGKILL)  # `kill -9` of make sandbox: no cleanup code runs
    killed.wait(30)
    left = killed.leftovers()
    for part in ("tritonserver", "triton_python_backend_stub", "prometheus", "locust", "gcp_storage_emulator"):
        assert any(part in command for command in killed.commands), part
    assert any(str(SHM) in item for item in left) and any("pid" in item for item in left), left
    assert [p for p in run_states(killed) if _owner(p) == killed.process.pid]  # where the check below looks
    bystander = subprocess.Popen(["sleep", "600"])  # not the killed run's: must survive the cleanup

    # The next run cleans up first; an emulator made unavailable then stops it right after.
    broken = tmp_path / "broken" / "gcp_storage_emulator"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("raise SystemExit('emulator made unavailable by the test')\n")
    following = sandbox("--duration", "5", env={"PYTHONPATH": str(broken.parent)})
    code = following.wait(120)

    assert code == 1, following.stderr
    assert "an earlier sandbox run was killed: stopped its" in following.stdout
    assert_nothing_left(killed)
    assert_nothing_left(following)
    assert bystander.poll() is None
    bystander.kill()
    bystander.wait()
    owners = (killed.process.pid, following.process.pid)
    assert not [p for p in run_states(following) if _owner(p) in owners]


def run_states(run: SandboxRun) -> list[Path]:
    """The state files in the run's project folder (sandbox/leftovers.py: build/sandbox/.runs of the current one)."""
    with contextlib.chdir(run.project):
        return sorted(leftovers.STATE_DIR.glob("*.json"))


def _owner(state_file: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return json.loads(state_file.read_text())["owner"]["pid"]
    return None
