"""triton-gke capacity compare BASELINE NEW [--max-regression-percent 10]: did capacity drop?

BASELINE and NEW are record files or folders of them (capacity/records/, or the records/ folder `make bench`
writes into its --out; in a folder only the files named as records are read). Records are paired only at the same
gpu, variant, SLO latency, latency percentile and failure budget (a p99 rate or one that let 20 % of requests fail
is no measure of a p95, 1 % one). Each new record gets a row: against the baseline record of its image tag, else
the baseline's newest record of that SLO (an image upgrade is what the command checks), so two image tags on the
new side are two rows, each compared. A baseline record no row was compared with gets a row of its own. Exit 1
when any rate dropped by more than the threshold, 2 on bad input (one line on stderr), else 0. Rows on one side
only are listed as such and never fail the comparison (a run may bench a subset).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from triton_gke.capacity.records import (
    RECORD_NAME,
    CapacityError,
    CapacityRecord,
    escaped,
    load_record,
    newest,
    number,
    record_files,
)
from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED
from triton_gke.one_line import OneLineParser

__all__ = ["RECORD_NAME", "main"]

DEFAULT_THRESHOLD = 10.0

SloGroup = tuple[str, str, float, float, float]


def _exact(value: float | Decimal) -> Fraction:
    """A figure as the decimal it is written as (a float by its shortest repr, 27.4 not 27.39999...), exactly."""
    return Fraction(value) if isinstance(value, Decimal) else Fraction(repr(float(value)))


def slo_group(record: CapacityRecord) -> SloGroup:
    """What two records must share to be compared: gpu, variant and the whole SLO (latency, percentile, failures)."""
    return (record.gpu, record.variant, record.slo_latency_ms, record.slo_percentile, record.max_failure_percent)


@dataclass(frozen=True)
class Row:
    group: SloGroup
    old: CapacityRecord | None
    new: CapacityRecord | None
    why_unpaired: str = ""  # for a row on one side only: what the other side has instead, if anything

    @property
    def gpu(self) -> str:
        return self.group[0]

    @property
    def variant(self) -> str:
        return self.group[1]

    @property
    def change(self) -> Fraction | None:
        """The rate's change in percent, exactly: computed on the decimals the record files show (30 -> 27 is
        -10 exactly, where floats give -10.000000000000002 for some rates and a 10 % limit would call it a drop of
        more than 10 %)."""
        if self.old is None or self.new is None:
            return None
        old, new = _exact(self.old.max_rps_per_gpu), _exact(self.new.max_rps_per_gpu)
        return 100 * (new - old) / old

    @property
    def change_pct(self) -> float | None:
        change = self.change
        return None if change is None else float(change)

    def regressed(self, threshold_pct: float | Decimal) -> bool:
        """Whether the rate dropped by MORE than the threshold (a drop of exactly the threshold passes), compared
        exactly: the change as a fraction of the files' decimals, the threshold as the decimal it was given."""
        change = self.change
        return change is not None and -change > _exact(threshold_pct)


def parser() -> argparse.ArgumentParser:
    # A bad option is raised as a CapacityError: main() prints it like every other refusal, one line, exit 2.
    p = OneLineParser(
        prog="triton-gke capacity compare",
        description=__doc__.split("\n\n")[0],
        hint=None,
        raise_as=CapacityError,
    )
    p.add_argument("baseline", type=Path, help="record file or folder of records to compare against")
    p.add_argument("new", type=Path, help="record file or folder of records measured since")
    p.add_argument(
        "--max-regression-percent",
        type=float,  # check_threshold takes it as the decimal given (its shortest repr: 7.1, not 7.0999...)
        default=DEFAULT_THRESHOLD,
        help=f"fail when a rate dropped by more than this percentage; exactly this passes (default "
        f"{DEFAULT_THRESHOLD:g})",
    )
    return p


def read_side(path: Path) -> list[CapacityRecord]:
    """A record file, or every record of a folder (the files named as records are); none at all is bad input. A
    folder holding one key (gpu, variant, image tag, SLO latency) in two files is refused, as load_records does."""
    if path.is_dir():
        names = record_files(path)
        if not names:
            raise CapacityError(
                f"no capacity records in {escaped(path)} (record files are named GPU__VARIANT__TAG__slo-Nms.json)"
            )
        records = [load_record(name) for name in names]  # each read strictly: a broken record is refused, not skipped
        _check_one_file_per_key(records)
        return records
    if not path.exists():
        raise CapacityError(f"{escaped(path)}: no such record file or folder")
    return [load_record(path)]


def _check_one_file_per_key(records: list[CapacityRecord]) -> None:
    first: dict[tuple[str, str, str, float], Path] = {}
    for record in records:
        if record.key in first:
            raise CapacityError(
                f"{escaped(record.path)}: holds the same gpu, variant, image_tag and slo_latency_ms as "
                f"{escaped(first[record.key])}: which one to compare is unclear; keep one file per record"
            )
        first[record.key] = record.path


