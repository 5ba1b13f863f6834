"""GKE minor versions with dates: what triton-gke:kubernetesVersion's support means on a given day.

The table is infra/data/gke_versions.csv (its header names the source, the GKE release schedule). The check takes
`today` as a parameter, so it never depends on the machine's clock by itself: the program (infra/config.py, under
`pulumi up` and `pulumi preview`) passes the real date, so a running stack hears at its next `up` that its version
drifts out of support; tests pass a fixed date (tests/conftest.py), so plans of the shipped stacks stay quiet after
the shipped default's end date (a test checks the default against the date the table was written instead).

POLICY: the check warns, it never refuses. kubernetesVersion is the clusters' floor (min_master_version), not a pin:
- the provider sends it as the cluster's initialClusterVersion on create and, on update, only upgrades a control plane
  whose current version is lower ("Only upgrade the master if the current version is lower than the desired
  version"); its schema says "GKE will auto-update the master to new versions, so this does not guarantee the current
  master version" (hashicorp/terraform-provider-google-beta google-beta/services/container/
  resource_container_cluster.go, commit 93c65b2d60fea598528f2769b5b09de856f8cb8c: min_master_version, create and
  update). A floor GKE has moved past changes nothing on a running cluster.
- "when a version reaches the end of support, cluster control planes and nodes are automatically upgraded regardless
  of release channel enrollment" (GKE, About release channels, RELEASE_CHANNELS_URL), so refusing the stack protects
  nothing and would stop an emergency `up` (a scale change, a security fix).
- GKE itself refuses to create a cluster at a version it no longer offers: a minor past its standard support is
  "unavailable for creating new clusters and control planes" (GKE versioning, VERSIONING_URL; GKE's release notes list
  each channel's "Available minor versions", where only the Extended channel still offers minors past standard
  support). A new stack or region at an expired floor therefore fails at GKE, which the warning says.
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
RELEASE_CHANNELS_URL = "https://cloud.google.com/kubernetes-engine/docs/concepts/release-channels"
VERSIONING_URL = "https://cloud.google.com/kubernetes-engine/versioning"
# "For clusters in the Extended release channel, an additional cluster management fee applies if the minor version of
# the cluster is in the extended support period" (GKE pricing, cluster management fee).
PRICING_URL = "https://cloud.google.com/kubernetes-engine/pricing"
# The release channel that keeps a minor past its standard support: "GKE extended support is available with the
# Extended release channel", about 10 months more, "Starting with GKE version 1.27" (GKE blog, "Introducing GKE
# extended support", 2024-07-17, https://cloud.google.com/blog/products/containers-kubernetes/announcing-gke-extended-support;
# GKE versioning: "around 14 months of standard support and approximately an additional 10 months of extended support
# available with the Extended channel"). The provider accepts it: release_channel.channel is one of "UNSPECIFIED",
# "RAPID", "REGULAR", "STABLE", "EXTENDED" (resource_container_cluster.go at the commit named above).
EXTENDED_CHANNEL = "EXTENDED"
FIRST_EXTENDED_MINOR = 27
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
    """TRITON_GKE_TODAY is no date; the message names the variable."""


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
    minor: int,
    today: datetime.date,
    table: dict[int, MinorSupport] | None = None,
    warn_days: int = WARN_DAYS,
    *,
    channel: str,
) -> str:
    """A warning ("" when none) for kubernetesVersion 1.`minor`, the clusters' floor, on `today` and `channel`.

    Never a refusal: the version is a floor under the release channel (min_master_version, see POLICY above), so a
    date past its support blocks nothing GKE does not block itself, and an emergency `up` (a scale change, a security
    fix) must still run. A minor after the table's last row is newer than any dated one: a warning that it has no date.
    """
    table = load_versions() if table is None else table
    version = f"1.{minor}"
    if minor > max(table):
        return (
            f"{version} is newer than the GKE version table (infra/data/gke_versions.csv ends at 1.{max(table)}): "
            f"its end of standard support is not checked; see {SOURCE_URL}"
        )
    if minor < min(table):
        return (
            f"{version} is older than every GKE minor in infra/data/gke_versions.csv (from 1.{min(table)}), all past "
            f"GKE support: {_upgraded_automatically(version, channel)}; {_raise_hint(table, today, channel)}"
        )
    entry = table[minor]
    end = support_end(entry, channel)
    if end != entry.end_of_standard_support and today > entry.end_of_standard_support:
        return _extended_notice(entry, end, today, table, channel)
    return _standard_notice(entry, today, warn_days, table, channel)


def _standard_notice(
    entry: MinorSupport, today: datetime.date, warn_days: int, table: dict[int, MinorSupport], channel: str
) -> str:
    """Past or near the end of standard support; "" when further than `warn_days` from it."""
    version, end = f"1.{entry.minor}", entry.end_of_standard_support
    dated = f"{end.isoformat()}{' (estimated)' if entry.kind == 'estimated' else ''}"
    if today > end:
        return (
            f"GKE standard support for {version} ended on {dated} ({SOURCE_URL}): "
            f"{_after_support(version, channel)}; {_raise_hint(table, today, channel)}"
        )
    left = (end - today).days
    if left > warn_days:
        return ""
    extended_end = support_end(entry, channel)
    then = (
        f"the {EXTENDED_CHANNEL} channel keeps the clusters on {version} in extended support until about "
        f"{extended_end.isoformat()} (estimated), at an extra cluster management fee ({PRICING_URL})"
        if extended_end != end
        else _after_support(version, channel)
    )
    return (
        f"GKE standard support for {version} ends on {dated}, in {left} days ({SOURCE_URL}): plan the minor "
        f"upgrade; after that date {then}"
    )


def _extended_notice(
    entry: MinorSupport, extended_end: datetime.date, today: datetime.date, table: dict[int, MinorSupport], channel: str
) -> str:
    """On the EXTENDED channel past the end of standard support: in paid extended support, or past it too."""
    version = f"1.{entry.minor}"
    if today > extended_end:
        return (
            f"GKE extended support for {version} ended on {extended_end.isoformat()} (estimated; {VERSIONING_URL}): "
            f"{_upgraded_automatically(version, channel)}; {_raise_hint(table, today, channel)}"
        )
    return (
        f"GKE standard support for {version} ended on {entry.end_of_standard_support.isoformat()} ({SOURCE_URL}): "
        f"the {EXTENDED_CHANNEL} channel keeps the clusters on {version} in extended support until about "
        f"{extended_end.isoformat()} (estimated), at an extra cluster management fee ({PRICING_URL}); "
        f"{_leave_extended_hint(table, today)}"
    )


def _after_support(version: str, channel: str) -> str:
    """What GKE does once a floor's support is over (POLICY above): the stack still plans and deploys."""
    if channel == EXTENDED_CHANNEL:  # a minor the table gives no end of extended support (1.36: estimated row)
        return (
            f"the {channel} channel keeps the clusters on {version} in extended support, at an extra cluster "
            f"management fee ({PRICING_URL}), until a date infra/data/gke_versions.csv does not give "
            f"({VERSIONING_URL}), then upgrades them automatically"
        )
    return _upgraded_automatically(version, channel)


