"""When GKE may upgrade the clusters: the recurring maintenance window and the maintenance exclusions.

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

from triton_gke.settings.reader import Reader
from triton_gke.settings.values import MaintenanceExclusion, MaintenanceSettings

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


def maintenance(reader: Reader) -> MaintenanceSettings:
    """maintenanceStartTime, maintenanceEndTime, maintenanceRecurrence and maintenanceExclusions."""
    start_text = reader.string("maintenanceStartTime")
    end_text = reader.string("maintenanceEndTime")
    recurrence = reader.string("maintenanceRecurrence")
    start = zulu_time(start_text)
    if start is None:
        raise reader.fail("maintenanceStartTime", start_text, "expected an RFC3339 UTC time like 2026-01-03T01:00:00Z")
    end = zulu_time(end_text)
    if end is None:
        raise reader.fail("maintenanceEndTime", end_text, "expected an RFC3339 UTC time like 2026-01-03T09:00:00Z")
    if end - start < MIN_CONTIGUOUS:
        raise reader.fail(
            "maintenanceEndTime",
            end_text,
            f"the window must last at least 4 hours after maintenanceStartTime ({start_text}): GKE counts only "
            "contiguous windows of 4 hours or more",
        )
    if end - start > datetime.timedelta(days=7):
        raise reader.fail("maintenanceEndTime", end_text, "a weekly window lasts at most 7 days after its start")
    days = weekdays(recurrence)
    if days is None:
        raise reader.fail("maintenanceRecurrence", recurrence, f"expected {RECURRENCE_RULE}")
    least = least_availability(start, end, days)
    if least < MIN_AVAILABLE:
        hours = least.total_seconds() / 3600
        raise reader.fail(
            "maintenanceRecurrence",
            recurrence,
            f"with {start_text}..{end_text} it allows {hours:g} hours of maintenance in some 32 days; GKE requires at "
            "least 48 (https://cloud.google.com/kubernetes-engine/docs/maintenance-window)",
        )
    return MaintenanceSettings(
        start_time=start_text,
        end_time=end_text,
        recurrence=recurrence,
        exclusions=_exclusions(reader),
    )


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
        if any(e.name == name for e in exclusions):
            raise reader.fail("maintenanceExclusions", entry, f"the name {name} is used twice")
        exclusions.append(MaintenanceExclusion(name=name, start_time=start_text, end_time=end_text, scope=scope))
    return tuple(exclusions)
