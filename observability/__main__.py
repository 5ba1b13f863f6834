"""Regenerate dashboards/*.json from observability.dashboards (--check: only report stale files)."""

from __future__ import annotations

import sys
from pathlib import Path

from triton_gke.cli.one_line import OneLineParser
from triton_gke.observability.dashboards import DASHBOARD_DIR, stale_dashboards, write_dashboards


def main(argv: list[str] | None = None) -> int:
    # OneLineParser: a bad option is one line and exit 2, as in every other subcommand (exit 1 is --check's).
    parser = OneLineParser(prog="triton-gke dashboards", description=__doc__)
    parser.add_argument("--out", type=Path, default=DASHBOARD_DIR, help=f"folder (default {DASHBOARD_DIR})")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs from the generated JSON")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_dashboards(args.out)
        for name in stale:
            print(f"{args.out / name}: out of date; run `triton-gke dashboards`", file=sys.stderr)
        return 1 if stale else 0
    for path in write_dashboards(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