def _upgraded_automatically(version: str, channel: str) -> str:
    """GKE's answer to a version past all its support, on any channel (POLICY above)."""
    return (
        f"GKE upgrades the {channel} channel's control planes and nodes past it automatically ({RELEASE_CHANNELS_URL}) "
        f"and creates no new cluster at {version} (a new stack or region fails at GKE until the floor is raised)"
    )


def _raise_hint(table: dict[int, MinorSupport], today: datetime.date, channel: str) -> str:
    """The smallest floor still supported on `today` on `channel`: GKE has moved the clusters to it or later, and the
    settings' checks that read the minor (the GPU driver branch, the manifests' schema) should judge what runs."""
    supported = [m for m, e in table.items() if support_end(e, channel) >= today]
    if not supported:
        return (
            f"raise it to the minor the clusters now run (newer than infra/data/gke_versions.csv's last row, "
            f"1.{max(table)}: add its row)"
        )
    return f"raise it to the minor the clusters now run, 1.{min(supported)} or later"


def _leave_extended_hint(table: dict[int, MinorSupport], today: datetime.date) -> str:
    """The smallest upgrade that ends the extended support fee: the oldest minor still in standard support."""
    standard = [m for m, e in table.items() if e.end_of_standard_support >= today]
    target = f"1.{min(standard)} or later" if standard else f"a minor after 1.{max(table)}"
    return f"upgrade to {target} to leave extended support"


def support_end(entry: MinorSupport, channel: str) -> datetime.date:
    """The last day GKE supports the minor on `channel` (the one home of this rule): the end of its extended support
    on EXTENDED where the table has one, else the end of its standard support."""
    if channel == EXTENDED_CHANNEL and entry.end_of_extended_support is not None:
        return entry.end_of_extended_support
    return entry.end_of_standard_support
