"""When GKE may upgrade the clusters: each region's recurring maintenance window and the maintenance exclusions.

GKE's rules (https://cloud.google.com/kubernetes-engine/docs/maintenance-window, "Considerations when configuring a
maintenance window"): one recurring window per cluster; "You must allow at least 48 hours of maintenance
availability in a 32-day rolling window. Only contiguous availability windows of at least four hours are
considered"; "Day of the week recurrences are always based on UTC". The provider (terraform-provider-google-beta
resource_container_cluster.go, maintenance_policy at 3dc173a397749158369ea839a2890d89f8c9c370) takes start_time and
end_time as RFC3339 dates, the recurrence as an RFC5545 RRULE, at most 20 exclusions, each with a scope of
NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES; its docs (website/docs/r/container_cluster.html.markdown)
ask for "Zulu" times: "GKE may accept other formats, but will return values in UTC, causing a permanent diff".
"""

from __future__ import annotations

import datetime
import re

from triton_gke.settings import versions
from triton_gke.settings.reader import Reader
from triton_gke.settings.values import (
    ClusterSettings,
    MaintenanceExclusion,
    MaintenanceSettings,
    MaintenanceWindow,
    RegionSettings,
)

MIN_AVAILABLE = datetime.timedelta(hours=48)
ROLLING = datetime.timedelta(days=32)
MIN_CONTIGUOUS = datetime.timedelta(hours=4)
MAX_EXCLUSIONS = 20
SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# RFC3339 in UTC ("Zulu"), to the second, as GKE returns it.
_ZULU = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
# The recurrences this layer can check against the 48-hour rule: daily, or weekly on listed days (RFC5545 BYDAY).
_RRULE = re.compile(r"FREQ=(?P<freq>DAILY|WEEKLY)(;BYDAY=(?P<days>[A-Z]{2}(,[A-Z]{2})*))?")
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
RECURRENCE_RULE = "FREQ=DAILY, or FREQ=WEEKLY;BYDAY=DAY,... with DAY one of MO TU WE TH FR SA SU (UTC)"


def zulu_time(text: str) -> datetime.datetime | None:
    """An RFC3339 UTC time to the second (2026-01-03T01:00:00Z), or None."""
    if not _ZULU.fullmatch(text):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def weekdays(recurrence: str) -> tuple[int, ...] | None:
    """The weekdays (0 = Monday) a supported recurrence opens the window on, or None if it is not one."""
    match = _RRULE.fullmatch(recurrence)
    if not match:
        return None
    if match.group("freq") == "DAILY":
        return None if match.group("days") else tuple(range(7))
    listed = (match.group("days") or "").split(",")
    if not match.group("days") or any(d not in DAYS for d in listed) or len(set(listed)) != len(listed):
        return None
    return tuple(sorted(DAYS.index(d) for d in listed))


def least_availability(start: datetime.datetime, end: datetime.datetime, days: tuple[int, ...]) -> datetime.timedelta:
    """The least maintenance time any 32-day span gets, counting only contiguous stretches of at least 4 hours.

    The window opens at start's time of day on each of `days` (UTC weekdays) and lasts end - start; overlapping
    openings merge. The pattern repeats weekly, so spans starting at every opening's start and end, and those
    minus 32 days, over two weeks, cover every minimum of the (piecewise linear) available time.
    """
    length = end - start
    # A Monday at start's time of day: only the weekday and time matter, and a reference week keeps the arithmetic
    # inside datetime's range for a start in year 1 or 9999 (2001-01-01 was a Monday).
    first = datetime.datetime(2001, 1, 1, start.hour, start.minute, start.second, tzinfo=start.tzinfo)
    openings = [
        (first + datetime.timedelta(days=week * 7 + day), first + datetime.timedelta(days=week * 7 + day) + length)
        for week in range(-1, 9)
        for day in days
    ]
    merged: list[list[datetime.datetime]] = []
    for low, high in sorted(openings):
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    edges = [t for low, high in merged for t in (low, high)]
    # A piece clipped by the span's start or end counts from 4 hours on: the least is just below that (one second).
    below = MIN_CONTIGUOUS - datetime.timedelta(seconds=1)
    near = (datetime.timedelta(0), MIN_CONTIGUOUS, -MIN_CONTIGUOUS, below, -below)
    shifts = [a + b for a in (datetime.timedelta(0), -ROLLING) for b in near]
    candidates = [t + shift for t in edges for shift in shifts]
    span_from, span_to = first, first + datetime.timedelta(days=14)
    least = ROLLING
    for begin in (c for c in candidates if span_from <= c <= span_to):
        stop = begin + ROLLING
        total = datetime.timedelta(0)
        for low, high in merged:
            piece = min(high, stop) - max(low, begin)
            if piece >= MIN_CONTIGUOUS:
                total += piece
        least = min(least, total)
    return least


