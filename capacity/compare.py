"""python -m capacity compare BASELINE NEW [--max-regression-percent 10]: did capacity drop?

BASELINE and NEW are record files or folders of them (capacity/records/, or the records/ folder `make bench`
writes into its --out). One row per (gpu, variant, SLO latency): the baseline's max_rps_per_gpu, the new one and
the change in percent. Where one side holds several image tags for a row, its newest record stands for it (the
row names both tags). Exit 1 when any rate dropped by more than the threshold, 2 on bad input (one line on
stderr), else 0. Rows on one side only are listed and never fail the comparison (a run may bench a subset).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from capacity.records import CapacityError, CapacityRecord, escaped, load_record, records_by_slo_key
from cli.one_line import OneLineParser

DEFAULT_THRESHOLD = 10.0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
# The names records.record_file_name gives (GPU__VARIANT__TAG__slo-Nms.json, -2... where two tags share one): in a
# folder only these are records, so a benchmark's --out (results.json, summary.csv beside records/) is no record.
RECORD_NAME = re.compile(r"[^_].*__.+__.+__slo-.+ms(-[0-9]+)?\.json")


@dataclass(frozen=True)
class Row:
    gpu: str
    variant: str
    slo_ms: float
    old: CapacityRecord | None
    new: CapacityRecord | None

    @property
    def change_pct(self) -> float | None:
        if self.old is None or self.new is None:
            return None
        return 100 * (self.new.max_rps_per_gpu - self.old.max_rps_per_gpu) / self.old.max_rps_per_gpu

    def regressed(self, threshold_pct: float) -> bool:
        change = self.change_pct
        return change is not None and -change > threshold_pct


def parser() -> argparse.ArgumentParser:
    # A bad option is raised as a CapacityError: main() prints it like every other refusal, one line, exit 2.
    p = OneLineParser(
        prog="python -m capacity compare",
        description=__doc__.split("\n\n")[0],
        hint=None,
        raise_as=CapacityError,
    )
    p.add_argument("baseline", type=Path, help="record file or folder of records to compare against")
    p.add_argument("new", type=Path, help="record file or folder of records measured since")
    p.add_argument(
        "--max-regression-percent",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"fail when a rate dropped by more than this (default {DEFAULT_THRESHOLD:g})",
    )
    return p


def read_side(path: Path) -> list[CapacityRecord]:
    """A record file, or every record of a folder (the files named as records are); none at all is bad input."""
    if path.is_dir():
        names = sorted(p for p in path.iterdir() if RECORD_NAME.fullmatch(p.name) and not p.is_dir())
        if not names:
            raise CapacityError(
                f"no capacity records in {escaped(path)} (record files are named GPU__VARIANT__TAG__slo-Nms.json)"
            )
        return [load_record(name) for name in names]  # each read strictly: a broken record is refused, not skipped
    if not path.exists():
        raise CapacityError(f"{escaped(path)}: no such record file or folder")
    return [load_record(path)]


def compare(baseline: list[CapacityRecord], new: list[CapacityRecord]) -> list[Row]:
    old_by_key, new_by_key = records_by_slo_key(baseline), records_by_slo_key(new)
    keys = sorted(old_by_key.keys() | new_by_key.keys())
    return [Row(*key, old_by_key.get(key), new_by_key.get(key)) for key in keys]


def _rate(record: CapacityRecord | None) -> str:
    return "-" if record is None else f"{record.max_rps_per_gpu:.1f}"


def _note(row: Row, threshold_pct: float) -> str:
    if row.old is None:
        return "only in the new records"
    if row.new is None:
        return "only in the baseline"
    notes = [f"REGRESSION beyond {threshold_pct:g} %"] if row.regressed(threshold_pct) else []
    if row.old.image_tag != row.new.image_tag:
        notes.append(f"image {row.old.image_tag} -> {row.new.image_tag}")
    if row.old.source != row.new.source:
        notes.append(f"{row.old.source} -> {row.new.source}")
    return "; ".join(notes)


def table(rows: list[Row], threshold_pct: float) -> list[str]:
    header = ("gpu", "variant", "SLO", "old req/s", "new req/s", "change", "")
    body = [
        (
            row.gpu,
            row.variant,
            f"p95<={row.slo_ms:g}ms",
            _rate(row.old),
            _rate(row.new),
            "-" if row.change_pct is None else f"{row.change_pct:+.1f}%",
            _note(row, threshold_pct),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *body)
    ]


def check_threshold(value: float) -> float:
    if not (math.isfinite(value) and 0 <= value < 100):
        raise CapacityError(f"--max-regression-percent {value:g}: expected a percentage from 0 to below 100")
    return value


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(sys.argv[1:] if argv is None else argv)
        threshold = check_threshold(args.max_regression_percent)
        rows = compare(read_side(args.baseline), read_side(args.new))
        if not any(row.change_pct is not None for row in rows):
            raise CapacityError(
                f"{escaped(args.baseline)} and {escaped(args.new)} share no (gpu, variant, SLO latency): "
                "nothing to compare"
            )
    except CapacityError as err:
        print(f"error: {escaped(str(err))}", file=sys.stderr)  # one line, whatever a message quotes
        return EXIT_BAD_INPUT
    for line in table(rows, threshold):
        print(line)
    compared = [row for row in rows if row.change_pct is not None]
    regressed = [row for row in compared if row.regressed(threshold)]
    if regressed:
        names = ", ".join(f"{row.gpu}/{row.variant}" for row in regressed)
        print(f"regression: {len(regressed)} of {len(compared)} rates dropped by more than {threshold:g} % ({names})")
        return EXIT_REGRESSION
    print(f"ok: none of {len(compared)} rates dropped by more than {threshold:g} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
