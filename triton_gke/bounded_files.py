"""The one bounded reader of files: regular files only, size-capped, UTF-8 checked, JSON depth-capped.

Every file the program reads that a user can name, or that the program wrote where a user could replace it, is
read through here (READERS in tests/unit/triton_gke/test_every_reader.py lists them all, and fails on a new one):
stack files and Pulumi.yaml (settings/stack_file.py, whose read_yaml_file adds YAML's depth and alias guard;
settings/schema.py, offline/runtime.py, offline/plan_folder.py), the replacement rules (offline/lifecycle.py), the
catalogues and the VM price table (settings/catalogue.py, settings/cost.py), capacity records, results.json
(bench/reports/record.py, bench/plans/results.py, bench/reports/report.py), plan JSON (offline/plan_diff.py) and the
plan's list of its files (offline/plan_out.py), the build manifest, cache digests and labels (model_repo/manifest.py,
model_repo/build.py, infra/model_upload.py), config.pbtxt and model.py (model_repo/sync_source.py,
model_repo/cpu_twin.py, bench/runners/runner.py), the sandbox's state, run-folder markers and Locust statistics
(sandbox/). The one exception is the Locust trace (loadtest/arrivals.py): it ships alone in the load generator's
ConfigMap, so it keeps a copy of
these few checks, driven by the same test. The sync record (model_repo/sync.py) comes from a bucket, not a file:
it shares json_depth.

A file that cannot be used is refused in ONE line naming it (read_text_file raises the caller's own error class
with that line), never a traceback and never a hang:

- not a regular file once links are resolved (a folder, a FIFO that would block open(2) and read(2) until a writer
  comes, /dev/zero that never ends, a socket): refused before it is opened, and again after (fstat), in case the
  path was swapped in between;
- larger than the caller's cap: at most cap + 1 bytes are ever read, whatever the file's size claims;
- NUL bytes (binary data) or not UTF-8;
- JSON (parse_json): nested deeper than MAX_JSON_DEPTH (checked on the text in linear time, before the parser
  recurses), NaN/Infinity (not JSON, though Python's json reads them), integers of more digits than Python converts.

The other direction has one home here too: output_folder_problem, the check of every command's output folder
(--out and its kin), says in one clause why a folder cannot take a command's files, before the command runs.

Standard library only and importing nothing of the project: it sits in the bottom layer of .importlinter, so every
room imports it without an import cycle.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

# Deeper than any JSON file this project writes or reads (a bench results.json nests 4 levels, a record 1), shallow
# enough that no parser or printer recursion is ever near Python's limit.
MAX_JSON_DEPTH = 32

# What os.stat calls a file that is not a regular one, for the message (https://docs.python.org/3/library/stat.html).
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),  # only where links are not followed
)


class NotRegularFileError(Exception):
    """The path (links resolved) is a folder, FIFO, device or socket: reading it could hang or never end."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind}, not a regular file")
        self.kind = kind


class UnreadableFileError(ValueError):
    """A file that cannot be used; str() is one line naming it (the default error of read_text_file/parse_json)."""


