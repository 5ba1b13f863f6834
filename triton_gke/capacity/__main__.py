"""triton-gke capacity COMMAND ...: the capacity records' commands.

    triton-gke capacity compare BASELINE NEW [--max-regression-percent 10]   # see capacity/compare.py

Records are written by the benchmark: `make bench ARGS=--record`, or `triton-gke bench record RESULTS_DIR` for a
finished run (bench/reports/record.py).
"""

from __future__ import annotations

import sys

from triton_gke.capacity import compare
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT

COMMANDS = {"compare": compare.main}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in COMMANDS:
        given = f"{argv[0]!r} is not a command" if argv else "a command is needed"
        print(f"error: triton-gke capacity: {given}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