# ---- the windows: one per region, apart from each other's by default ----------------------------------------------

# Where a task outlasts its window "GKE attempts to pause the task and resume it in the next maintenance window"
# (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions, "Maintenance
# windows"): a node drain in progress may run on past the end. Default windows are 7 hours of a fixed 8-hour slot,
# so an hour lies between one region's window and the next's.
SLOT_HOURS = 8
WINDOW_HOURS = 7
# Slots of a day, from 01:00 UTC (the earlier default window's start): 01:00-08:00, 09:00-16:00, 17:00-24:00.
SLOTS_A_DAY = 24 // SLOT_HOURS
# Two days a week per region: 14 hours a week, at least 4 x 14 = 56 in any 32 days (GKE asks for 48, in pieces of 4
# hours or more; tests/unit/settings/test_maintenance.py checks every slot with least_availability). The weekend
# first, then two pairs of weekdays: 3 x 3 = 9 regions without an overlap.
DAY_PAIRS = (("SA", "SU"), ("TU", "WE"), ("TH", "FR"))
# A Saturday: each slot's first opening is in the week from here (RFC5545: DTSTART should be an occurrence of the
# rule, "The recurrence set generated with a DTSTART property value not synchronized with the recurrence rule is
# undefined", https://www.rfc-editor.org/rfc/rfc5545#section-3.3.10).
REFERENCE_SATURDAY = datetime.datetime(2026, 1, 3, tzinfo=datetime.UTC)
WINDOW_SHAPE = (
    "expected 'REGION START END RECURRENCE' "
    "(times like 2026-01-03T01:00:00Z, a recurrence like FREQ=WEEKLY;BYDAY=SA,SU)"
)
WEEK = datetime.timedelta(days=7)


