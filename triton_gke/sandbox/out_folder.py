"""The sandbox's --out folder: it removes only what it wrote there, never through a link (red team 44, finding 2).

A run lists the names of what it writes in OUT/.sandbox-files before it writes anything, as `plan --out` lists its
files in .offline-plan-files (offline/plan_out.py): the next run removes a name only when that list holds it, so
`--out ~` or a folder of notes never loses a file. A folder without the list must be empty (a new one is made); a
link as --out, or as anything the run would remove, is refused; all checks come before anything is removed, so a
refusal (one line, exit 2) leaves the folder as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from triton_gke.bounded_files import one_line, output_folder_problem, read_capped_file
from triton_gke.sandbox.leftovers import default_state_dir
from triton_gke.sandbox.single_run import default_lock_file
from triton_gke.settings import ConfigError

WRITTEN_LIST = ".sandbox-files"
_WRITTEN_LIST_MAX_BYTES = 64 * 1024  # a run lists a dozen names
# Locust's --csv PREFIX writes PREFIX_stats.csv, PREFIX_stats_history.csv, PREFIX_failures.csv and
# PREFIX_exceptions.csv, --json-file PREFIX writes PREFIX.json (locust 2.47 stats.py StatsCSVFileWriter.__init__ and
# stats_history_file_name, save_stats_json: open(f"{filename}.json")); its output goes to PREFIX.log (LocustLoad).
LOCUST_PREFIX = "locust"
LOCUST_OUTPUTS = tuple(
    LOCUST_PREFIX + suffix for suffix in ("_stats.csv", "_stats_history.csv", "_failures.csv", "_exceptions.csv")
) + (f"{LOCUST_PREFIX}.json", f"{LOCUST_PREFIX}.log")
REPORT = "report.json"
PROMETHEUS_CONFIG = "prometheus.yml"
TRITON_LOG = "tritonserver.log"
PROMETHEUS_DATA = "prometheus-data"
ROLLOUT = "rollout"
# Everything each scenario writes into OUT (rules.yml and file_sd/: sandbox/prometheus.py local_prometheus_config),
# removed at its start so no file of an earlier run is mistaken for this one's. The one home of these names: the
# writers take them from here, and tests/unit/sandbox/test_out_folder.py checks that a run writes nothing else.
OUTPUTS: dict[str, tuple[str, ...]] = {
    "load": (*LOCUST_OUTPUTS, REPORT, PROMETHEUS_CONFIG, "rules.yml", "file_sd", TRITON_LOG, PROMETHEUS_DATA),
    "rollout": (ROLLOUT,),
}
_ALL_OUTPUTS = frozenset(name for names in OUTPUTS.values() for name in names)


class _FolderError(Exception):
    """A refusal of the out folder; check_out_folder and prepare_out_folder raise it again as a ConfigError."""


def check_out_folder(out: Path, scenario: str) -> None:
    """ConfigError, one line starting `--out OUT: `, for a folder this run may not write into or clean (before
    anything starts: the run takes its lock and state there first when OUT is build/sandbox)."""
    try:
        _check(out, scenario)
    except _FolderError as err:
        raise ConfigError(f"--out {one_line(out)}: {err}") from None
    except OSError as err:  # a folder that cannot be listed
        raise ConfigError(f"--out {one_line(out)}: {one_line(err.filename or out)}: {err.strerror or err}") from None


def prepare_out_folder(out: Path, scenario: str, keep_data: bool = False) -> Path:
    """Check again (time passed since check_out_folder), list this run's outputs, then remove the earlier run's."""
    try:
        listed = _check(out, scenario)
        out.mkdir(parents=True, exist_ok=True)
        # Listed before anything is written: a run killed half-way leaves a list that covers what it wrote.
        kept = {name for name in listed if os.path.lexists(out / name)}
        _write_list(out, sorted(kept | set(OUTPUTS[scenario])))
        for name in OUTPUTS[scenario]:
            if name in listed and os.path.lexists(out / name):  # listed: an earlier run wrote it, or meant to
                _remove(out / name)
        if keep_data:
            (out / PROMETHEUS_DATA).mkdir()
    except _FolderError as err:
        raise ConfigError(f"--out {one_line(out)}: {err}") from None
    except OSError as err:  # a link or file planted between the checks and the changes, a folder gone read-only
        raise ConfigError(f"--out {one_line(out)}: {one_line(err.filename or out)}: {err.strerror or err}") from None
    return out


def _check(out: Path, scenario: str) -> frozenset[str]:
    """The outputs the folder's list names (empty: none yet); _FolderError where the run may not use the folder."""
    if os.path.islink(out):  # False, never an error, for a name too long or holding a NUL byte
        raise _FolderError("a symbolic link; the sandbox never writes or removes through a link (give its folder)")
    problem = output_folder_problem(out)  # a file, /proc, /sys, read-only, too long: the one check of output folders
    if problem is not None:
        raise _FolderError(problem)
    if not out.is_dir():
        return frozenset()
    listed = _listed(out)
    if listed is None:
        strangers = sorted(set(os.listdir(out)) - _bookkeeping(out))
        if strangers:
            raise _FolderError(
                f"holds {one_line(strangers[0])} and was not written by the sandbox (no {WRITTEN_LIST}); "
                "choose an empty or new folder"
            )
        return frozenset()
    for name in OUTPUTS[scenario]:
        _check_output(out / name, listed)
    return listed


