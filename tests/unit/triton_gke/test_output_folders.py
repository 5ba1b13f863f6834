"""Issue 44, bad inputs 1 and 2: an output folder that is not a folder or cannot be written (an existing file, a path
under /proc or /sys) ended the sandbox in a traceback. Every command's output folder now goes through one check,
bounded_files.output_folder_problem, before any work: one line naming the option, exit 2, nothing left behind.

The families are generated: paths that are files, FIFOs, devices or dangling links (and paths below them), paths
under /proc and /sys, names longer than Linux takes, NUL bytes, read-only folders. Root writes into a mode-0555
folder (CAP_DAC_OVERRIDE, capabilities(7)), so there the check must agree with an actual write, not with the bits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_gke.bounded_files import NAME_MAX, PATH_MAX, output_folder_problem

# A file or folder name: anything Linux takes in one path component (no '/', no NUL), '.' and '..' aside.
NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=12
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) <= NAME_MAX)
BELOW = st.lists(NAMES, max_size=3)


@pytest.fixture(scope="module")
def things(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Paths that exist and are no folder a command can write into."""
    root = tmp_path_factory.mktemp("not-folders")
    (root / "file").write_text("a user's file\n")
    os.mkfifo(root / "fifo")
    (root / "dangling").symlink_to(root / "nowhere" / "at-all")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "socket"))
    read_only = root / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    yield {
        "file": root / "file",
        "fifo": root / "fifo",
        "socket": root / "socket",
        "dangling": root / "dangling",
        "device": Path("/dev/null"),
        "read-only": read_only,
    }
    listener.close()
    read_only.chmod(0o755)


def _not_a_folder(things: dict[str, Path]) -> st.SearchStrategy[Path]:
    kinds = st.sampled_from(["file", "fifo", "socket", "dangling", "device"])
    return st.builds(lambda kind, below: things[kind].joinpath(*below), kinds, BELOW)


def _not_writable() -> st.SearchStrategy[Path]:
    # procfs and sysfs take no new file or folder from anyone, root included (proc(5), sysfs(5)).
    roots = st.sampled_from(["/proc", "/proc/self", "/proc/sys", "/sys", "/sys/kernel", "/sys/fs"])
    return st.builds(lambda top, first, below: Path(top, first, *below), roots, NAMES, BELOW)


