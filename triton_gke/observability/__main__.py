"""Regenerate dashboards/*.json from observability.dashboards (--check: only report stale files).

The folder is the project's dashboards/ (the current folder's: in this repository, the committed files), or --out.
A folder the command cannot write to as a plain folder (a file, a FIFO, /dev/null, a symbolic link, or a link
among the files it writes) is refused in one line, exit 2, before anything is written, as `triton-gke plan --out`
refuses one (offline/plan.py): nothing is ever written through a link.
"""

from __future__ import annotations

import sys
from pathlib import Path

from triton_gke.bounded_files import output_folder_problem
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import DASHBOARD_DIR, in_checkout
from triton_gke.observability.dashboards import dashboards, stale_dashboards, write_dashboards
from triton_gke.one_line import OneLineParser, folder_path

PROG = "triton-gke dashboards"


class OutError(Exception):
    """The --out folder cannot take the dashboards; str() is one line."""


def check_out(out: Path, writing: bool) -> None:
    """Refuse a path that exists and is no folder; when writing, a link as the folder or as one of its files."""
    if writing and out.is_symlink():
        raise OutError(f"{out} is a symbolic link; dashboards are never written through a link (remove it)")
    if out.exists() and not out.is_dir():
        raise OutError(f"{out} exists and is not a folder")
    if not writing:
        return
    problem = output_folder_problem(out)  # /proc, /sys, a read-only folder, a name too long: before anything is written
    if problem is not None:
        raise OutError(f"{out}: {problem}")
    for name in dashboards():
        if (out / name).is_symlink():
            raise OutError(f"{out / name} is a symbolic link; dashboards are never written through a link (remove it)")
        if (out / name).exists() and not (out / name).is_file():
            raise OutError(f"{out / name} exists and is not a regular file")


def _parser() -> OneLineParser:
    # OneLineParser: a bad option is one line and exit 2, as in every other subcommand (exit 1 is --check's).
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=folder_path, metavar="DIR", help="folder (default: dashboards/ of the current folder)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs from the generated JSON")
    return parser


def _refuse(message: str) -> int:
    print(f"error: {PROG}: --out {' '.join(message.split())}", file=sys.stderr)
    return EXIT_BAD_INPUT


def default_out() -> Path:
    """dashboards/ of the current folder; in this repository's checkout the package's own folder, which the
    top-level dashboards/ only links to (a link is refused as --out, and the wheel ships the package's copy)."""
    return DASHBOARD_DIR if in_checkout() else Path.cwd() / "dashboards"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out: Path = args.out or default_out()
    try:
        check_out(out, writing=not args.check)
        if args.check:
            stale = stale_dashboards(out)
        else:
            written = write_dashboards(out)
    except OutError as err:
        return _refuse(str(err))
    except OSError as err:  # a parent that is a file, no permission, a full disk: one line naming the path
        return _refuse(f"{err.filename or out}: {err.strerror or err}")
    if args.check:
        for name in stale:
            state = "out of date" if (out / name).exists() else "missing"
            print(f"{out / name}: {state}; run `triton-gke dashboards`", file=sys.stderr)
        return 1 if stale else 0
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