def _check_output(path: Path, listed: frozenset[str]) -> None:
    """An output the run removes and writes again: its own (listed), not a link."""
    if not os.path.lexists(path):
        return
    if path.is_symlink():
        raise _FolderError(f"{one_line(path)} is a symbolic link; the sandbox never removes one")
    if path.name not in listed:
        raise _FolderError(
            f"{path.name} was not written by the sandbox (not in {WRITTEN_LIST}); move it or choose another folder"
        )


def _bookkeeping(out: Path) -> set[str]:
    """In build/sandbox, the lock and the run states the sandbox keeps there (single_run.py, leftovers.py), made
    before the folder is prepared: the sandbox's own, never removed here."""
    own = (default_lock_file(), default_state_dir())
    return {path.name for path in own if os.path.realpath(path.parent) == os.path.realpath(out)}


def _listed(out: Path) -> frozenset[str] | None:
    """The output names OUT/.sandbox-files holds (None: no list). Any other line is ignored: a list edited by hand
    can never make the run remove anything but its own outputs."""
    listing = out / WRITTEN_LIST
    if not os.path.lexists(listing):
        return None
    if listing.is_symlink():
        raise _FolderError(f"{WRITTEN_LIST} is a symbolic link; not the sandbox's list of what it wrote (remove it)")
    # The one bounded reader: the list replaced by a FIFO or a huge file must not hang or fill the run.
    data = read_capped_file(listing, _WRITTEN_LIST_MAX_BYTES, "the sandbox's list of what it wrote", _FolderError)
    if b"\0" in data:  # no name holds one: not the list the sandbox writes
        raise _FolderError(f"{WRITTEN_LIST}: binary data (a NUL byte); not the sandbox's list of what it wrote")
    lines = data.decode("utf-8", errors="replace").splitlines()
    return frozenset(line for line in lines if line in _ALL_OUTPUTS)


def _write_list(out: Path, names: list[str]) -> None:
    """Under a temporary name, created new and never through a link (O_EXCL | O_NOFOLLOW: open(2) fails on anything
    existing, https://man7.org/linux/man-pages/man2/open.2.html), then renamed over the list (rename(2) replaces the
    name itself, never what a link names)."""
    temporary = out / f"{WRITTEN_LIST}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(temporary, flags, 0o644), "w", encoding="utf-8") as handle:
        handle.write("".join(f"{name}\n" for name in names))
    os.replace(temporary, out / WRITTEN_LIST)


def _remove(path: Path) -> None:
    """Remove an output of an earlier run. A folder with shutil.rmtree, which refuses a link as its top and, where
    the fd-based calls exist (Linux), removes the links inside without following them ("a symlink attack resistant
    version of rmtree() is used by default", https://docs.python.org/3/library/shutil.html#shutil.rmtree)."""
    status = path.lstat()
    if stat.S_ISLNK(status.st_mode):  # planted since the check
        raise _FolderError(f"{one_line(path)} is a symbolic link; the sandbox never removes one")
    if stat.S_ISDIR(status.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()