def _too_long(things: dict[str, Path]) -> st.SearchStrategy[Path]:
    base = things["file"].parent
    one_name = st.integers(NAME_MAX + 1, 2 * NAME_MAX).map(lambda n: base / ("n" * n))
    whole_path = st.integers(PATH_MAX // 200 + 1, PATH_MAX // 200 + 5).map(lambda n: base.joinpath(*["p" * 200] * n))
    return st.one_of(one_name, whole_path)


def _with_nul(things: dict[str, Path]) -> st.SearchStrategy[Path]:
    return st.builds(lambda a, b: things["file"].parent / f"{a}\0{b}", NAMES, NAMES)


def bad_paths(things: dict[str, Path], nul: bool = True) -> st.SearchStrategy[Path]:
    families = [_not_a_folder(things), _not_writable(), _too_long(things)]
    return st.one_of(*families, *([_with_nul(things)] if nul else []))


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_path_that_cannot_be_an_output_folder_is_refused_in_one_line(
    things: dict[str, Path], data: st.DataObject
) -> None:
    root = things["file"].parent
    before = tree(root)
    path = data.draw(bad_paths(things), label="path")
    problem = output_folder_problem(path)
    assert problem is not None, path
    assert problem.isprintable(), problem  # one line: no line break, tab, U+2028 or NEL from the path
    assert tree(root) == before  # the check made and removed its probe folders, and nothing else


def _really_writable(folder: Path) -> bool:
    """The oracle: a file created and removed in the folder."""
    try:
        handle, probe = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(handle)
    os.unlink(probe)
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(below=BELOW)
def test_a_read_only_folder_is_judged_by_a_write_not_by_its_bits(things: dict[str, Path], below: list[str]) -> None:
    """Under root (this sandbox's user) a mode-0555 folder is writable and accepted; under any other user refused."""
    read_only = things["read-only"]
    path = read_only.joinpath(*below)
    assert (output_folder_problem(path) is None) == _really_writable(read_only), path
    assert tree(read_only) == []


@settings(max_examples=100, deadline=None)
@given(names=st.lists(NAMES, min_size=1, max_size=4))
def test_a_new_folder_anywhere_writable_is_accepted_and_nothing_is_left(names: list[str]) -> None:
    """Any name Linux takes, line breaks and U+2028 included (the messages escape them), is a folder one can make."""
    with tempfile.TemporaryDirectory() as folder:
        assert output_folder_problem(Path(folder).joinpath(*names)) is None
        assert list(Path(folder).iterdir()) == []


@pytest.mark.parametrize("depth", [1, 3])
def test_two_commands_probing_the_same_missing_folders_at_once_are_both_accepted(tmp_path: Path, depth: int) -> None:
    """CI of b7f66e0: the four test workers each built build/model_repository at once and three were refused (one
    prober's mkdir found the other's folder, or the other removed it in between). Eight threads (mkdir and rmdir
    release the GIL) start the probe together, fifty rounds: every answer is None, and no probe file is left (a folder a
    late prober found made may stay, empty: both commands write into it next)."""
    for round_ in range(50):
        target = tmp_path.joinpath(*[f"r{round_}-{level}" for level in range(depth)])
        start = threading.Barrier(8)

        def probe(target: Path = target, start: threading.Barrier = start) -> str | None:
            start.wait()
            return output_folder_problem(target)

        with ThreadPoolExecutor(8) as pool:
            got = [answer.result() for answer in [pool.submit(probe) for _ in range(8)]]
        assert got == [None] * 8, (round_, got)
    assert [p for p in tmp_path.rglob("*") if not p.is_dir()] == []


# ---------------------------------------------------------------- every command's output folder, through main()


def _sandbox(out: str) -> int:
    from triton_gke.sandbox.run import main

    return main(["--out", out])


def _plan(out: str) -> int:
    from triton_gke.offline.plan import main

    return main(["--out", out])


def _dashboards(out: str) -> int:
    from triton_gke.observability.__main__ import main

    return main(["--out", out])


def _model_repo(out: str) -> int:
    from triton_gke.model_repo.__main__ import main

    return main(["--out", out])


def _reference(out: str) -> int:
    from triton_gke.reference import main

    try:
        return main(["--out", out])
    except SystemExit as exit_:  # OneLineParser.error: one line, exit 2
        return int(exit_.code or 0)


def _gpu_check(out: str) -> int:
    """gpu-check's results folder (its main first needs a built TensorRT repository, which is no input here)."""
    import datetime

    from triton_gke.model_repo.gpu_check import GpuCheckError, results_folder

    try:
        results_folder(Path(out), None, datetime.date(2026, 12, 3))  # type: ignore[arg-type]
    except GpuCheckError as err:
        print(f"error: {err}", file=__import__("sys").stderr)
        return 2
    return 0


COMMANDS: dict[str, Callable[[str], int]] = {
    "sandbox": _sandbox,
    "plan": _plan,
    "dashboards": _dashboards,
    "model-repo custom": _model_repo,
    "reference": _reference,
    "gpu-check": _gpu_check,
}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), command=st.sampled_from(sorted(COMMANDS)))
def test_every_commands_output_folder_option_refuses_the_family_in_one_line(
    things: dict[str, Path], data: st.DataObject, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = data.draw(bad_paths(things, nul=False), label="out")  # a command line cannot carry a NUL byte
    capsys.readouterr()
    with contextlib.chdir(Path(__file__).parents[3]):
        code = COMMANDS[command](str(path))
    err = capsys.readouterr().err
    assert code == 2, (command, path, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert "out" in err.split(":", 3)[1] + err.split(":", 3)[2], err  # names the option (--out, or the builder's out)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("below", [(), ("0",), ("0", "1")])
def test_no_command_writes_through_a_link_to_nothing(
    tmp_path: Path, command: str, below: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the property test above on a fresh clone: `model-repo custom --out LINK` resolved the link to the
    folder it names and built there (exit 0), after which that link was no longer dangling for the next command."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "at-all")
    with contextlib.chdir(Path(__file__).parents[3]):
        code = COMMANDS[command](str((tmp_path / "dangling").joinpath(*below)))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "link" in err, err
    assert not (tmp_path / "nowhere").exists()


def test_a_rollout_folder_that_is_a_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rollout scenario removes OUT/rollout and makes it again: a link there would end in a traceback. OUT is an
    earlier run's (its list names rollout: sandbox/out_folder.py), else it is refused for holding a stranger's file."""
    from triton_gke.sandbox.out_folder import WRITTEN_LIST
    from triton_gke.sandbox.run import main

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "rollout").symlink_to(tmp_path / "elsewhere")
    (tmp_path / WRITTEN_LIST).write_text("rollout\n")
    assert main(["--scenario", "rollout", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --out {tmp_path}: {tmp_path / 'rollout'} is a symbolic link; the sandbox never removes one\n"
    assert stat.S_ISLNK((tmp_path / "rollout").lstat().st_mode)