def _zulu(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def default_window(position: int) -> MaintenanceWindow:
    """The window of the region at `position` in the stack's `regions` list, when the user chose none.

    Taken from the position alone, never from how many regions there are: adding a region at the end of the list
    gives it the next slot and leaves every other region's window as it was (an in-place update of its cluster
    otherwise). Positions 0-8 never overlap; from the 9th on the slots repeat (the stack then warns).
    """
    pair, slot = divmod(position % (len(DAY_PAIRS) * SLOTS_A_DAY), SLOTS_A_DAY)
    days = DAY_PAIRS[pair]
    first_day = REFERENCE_SATURDAY + datetime.timedelta(days=(DAYS.index(days[0]) - DAYS.index("SA")) % 7)
    start = first_day + datetime.timedelta(hours=1 + slot * SLOT_HOURS)
    return MaintenanceWindow(
        start_time=_zulu(start),
        end_time=_zulu(start + datetime.timedelta(hours=WINDOW_HOURS)),
        recurrence=f"FREQ=WEEKLY;BYDAY={','.join(days)}",
    )


class WindowError(ValueError):
    """A window GKE would refuse: `part` is "start", "end" or "recurrence", the message the reason."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(reason)
        self.part = part


def checked_window(start_text: str, end_text: str, recurrence: str) -> MaintenanceWindow:
    """The window, if GKE takes it (shape, 4 hours to 7 days, 48 hours in any 32 days); WindowError otherwise."""
    start, end = zulu_time(start_text), zulu_time(end_text)
    if start is None:
        raise WindowError("start", "expected an RFC3339 UTC time like 2026-01-03T01:00:00Z")
    if end is None:
        raise WindowError("end", "expected an RFC3339 UTC time like 2026-01-03T08:00:00Z")
    if end - start < MIN_CONTIGUOUS:
        raise WindowError(
            "end",
            f"the window must last at least 4 hours after its start ({start_text}): GKE counts only contiguous "
            "windows of 4 hours or more",
        )
    if end - start > WEEK:
        raise WindowError("end", "a weekly window lasts at most 7 days after its start")
    days = weekdays(recurrence)
    if days is None:
        raise WindowError("recurrence", f"expected {RECURRENCE_RULE}")
    least = least_availability(start, end, days)
    if least < MIN_AVAILABLE:
        raise WindowError(
            "recurrence",
            f"with {start_text}..{end_text} it allows {least.total_seconds() / 3600:g} hours of maintenance in some "
            "32 days; GKE requires at least 48 (https://cloud.google.com/kubernetes-engine/docs/maintenance-window)",
        )
    return MaintenanceWindow(start_time=start_text, end_time=end_text, recurrence=recurrence)


def weekly_spans(window: MaintenanceWindow) -> list[tuple[datetime.timedelta, datetime.timedelta]]:
    """The window's openings as (from, to) offsets into a UTC week from Monday 00:00, split where they pass its end."""
    start, end = zulu_time(window.start_time), zulu_time(window.end_time)
    days = weekdays(window.recurrence)
    if start is None or end is None or days is None:
        raise ValueError(f"not a checked window: {window}")
    time_of_day = datetime.timedelta(hours=start.hour, minutes=start.minute, seconds=start.second)
    spans = []
    for day in days:
        low = datetime.timedelta(days=day) + time_of_day
        high = low + (end - start)
        spans += [(low, min(high, WEEK))] + ([(datetime.timedelta(0), high - WEEK)] if high > WEEK else [])
    return spans


def weekly_overlap(a: MaintenanceWindow, b: MaintenanceWindow) -> datetime.timedelta:
    """How long, each week, both windows are open (a window longer than a day may overlap its own next opening:
    each is counted once per pair of openings, so a figure above zero is what matters)."""
    total = datetime.timedelta(0)
    for a_low, a_high in weekly_spans(a):
        for b_low, b_high in weekly_spans(b):
            total += max(datetime.timedelta(0), min(a_high, b_high) - max(a_low, b_low))
    return total


def maintenance(reader: Reader, regions: tuple[RegionSettings, ...]) -> MaintenanceSettings:
    """maintenanceWindows, maintenanceStartTime, maintenanceEndTime, maintenanceRecurrence and maintenanceExclusions.

    A region's window is its maintenanceWindows entry; else the stack-wide window, where the user set any of its
    three keys (the ones left unset take the first default window's values); else the default for its position.
    """
    chosen = _region_windows(reader, regions)
    stack_wide = _stack_wide_window(reader)
    windows = tuple(
        (region.name, chosen.get(region.name) or stack_wide or default_window(position))
        for position, region in enumerate(regions)
    )
    return MaintenanceSettings(windows=windows, exclusions=_exclusions(reader))


def _stack_wide_window(reader: Reader) -> MaintenanceWindow | None:
    texts = {key: reader.string(key) for key in STACK_WIDE_KEYS}
    if not any(texts.values()):
        return None
    first = MaintenanceWindow()
    start_text = texts["maintenanceStartTime"] or first.start_time
    end_text = texts["maintenanceEndTime"] or first.end_time
    recurrence = texts["maintenanceRecurrence"] or first.recurrence
    try:
        return checked_window(start_text, end_text, recurrence)
    except WindowError as err:
        key, value = {
            "start": ("maintenanceStartTime", start_text),
            "end": ("maintenanceEndTime", end_text),
            "recurrence": ("maintenanceRecurrence", recurrence),
        }[err.part]
        raise reader.fail(key, value, str(err)) from None


STACK_WIDE_KEYS = ("maintenanceStartTime", "maintenanceEndTime", "maintenanceRecurrence")


def _region_windows(reader: Reader, regions: tuple[RegionSettings, ...]) -> dict[str, MaintenanceWindow]:
    names = [r.name for r in regions]
    chosen: dict[str, MaintenanceWindow] = {}
    for entry in reader.strings("maintenanceWindows"):
        parts = entry.split()
        if len(parts) != 4:
            raise reader.fail("maintenanceWindows", entry, WINDOW_SHAPE)
        region, start_text, end_text, recurrence = parts
        if region not in names:
            raise reader.fail(
                "maintenanceWindows", entry, f"{region} is not one of the stack's regions ({', '.join(names)})"
            )
        if region in chosen:
            raise reader.fail("maintenanceWindows", entry, f"{region} has a window already")
        try:
            chosen[region] = checked_window(start_text, end_text, recurrence)
        except WindowError as err:
            raise reader.fail("maintenanceWindows", entry, f"{err.part.upper()}: {err}") from None
    return chosen


def overlap_warning(reader: Reader, settings: MaintenanceSettings) -> str:
    """A warning ("" when none) naming the regions whose windows are open at the same hours of the week.

    GKE may then upgrade, and so drain, a GPU node in each of them at once; and Compute Engine's host maintenance
    (GPU VMs stop, they do not live-migrate) follows no window at all (docs/upgrades.md).
    """
    pairs = [
        f"{a} and {b} ({weekly_overlap(wa, wb).total_seconds() / 3600:g} h a week)"
        for i, (a, wa) in enumerate(settings.windows)
        for b, wb in settings.windows[i + 1 :]
        if weekly_overlap(wa, wb)
    ]
    if not pairs:
        return ""
    return (
        f"{reader.full('maintenanceWindows')}: the maintenance windows of {'; '.join(pairs)} overlap, so GKE may "
        "upgrade a GPU node in those regions at the same time; give each region its own hours in "
        "maintenanceWindows, or leave the windows unset for the defaults, which never overlap up to 9 regions "
        "(docs/upgrades.md)"
    )


# ---- the exclusions -------------------------------------------------------------------------------------------------

# GKE's limits on an exclusion's length, by scope ("Scope of maintenance to exclude",
# https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions): "No upgrades" for at
# most 30 days; "No minor upgrades" and "No minor or node upgrades" up to the end of support of the cluster's minor
# version. Google's own sample says the same in code (terraform-google-modules/terraform-docs-samples,
# gke/standard/zonal/no-channel-to-release-channel/main.tf): "NO_UPGRADES exclusions are limited to 30 days", and
# its NO_MINOR_OR_NODE_UPGRADES exclusion ends at 00:00 UTC of the "end of standard support for 1.31". GKE refuses
# a longer one when `up` sends it, with the cluster half updated; checked here before anything is declared.
MAX_NO_UPGRADES = datetime.timedelta(days=30)
MINOR_SCOPES = ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")


def _exclusions(reader: Reader) -> tuple[MaintenanceExclusion, ...]:
    entries = reader.strings("maintenanceExclusions")
    if len(entries) > MAX_EXCLUSIONS:
        raise reader.fail("maintenanceExclusions", list(entries), f"GKE allows at most {MAX_EXCLUSIONS} exclusions")
    shape = "expected 'NAME START END SCOPE' (NAME lowercase letters, digits, '-'; times like 2026-11-26T00:00:00Z)"
    exclusions: list[MaintenanceExclusion] = []
    for entry in entries:
        parts = entry.split()
        if len(parts) != 4:
            raise reader.fail("maintenanceExclusions", entry, shape)
        name, start_text, end_text, scope = parts
        start, end = zulu_time(start_text), zulu_time(end_text)
        if not _NAME.fullmatch(name) or start is None or end is None:
            raise reader.fail("maintenanceExclusions", entry, shape)
        if end <= start:
            raise reader.fail("maintenanceExclusions", entry, "END must be after START")
        if scope not in SCOPES:
            raise reader.fail("maintenanceExclusions", entry, f"SCOPE is one of {', '.join(SCOPES)}")
        if scope == "NO_UPGRADES" and end - start > MAX_NO_UPGRADES:
            raise reader.fail(
                "maintenanceExclusions",
                entry,
                f"a NO_UPGRADES exclusion lasts at most 30 days (this one {_days(end - start)}); for longer, "
                "NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES, up to the end of support of the minor "
                "(https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions)",
            )
        if any(e.name == name for e in exclusions):
            raise reader.fail("maintenanceExclusions", entry, f"the name {name} is used twice")
        exclusions.append(MaintenanceExclusion(name=name, start_time=start_text, end_time=end_text, scope=scope))
    return tuple(exclusions)


def _days(length: datetime.timedelta) -> str:
    return f"{length.total_seconds() / 86400:g} days"


def support_ends(cluster: ClusterSettings, table: dict[int, versions.MinorSupport]) -> datetime.date | None:
    """The day the cluster's minor leaves support on its channel, or None where the table cannot say.

    kubernetesVersion is the minor the clusters run at least; a cluster the channel has moved past it keeps a later
    date, so judging by the configured minor refuses no exclusion GKE would take for it (raise the version to the
    one the clusters run to go further). EXTENDED keeps a minor until its end of extended support (GKE versioning,
    https://cloud.google.com/kubernetes-engine/versioning: "around 14 months of standard support and approximately
    an additional 10 months of extended support available with the Extended channel").
    """
    match = re.fullmatch(r"1\.([1-9][0-9]*)", cluster.kubernetes_version)
    entry = table.get(int(match.group(1))) if match else None
    return None if entry is None else versions.support_end(entry, cluster.release_channel)


def check_exclusions_in_support(
    reader: Reader,
    settings: MaintenanceSettings,
    cluster: ClusterSettings,
    table: dict[int, versions.MinorSupport] | None = None,
) -> None:
    """A minor-scoped exclusion ending after the end of support of kubernetesVersion's minor: one line naming it."""
    ends = support_ends(cluster, versions.load_versions() if table is None else table)
    if ends is None:
        return
    latest = datetime.datetime.combine(ends, datetime.time(), tzinfo=datetime.UTC)
    for e in settings.exclusions:
        end = zulu_time(e.end_time)
        if e.scope in MINOR_SCOPES and end is not None and end > latest:
            entry = f"{e.name} {e.start_time} {e.end_time} {e.scope}"
            raise reader.fail(
                "maintenanceExclusions",
                entry,
                f"a {e.scope} exclusion ends by the end of support of the cluster's minor, "
                f"{cluster.kubernetes_version} on {cluster.release_channel}: {_zulu(latest)} ({versions.SOURCE_URL}; "
                "https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions)",
            )
