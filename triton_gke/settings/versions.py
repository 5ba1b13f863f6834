"""GKE minor versions with dates: is triton-gke:kubernetesVersion still in standard support on a given day?

The table is infra/data/gke_versions.csv (its header names the source, the GKE release schedule). The check takes
`today` as a parameter, so it never depends on the machine's clock by itself: the program (infra/config.py, under
`pulumi up` and `pulumi preview`) passes the real date, so a running stack hears at its next `up` that its version
drifts out of support; tests pass a fixed date (tests/conftest.py), so plans of the shipped stacks keep passing after
the shipped default's end date (a test checks the default against the date the table was written instead).
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path

from triton_gke.bounded_files import one_line
from triton_gke.contracts.paths import DATA_DIR
from triton_gke.settings.catalogue import CatalogueError, read_csv_table

GKE_VERSIONS_CSV = DATA_DIR / "gke_versions.csv"
SOURCE_URL = "https://cloud.google.com/kubernetes-engine/docs/release-schedule"
# The day the table was written: the shipped default must be in standard support then (tests/unit/settings).
TABLE_WRITTEN = datetime.date(2026, 12, 3)
# How long before the end of standard support a plan or `up` warns: about one quarter, time to plan a minor upgrade.
WARN_DAYS = 90
# The date the version check takes as today when set (YYYY-MM-DD); unset, the real date. tests/conftest.py sets it to
# TABLE_WRITTEN for every test and every command a test starts, so CI keeps passing for months after the table was
# written; a person may set it to see what a later `up` would say (`TRITON_GKE_TODAY=2027-04-01 make plan`).
TODAY_ENV = "TRITON_GKE_TODAY"
KINDS = ("schedule", "estimated")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class VersionError(ValueError):
    """The version is refused on that day; the message is the reason, without the key (the caller names it)."""


@dataclass(frozen=True)
class MinorSupport:
    minor: int
    end_of_standard_support: datetime.date
    # None where GKE offers no extended support for the minor (before 1.27) or no date is known.
    end_of_extended_support: datetime.date | None
    # "schedule": read from GKE's release schedule; "estimated": the documented rule (see the CSV header).
    kind: str


def parse_date(text: str, what: str) -> datetime.date:
    """A YYYY-MM-DD date; CatalogueError (one line naming `what`) otherwise."""
    cell = text.strip()
    try:
        if not _DATE.fullmatch(cell):
            raise ValueError
        return datetime.date.fromisoformat(cell)
    except ValueError:
        raise CatalogueError(f"{what}: {one_line(cell[:40])!r} is not a date (YYYY-MM-DD)") from None


def load_versions(path: Path = GKE_VERSIONS_CSV) -> dict[int, MinorSupport]:
    """Minor -> its support dates, in the file's order; CatalogueError (one line naming the file) on a bad row.

    Rows are consecutive minors, each ending its standard support no earlier than the one before (GKE supports minors
    in order), so the table has no gap a version could fall into.
    """
    _, rows = read_csv_table(path)
    table: dict[int, MinorSupport] = {}
    for number, row in enumerate(rows, start=1):
        where = f"{one_line(path)}: data row {number}"
        try:
            minor_text, kind = row["minor"].strip(), row["kind"].strip()
            end_text, extended_text = row["end_of_standard_support"], row["end_of_extended_support"].strip()
        except KeyError as err:
            raise CatalogueError(f"{one_line(path)}: no column {err.args[0]!r}") from None
        if not re.fullmatch(r"[1-9][0-9]?", minor_text):
            raise CatalogueError(f"{where}: minor: {one_line(minor_text[:40])!r} is not a minor version (1-99)")
        if kind not in KINDS:
            raise CatalogueError(f"{where}: kind: {one_line(kind[:40])!r} is not one of {', '.join(KINDS)}")
        entry = MinorSupport(
            minor=int(minor_text),
            end_of_standard_support=parse_date(end_text, f"{where}: end_of_standard_support"),
            end_of_extended_support=parse_date(extended_text, f"{where}: end_of_extended_support")
            if extended_text
            else None,
            kind=kind,
        )
        if table:
            last = table[max(table)]
            if entry.minor != last.minor + 1:
                raise CatalogueError(f"{where}: minor 1.{entry.minor} does not follow 1.{last.minor}")
            if entry.end_of_standard_support < last.end_of_standard_support:
                raise CatalogueError(f"{where}: 1.{entry.minor} ends standard support before 1.{last.minor}")
        table[entry.minor] = entry
    if not table:
        raise CatalogueError(f"{one_line(path)}: no GKE versions")
    return table


def today_from_env(environ: dict[str, str] | None = None) -> datetime.date:
    """TRITON_GKE_TODAY when set (a YYYY-MM-DD date), else the real date; VersionError names the variable."""
    value = (os.environ if environ is None else environ).get(TODAY_ENV)
    if value is None:
        return datetime.date.today()
    try:
        return parse_date(value, TODAY_ENV)
    except CatalogueError as err:
        raise VersionError(str(err)) from None


def check_support(
    minor: int, today: datetime.date, table: dict[int, MinorSupport] | None = None, warn_days: int = WARN_DAYS
) -> str:
    """A warning ("" when none) for Kubernetes 1.`minor` on `today`; VersionError when past its standard support.

    A minor after the table's last row is newer than any dated one: accepted, with a warning that it has no date.
    """
    table = load_versions() if table is None else table
    version = f"1.{minor}"
    if minor > max(table):
        return (
            f"{version} is newer than the GKE version table (infra/data/gke_versions.csv ends at 1.{max(table)}): "
            f"its end of standard support is not checked; see {SOURCE_URL}"
        )
    if minor < min(table):
        raise VersionError(
            f"{version} is older than every GKE minor in infra/data/gke_versions.csv (from 1.{min(table)}), all past "
            f"GKE standard support; use 1.{_newest_supported(table, today)} ({SOURCE_URL})"
        )
    entry = table[minor]
    end = entry.end_of_standard_support
    estimated = " (estimated)" if entry.kind == "estimated" else ""
    if today > end:
        oldest = _oldest_supported(table, today)
        hint = f"; use 1.{oldest} or later" if oldest else ""
        raise VersionError(
            f"GKE standard support for {version} ended on {end.isoformat()}{estimated} ({SOURCE_URL}){hint}"
        )
    left = (end - today).days
    if left <= warn_days:
        return (
            f"GKE standard support for {version} ends on {end.isoformat()}{estimated}, in {left} days "
            f"({SOURCE_URL}): plan the minor upgrade; after that date this stack's `up` is refused"
        )
    return ""


def _oldest_supported(table: dict[int, MinorSupport], today: datetime.date) -> int | None:
    """The oldest minor still in standard support on `today`: the smallest upgrade that is accepted."""
    supported = [m for m, e in table.items() if e.end_of_standard_support >= today]
    return min(supported) if supported else None


def _newest_supported(table: dict[int, MinorSupport], today: datetime.date) -> int | None:
    supported = [m for m, e in table.items() if e.end_of_standard_support >= today]
    return max(supported) if supported else None