def one_line(text: Path | str) -> str:
    """A path or text for a one-line message: control characters (a line break in a file name) as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def read_regular_file(path: Path, cap: int, *, follow_links: bool = True) -> bytes:
    """At most cap + 1 bytes of `path`, which must be a regular file once links are resolved (so a caller sees "more
    than cap"). NotRegularFileError otherwise, OSError when it cannot be opened (ELOOP for a link when not
    follow_links: a marker the program wrote itself is never a link).

    The file's size cannot bound the read: /dev/zero and a FIFO report st_size 0 and /dev/zero never ends, a FIFO
    blocks open(2) and read(2) until a writer comes (fifo(7), https://man7.org/linux/man-pages/man7/fifo.7.html).
    So os.stat refuses them before anything is opened; the file is then opened O_NONBLOCK (an open that does not
    wait for a FIFO's writer, open(2)) and checked again with fstat, in case the path was swapped in between.
    """
    _refuse_special(os.stat(path, follow_symlinks=follow_links).st_mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        _refuse_special(info.st_mode)
        # read(n) allocates n bytes before it reads: ask for what the (regular) file holds, plus one byte to see
        # whether it grew since; only a file that did is read on, up to the cap.
        want = min(cap, info.st_size) + 1
        data = handle.read(want)
        if len(data) == want and want <= cap:
            data += handle.read(cap + 1 - want)
        return data


def _refuse_special(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(next((kind for test, kind in _KINDS if test(mode)), "a special file"))


def read_capped_file(
    path: Path,
    cap: int,
    what: str,
    error: Callable[[str], Exception] = UnreadableFileError,
    *,
    follow_links: bool = True,
) -> bytes:
    """The bytes of `path`, a regular file of at most `cap` bytes; otherwise `error(line)`, the line naming the file
    and saying what is wrong ("what": the file's kind, e.g. "a capacity record file")."""
    shown = one_line(path)
    try:
        data = read_regular_file(Path(path), cap, follow_links=follow_links)
    except NotRegularFileError as err:
        real = os.path.realpath(path)
        where = shown if one_line(real) == one_line(os.path.abspath(path)) else f"{shown} ({one_line(real)})"
        raise error(f"{where}: {err}; {what} is a regular file") from None
    except FileNotFoundError:
        raise error(f"{shown}: no such file ({what})") from None
    except OSError as err:
        raise error(f"{shown}: cannot read it ({one_line(err.strerror or err)})") from None
    except ValueError as err:  # a path with a NUL character: os.stat refuses it
        raise error(f"{shown}: not a usable path ({one_line(err)})") from None
    if len(data) > cap:
        raise error(f"{shown}: more than {cap:,} bytes; not {what}")
    return data


def read_text_file(
    path: Path,
    cap: int,
    what: str,
    error: Callable[[str], Exception] = UnreadableFileError,
    *,
    follow_links: bool = True,
) -> str:
    """The UTF-8 text of `path`, a regular file of at most `cap` bytes without NUL bytes; otherwise `error(line)`,
    the line naming the file and saying what is wrong ("what": the file's kind, e.g. "a capacity record file")."""
    data = read_capped_file(path, cap, what, error, follow_links=follow_links)
    shown = one_line(path)
    nul = data.find(b"\0")
    if nul >= 0:
        raise error(f"{shown}: binary data (a NUL byte at {nul}); not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{shown}: not UTF-8 text (byte {err.start}); not {what}") from None


# A JSON string (escapes included) or a bracket: strings are blanked before brackets are counted.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), in linear time and without recursion."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (not a finite number)")


def parse_json(
    text: str,
    where: Path | str,
    error: Callable[[str], Exception] = UnreadableFileError,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    **options: Any,
) -> Any:
    """json.loads(text, **options), refusing in one line naming `where`: nesting deeper than max_depth, NaN and
    Infinity, integers of more digits than Python converts, and anything not JSON. `options` are json.loads'
    (parse_float=decimal.Decimal, object_pairs_hook=...); a hook or parse function may raise ValueError with one
    line, which is passed on after the file's name."""
    shown = one_line(where)
    depth = json_depth(text)
    if depth > max_depth:
        raise error(f"{shown}: nested {depth} levels deep, more than {max_depth}; not a file this toolkit writes")
    options.setdefault("parse_constant", _no_constant)
    try:
        return json.loads(text, **options)
    except json.JSONDecodeError as err:
        raise error(f"{shown}: not valid JSON: {err.msg} (line {err.lineno} column {err.colno})") from None
    except RecursionError:  # depth is checked above; kept for a caller's max_depth beyond the parser's reach
        raise error(f"{shown}: not valid JSON: nested too deeply") from None
    except ValueError as err:  # parse_constant, a hook, or an integer of too many digits (sys.set_int_max_str_digits)
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise error(f"{shown}: {one_line(problem)[:200]}") from None


# ---------------------------------------------------------------- output folders

# The longest file or folder name and the longest path Linux takes (limits.h NAME_MAX, PATH_MAX, the terminating NUL
# included); a longer one is ENAMETOOLONG from every call (https://man7.org/linux/man-pages/man2/mkdir.2.html).
NAME_MAX = 255
PATH_MAX = 4096
OUT_PROBE_PREFIX = ".triton-gke-probe-"


def output_folder_problem(path: Path) -> str | None:
    """Why a command could not make `path` its output folder and write its files there (one clause), or None.

    The one check of every output folder option (sandbox, plan, bench and its tuners, gpu-check, model-repo custom,
    dashboards), before any work. Tried, not guessed: the missing folders are made, a probe file is created in
    `path`, and all of them are removed again, so whatever refuses a write is found: /proc (mkdir(2) there fails,
    ENOENT), /sys (EROFS or EACCES), a read-only mount, a folder without write permission, a path under a file
    (ENOTDIR). Permission bits are not read instead (os.access): root, the user of most containers, writes through
    them (capabilities(7), https://man7.org/linux/man-pages/man7/capabilities.7.html: CAP_DAC_OVERRIDE "Bypass file
    read, write, and execute permission checks"), so a mode-0555 folder is writable there and refused elsewhere.
    """
    text = str(path)
    if "\0" in text:  # os calls raise ValueError ("embedded null byte"), not OSError
        return "a path cannot hold a NUL byte"
    encoded = os.fsencode(text)
    if len(encoded) >= PATH_MAX or any(len(name) > NAME_MAX for name in encoded.split(b"/")):
        return f"longer than a path may be ({PATH_MAX - 1} bytes, {NAME_MAX} per file or folder name)"
    return _nearest_existing_problem(Path(path)) or _write_probe_problem(Path(path))


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:  # absent, or below a file (ENOTDIR): the nearest existing part says which
        return None


def _nearest_existing_problem(path: Path) -> str | None:
    """The nearest part of `path` that exists must be a folder, or a link to one (a dangling link is refused)."""
    for part in (path, *path.parents):
        status = _lstat(part)
        if status is None:
            continue
        if stat.S_ISLNK(status.st_mode):
            try:
                status = part.stat()
            except OSError:
                return f"{one_line(part)} is a symbolic link to nothing"
        return None if stat.S_ISDIR(status.st_mode) else f"{one_line(part)} exists and is not a folder"
    return None


def _write_probe_problem(path: Path) -> str | None:
    """Make what is missing and a probe file, then remove them (the deepest first): None when that worked.

    Two commands may probe the same missing folders at once (the test workers' model builds into one build/ did, and
    two `make model-repo` can): a folder the other made is used, not an error, and one the other removed under us
    is made again, so only a refusal that stays (EACCES, EROFS, ENOTDIR, ...) is reported.
    """
    for _ in range(_PROBE_TRIES - 1):
        try:
            return _probe_once(path)
        except (FileExistsError, FileNotFoundError):  # the other prober made or removed a folder in between
            continue
    try:
        return _probe_once(path)
    except OSError as err:
        return f"cannot write there ({one_line(err.strerror or err)})"


_PROBE_TRIES = 20


def _probe_once(path: Path) -> str | None:
    """One try; FileExistsError or FileNotFoundError when another process changed the missing folders meanwhile."""
    missing = [part for part in (path, *path.parents) if _lstat(part) is None][::-1]
    try:
        for folder in missing:
            try:
                folder.mkdir()
            except FileExistsError:
                if not folder.is_dir():
                    raise
                # another prober made it: used, and removed by whichever of us leaves last (rmdir needs it empty)
        handle, probe = tempfile.mkstemp(prefix=OUT_PROBE_PREFIX, dir=path)
        os.close(handle)
        os.unlink(probe)
    except (FileExistsError, FileNotFoundError):
        raise
    except OSError as err:
        return f"cannot write there ({one_line(err.strerror or err)})"
    finally:
        for folder in reversed(missing):
            with contextlib.suppress(OSError):  # not empty: another prober or build is using it
                folder.rmdir()
    return None