def compare(baseline: list[CapacityRecord], new: list[CapacityRecord]) -> list[Row]:
    """Every record of both sides in at least one row; a new record is paired only within its SLO group."""
    old_groups: dict[SloGroup, list[CapacityRecord]] = {}
    for record in baseline:
        old_groups.setdefault(slo_group(record), []).append(record)
    rows: list[Row] = []
    used: set[Path] = set()
    for record in new:
        candidates = old_groups.get(slo_group(record), [])
        same_tag = [r for r in candidates if r.image_tag == record.image_tag]
        old = same_tag[0] if same_tag else newest(candidates) if candidates else None
        if old is not None:
            used.add(old.path)
        rows.append(Row(slo_group(record), old, record, "" if old else _unpaired(record, baseline, "the baseline has")))
    rows += [
        Row(slo_group(r), r, None, _unpaired(r, new, "the new records have")) for r in baseline if r.path not in used
    ]
    return sorted(rows, key=_row_order)


def _row_order(row: Row) -> tuple[SloGroup, str, str]:
    return row.group, row.old.image_tag if row.old else "", row.new.image_tag if row.new else ""


def _unpaired(record: CapacityRecord, other_side: list[CapacityRecord], other_name: str) -> str:
    """Why a record has no partner: what the other side holds at the same gpu, variant and SLO latency, if any."""
    others = sorted(
        {_slo_text(r) for r in other_side if r.slo_key == record.slo_key and slo_group(r) != slo_group(record)}
    )
    return f" ({other_name} {', '.join(others)} here: not comparable)" if others else ""


def _slo_text(record: CapacityRecord) -> str:
    latency, failures = number(record.slo_latency_ms), number(record.max_failure_percent)
    return f"p{number(record.slo_percentile)}<={latency}ms,fail<={failures}%"


def _rate(record: CapacityRecord | None) -> str:
    return "-" if record is None else f"{record.max_rps_per_gpu:.1f}"


def _note(row: Row, threshold_pct: float) -> str:
    if row.new is None or row.old is None:
        side, record = ("baseline", row.old) if row.new is None else ("new records", row.new)
        return f"image {record.image_tag}: only in the {side}{row.why_unpaired}"  # type: ignore[union-attr]
    notes = [f"REGRESSION beyond {threshold_pct:g} %"] if row.regressed(threshold_pct) else []
    if row.old.image_tag != row.new.image_tag:
        notes.append(f"image {row.old.image_tag} -> {row.new.image_tag}")
    else:
        notes.append(f"image {row.new.image_tag}")
    if row.old.source != row.new.source:
        notes.append(f"{row.old.source} -> {row.new.source}")
    return "; ".join(notes)


def table(rows: list[Row], threshold_pct: float) -> list[str]:
    header = ("gpu", "variant", "SLO", "old req/s", "new req/s", "change", "")
    body = [
        (
            row.gpu,
            row.variant,
            _slo_text(row.new or row.old),  # type: ignore[arg-type]  # a row has at least one side
            _rate(row.old),
            _rate(row.new),
            "-" if row.change_pct is None else f"{row.change_pct:+.1f}%",
            escaped(_note(row, threshold_pct)),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *body)
    ]


def _regressed_names(rows: list[Row], regressed: list[Row]) -> str:
    """gpu/variant of each regressed row, with the new image tag where rows of one gpu/variant are several."""
    per_model = Counter((row.gpu, row.variant) for row in rows if row.change_pct is not None)
    return ", ".join(
        f"{row.gpu}/{row.variant}" + (f" image {row.new.image_tag}" if per_model[row.gpu, row.variant] > 1 else "")
        for row in regressed
        if row.new is not None
    )


def check_threshold(value: float | Decimal) -> Decimal:
    """The threshold as an exact decimal: a finite percentage from 0 to below 100."""
    exact = value if isinstance(value, Decimal) else Decimal(number(float(value)))  # 10.0 as 10, 7.1 as 7.1
    if not (exact.is_finite() and 0 <= exact < 100):
        raise CapacityError(f"--max-regression-percent {value:g}: expected a percentage from 0 to below 100")
    return exact


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(sys.argv[1:] if argv is None else argv)
        threshold = check_threshold(args.max_regression_percent)
        rows = compare(read_side(args.baseline), read_side(args.new))
        if not any(row.change_pct is not None for row in rows):
            raise CapacityError(
                f"{escaped(args.baseline)} and {escaped(args.new)} share no (gpu, variant, SLO latency) at the same "
                "SLO percentile and failure budget: nothing to compare"
            )
    except CapacityError as err:
        print(f"error: {escaped(str(err))}", file=sys.stderr)  # one line, whatever a message quotes
        return EXIT_BAD_INPUT
    for line in table(rows, threshold):
        print(line)
    compared = [row for row in rows if row.change_pct is not None]
    regressed = [row for row in compared if row.regressed(threshold)]
    if regressed:
        names = _regressed_names(rows, regressed)
        print(f"regression: {len(regressed)} of {len(compared)} rates dropped by more than {threshold:g} % ({names})")
        return EXIT_FAILED
    print(f"ok: none of {len(compared)} rates dropped by more than {threshold:g} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
