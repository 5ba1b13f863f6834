"""The bench commands' kernel: the options they share and the one way each runs (issue 45).

    p = command.BenchParser(prog=PROG, description=..., epilog=...)
    p.add_stack("variant and SLO")            # --stack, defined here once (likewise --variant, --out, --build-dir)
    ...
    def main(argv=None):
        return command.run(argv, _body, stopped="stopped the server it started")

`bench`, `bench tune`, `bench model-analyzer`, `bench loop-check` and `bench compare-tuners` each had their own copy
of these options, of the run folder, of the signal handling and of the `except` ladder that turns bad input into one
line and exit 2. A new command is its parser and its body; tests/unit/bench/test_command.py enumerates the bench
commands of the dispatcher (cli/main.py) and fails for one that skips this kernel.

A shared option is added where the command wants it in its --help (argparse's `parents=` would put every shared
option first and reorder each command's help), but always by one method here, so its spelling, default and help
pattern have one home.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from triton_gke.bench.runners.runner import BenchError, bench_build_dir, results_dir
from triton_gke.bounded_files import one_line
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import BENCH_RESULTS
from triton_gke.one_line import OneLineParser
from triton_gke.sandbox import run_folder
from triton_gke.sandbox.processes import run_interruptible

DEFAULT_STACK = "dev"
VARIANT_DEFAULT = "the stack's capacityVariant, else locustModel"  # tuners/tune_options.py pick_variant


class BenchParser(OneLineParser):
    """A bench command's parser: a bad option is raised as a BenchError, so run() prints it like every other refusal
    (one line, exit 2); the shared options are added by the methods below; --stack is checked as it is parsed (it
    names the default --out folder, the stack file and a build folder: a path like '../dev' must reach none)."""

    def __init__(self, *, prog: str, description: str, epilog: str) -> None:
        super().__init__(prog=prog, description=description, epilog=epilog, hint=None, raise_as=BenchError)
        self.out_prefix: str | None = None
        self.shared: set[str] = set()  # the dests of the options added here (tests/unit/bench/test_command.py)

    def _shared(self, *args: Any, **kwargs: Any) -> None:
        self.shared.add(self.add_argument(*args, **kwargs).dest)

    def add_stack(self, applies: str) -> None:
        """--stack: `applies` names what of the stack the command uses ("variant and SLO")."""
        self._shared("--stack", default=DEFAULT_STACK, help=f"stack whose {applies} apply (default dev)")

    def add_variant(self, what: str = "the variant") -> None:
        self._shared("--variant", help=f"{what} (default: {VARIANT_DEFAULT})")

    def add_out(self, prefix: str, *, new_or_empty: bool = False, as_path: bool = False) -> None:
        """--out, by default results/bench/<prefix><stack>-<date> (default_out). Taken as text unless as_path:
        the command then refuses '' itself (Path('') would already be '.')."""
        self.out_prefix = prefix
        kind = "output folder, new or empty" if new_or_empty else "output folder"
        self._shared(
            "--out", type=Path if as_path else None, help=f"{kind} (default {BENCH_RESULTS}/{prefix}<stack>-<date>)"
        )

    def add_build_dir(self, *, twins: bool = False, as_path: bool = False) -> None:
        built = "the CPU twins are built" if twins else "the CPU twin is built"
        self._shared("--build-dir", type=Path if as_path else None, default=bench_build_dir(), help=f"where {built}")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        from triton_gke.settings.stack import check_stack_name

        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "stack", None) is not None:
            check_stack_name(parsed.stack, "--stack")
        return parsed

    def default_out(self, args: argparse.Namespace, stamp: datetime.datetime) -> Path:
        """--out as given, else the dated folder its help names, under the project's results/bench."""
        if self.out_prefix is None:
            raise TypeError(f"{self.prog}: default_out without add_out")
        return Path(args.out) if args.out else results_dir() / f"{self.out_prefix}{args.stack}-{stamp:%Y-%m-%d}"


def run(
    argv: list[str] | None,
    body: Callable[[list[str]], int],
    *,
    stopped: str,
    refuse: tuple[type[Exception], ...] = (),
) -> int:
    """body(argv)'s exit code, run the one way every bench command runs:

    - inside one run folder (sandbox/run_folder.py): every temporary folder of the run, its servers' and Locust's,
      removed at the end; a run killed by SIGKILL leaves it for the next run to remove;
    - SIGINT, SIGTERM or SIGHUP stop what the body started (its `with` blocks) and end it with one line,
      "interrupted by SIGINT: <stopped>", and exit 128 + the signal (sandbox/processes.py run_interruptible);
    - bad input (BAD_INPUT, the command's own `refuse`, an OSError such as an --out below a file) is one line,
      "error: ...", and exit 2, never a traceback. Other exit codes are the body's."""
    words = sys.argv[1:] if argv is None else argv
    with run_folder.this_run():
        return run_interruptible(lambda: _refusing(body, words, refuse), stopped)


def bad_input() -> tuple[type[Exception], ...]:
    """The errors that mean the input cannot work: options, the stack file, the model repository, capacity records.
    Imported when a command runs (the settings' modules are slow to import; --help of the dispatcher is not)."""
    from triton_gke.capacity.records import CapacityError
    from triton_gke.model_repo.errors import ModelRepoError
    from triton_gke.settings import ConfigError

    return (BenchError, ConfigError, ModelRepoError, CapacityError)


def _refusing(body: Callable[[list[str]], int], argv: list[str], refuse: tuple[type[Exception], ...]) -> int:
    try:
        return body(argv)
    except (*bad_input(), *refuse) as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:  # --build-dir a file, a folder not writable: the path and the reason, not a traceback
        where = (
            f"{one_line(str(err.filename))}: {err.strerror}" if err.filename and err.strerror else one_line(str(err))
        )
        print(f"error: {where}", file=sys.stderr)
        return EXIT_BAD_INPUT


def log(line: str) -> None:
    """A progress line on stderr (stdout carries the written paths and the results)."""
    print(line, file=sys.stderr, flush=True)
