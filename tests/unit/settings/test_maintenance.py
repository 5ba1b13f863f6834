"""The maintenance window and exclusions (settings/maintenance.py): GKE's 48 hours in any 32 days, the shapes."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import PROJECT
from triton_gke.settings import ConfigError, from_stack_file, maintenance, versions
from triton_gke.settings.values import ClusterSettings, MaintenanceWindow

EXAMPLES = settings(max_examples=60, deadline=None)


def outcome(**overrides: str) -> str | None:
    config = {f"{PROJECT}:{k}": v for k, v in overrides.items()}
    try:
        from_stack_file("dev", config)
    except ConfigError as err:
        return str(err)
    return None


def brute_force_least(start: datetime.datetime, hours: int, days: tuple[int, ...]) -> float:
    """Hour by hour, every span start over a week (an hour grid): the least hours (runs of 4 h or more) in 32 days."""
    base = start - datetime.timedelta(days=start.weekday() + 7)
    open_hours = set()
    for week in range(9):
        for day in days:
            first = base + datetime.timedelta(days=week * 7 + day)
            open_hours.update(first + datetime.timedelta(hours=h) for h in range(hours))
    least = float("inf")
    for begin_h in range(0, 24 * 7):  # the pattern repeats weekly
        begin = base + datetime.timedelta(days=7, hours=begin_h)
        run, total = 0, 0
        for h in range(32 * 24):
            if begin + datetime.timedelta(hours=h) in open_hours:
                run += 1
            else:
                total += run if run >= 4 else 0
                run = 0
        total += run if run >= 4 else 0
        least = min(least, total)
    return least


@settings(max_examples=10, deadline=None)
@given(
    hour=st.integers(0, 23),
    hours=st.integers(4, 30),
    days=st.sets(st.integers(0, 6), min_size=1).map(lambda s: tuple(sorted(s))),
)
def test_least_availability_matches_an_hour_by_hour_count(hour: int, hours: int, days: tuple[int, ...]) -> None:
    start = datetime.datetime(2026, 1, 3, hour, tzinfo=datetime.UTC)
    got = maintenance.least_availability(start, start + datetime.timedelta(hours=hours), days)
    # The hour grid misses the spans whose clipped pieces, at either end, are a second under 4 hours and so do not
    # count: the exact least is at most 4 hours per end below the grid's, never above it.
    brute = brute_force_least(start, hours, days)
    assert brute - 8 <= got.total_seconds() / 3600 <= brute


def test_the_default_window_is_accepted_and_a_thin_one_refused_in_one_line() -> None:
    assert outcome() is None
    refusal = outcome(maintenanceRecurrence="FREQ=WEEKLY;BYDAY=SU", maintenanceEndTime="2026-01-03T05:00:00Z")
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith(f"{PROJECT}:maintenanceRecurrence: ") and "48" in refusal


@EXAMPLES
@given(text=st.text(max_size=40))
def test_times_are_rfc3339_utc_or_refused_naming_the_key(text: str) -> None:
    refusal = outcome(maintenanceStartTime=text)
    parsed = maintenance.zulu_time(text.strip())
    if refusal is None:
        # Empty: the stack-wide window unset, each region its default.
        assert parsed is not None or not text.strip()
    else:
        assert "\n" not in refusal and refusal.startswith(f"{PROJECT}:maintenanceStartTime: ")


@EXAMPLES
@given(text=st.text(alphabet="FREQ=DAILYWEKBYSMOTUHR;,", max_size=40))
def test_recurrences_are_daily_or_weekly_by_day_or_refused(text: str) -> None:
    refusal = outcome(maintenanceRecurrence=text)
    if refusal is None:
        # Empty: the stack-wide window unset, each region its default.
        assert maintenance.weekdays(text.strip()) is not None or not text.strip()
    else:
        assert refusal.startswith(f"{PROJECT}:maintenanceRecurrence: ") and "\n" not in refusal


@EXAMPLES
@given(
    name=st.from_regex(r"[a-z0-9-]{0,8}", fullmatch=True),
    scope=st.sampled_from([*maintenance.SCOPES, "NO_PATCHES", ""]),
    days=st.integers(-2, 40),
)
def test_exclusions_have_a_name_an_order_and_a_scope(name: str, scope: str, days: int) -> None:
    start = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
    end = start + datetime.timedelta(days=days)
    entry = f"{name} {start:%Y-%m-%dT%H:%M:%SZ} {end:%Y-%m-%dT%H:%M:%SZ} {scope}".strip()
    refusal = outcome(maintenanceExclusions=f'["{entry}"]')
    good = bool(maintenance._NAME.fullmatch(name)) and days > 0 and scope in maintenance.SCOPES
    good = good and not (scope == "NO_UPGRADES" and days > 30)
    if good:
        assert refusal is None, refusal
    else:
        assert refusal is not None and refusal.startswith(f"{PROJECT}:maintenanceExclusions: ")


def test_at_most_twenty_exclusions_and_no_name_twice() -> None:
    one = "x{} 2026-11-26T00:00:00Z 2026-11-27T00:00:00Z NO_UPGRADES"
    many = "[" + ",".join(f'"{one.format(i)}"' for i in range(21)) + "]"
    assert "at most 20" in (outcome(maintenanceExclusions=many) or "")
    twice = f'["{one.format(1)}", "{one.format(1)}"]'
    assert "used twice" in (outcome(maintenanceExclusions=twice) or "")


@pytest.mark.parametrize("end", ["2026-01-03T04:59:59Z", "2026-01-11T01:00:01Z"])
def test_a_window_shorter_than_four_hours_or_longer_than_a_week_is_refused(end: str) -> None:
    assert (outcome(maintenanceEndTime=end) or "").startswith(f"{PROJECT}:maintenanceEndTime: ")


@pytest.mark.parametrize("year", ["0001", "9999"])
def test_a_window_in_the_first_or_last_year_datetime_holds_is_judged_not_a_traceback(year: str) -> None:
    """Only the weekday and time of day matter to the 48-hour rule: a start in year 1 or 9999 once overflowed."""
    day = "01-01" if year == "0001" else "12-31"
    assert outcome(maintenanceStartTime=f"{year}-{day}T01:00:00Z", maintenanceEndTime=f"{year}-{day}T09:00:00Z") is None


# ---- GKE's 48 hours in any 32 days, at the edge --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("end", "hours"),
    # One Sunday window a week: any 32 days hold four whole ones (a clipped fifth never reaches 4 hours and a
    # clipped first leaves four whole after it), so 4 x 12 h = 48 and 4 x 11.75 h = 47.
    [("2026-01-04T12:00:00Z", 48), ("2026-01-04T11:45:00Z", 47)],
)
def test_the_48_hour_rule_takes_48_hours_and_refuses_47(end: str, hours: int) -> None:
    start = maintenance.zulu_time("2026-01-04T00:00:00Z")
    assert start is not None and start.weekday() == 6
    least = maintenance.least_availability(start, maintenance.zulu_time(end), (6,))  # type: ignore[arg-type]
    assert least == datetime.timedelta(hours=hours)
    stack_wide = outcome(
        maintenanceStartTime="2026-01-04T00:00:00Z",
        maintenanceEndTime=end,
        maintenanceRecurrence="FREQ=WEEKLY;BYDAY=SU",
    )
    per_region = outcome(
        maintenanceWindows=json.dumps([f"us-central1 2026-01-04T00:00:00Z {end} FREQ=WEEKLY;BYDAY=SU"])
    )
    if hours >= 48:
        assert stack_wide is None and per_region is None, (stack_wide, per_region)
    else:
        assert (stack_wide or "").startswith(f"{PROJECT}:maintenanceRecurrence: ") and "47 hours" in stack_wide
        assert (per_region or "").startswith(f"{PROJECT}:maintenanceWindows: ") and "47 hours" in per_region


# ---- each region its own window ------------------------------------------------------------------------------------
SLOTS = len(maintenance.DAY_PAIRS) * maintenance.SLOTS_A_DAY


def windows_of(stack: str, **overrides: str) -> tuple[dict[str, MaintenanceWindow], tuple[str, ...]]:
    settings_ = from_stack_file(stack, {f"{PROJECT}:{k}": v for k, v in overrides.items()})
    return dict(settings_.cluster.maintenance.windows), settings_.warnings


def test_every_default_window_meets_gke_rules_and_the_first_is_the_plain_default() -> None:
    assert maintenance.default_window(0) == MaintenanceWindow()
    for position in range(SLOTS):
        window = maintenance.default_window(position)
        assert maintenance.checked_window(window.start_time, window.end_time, window.recurrence) == window
        start = maintenance.zulu_time(window.start_time)
        # RFC5545: the first opening is an occurrence of the rule.
        assert start is not None and maintenance.DAYS[start.weekday()] in window.recurrence


@given(pair=st.lists(st.integers(0, 40), min_size=2, max_size=2, unique=True))
@EXAMPLES
def test_default_windows_of_two_positions_overlap_only_when_the_slots_repeat(pair: list[int]) -> None:
    a, b = (maintenance.default_window(p) for p in pair)
    assert bool(maintenance.weekly_overlap(a, b)) == (pair[0] % SLOTS == pair[1] % SLOTS)


T4_REGIONS = ("us-central1", "europe-west4", "asia-east1", "us-east1", "us-west1", "europe-west1", "asia-southeast1")


@given(regions=st.lists(st.sampled_from(T4_REGIONS), min_size=1, max_size=len(T4_REGIONS), unique=True))
@settings(max_examples=15, deadline=None)
def test_adding_a_region_at_the_end_keeps_every_other_window(regions: list[str]) -> None:
    before, warned = windows_of("staging", regions=json.dumps(regions[:-1] or regions))
    after, _ = windows_of("staging", regions=json.dumps(regions))
    assert all(after[r] == w for r, w in before.items())
    assert not [w for w in warned if "maintenanceWindows" in w]  # up to 9 regions the defaults never overlap


def hours_open(window: MaintenanceWindow) -> set[int]:
    """Brute force over an hour grid: the hours of the week (from Monday 00:00 UTC) the window is open."""
    start, end = maintenance.zulu_time(window.start_time), maintenance.zulu_time(window.end_time)
    assert start is not None and end is not None
    hours = int((end - start).total_seconds() // 3600)
    return {
        (day * 24 + start.hour + h) % (7 * 24)
        for day in maintenance.weekdays(window.recurrence) or ()
        for h in range(hours)
    }


windows = st.builds(
    lambda hour, hours, days: MaintenanceWindow(
        start_time=f"2026-01-05T{hour:02d}:00:00Z",
        end_time=(datetime.datetime(2026, 1, 5, hour, tzinfo=datetime.UTC) + datetime.timedelta(hours=hours)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        recurrence="FREQ=DAILY"
        if not days
        else f"FREQ=WEEKLY;BYDAY={','.join(maintenance.DAYS[d] for d in sorted(days))}",
    ),
    hour=st.integers(0, 23),
    hours=st.integers(4, 60),
    days=st.sets(st.integers(0, 6), max_size=7),
)


@given(a=windows, b=windows)
@settings(max_examples=200, deadline=None)
def test_two_windows_overlap_exactly_when_some_hour_of_the_week_is_in_both(
    a: MaintenanceWindow, b: MaintenanceWindow
) -> None:
    assert bool(maintenance.weekly_overlap(a, b)) == bool(hours_open(a) & hours_open(b))


def test_prod_gives_its_three_regions_apart_windows_and_no_warning() -> None:
    chosen, warned = windows_of("prod")
    assert list(chosen) == ["us-central1", "europe-west4", "asia-east1"]
    assert chosen["us-central1"] == MaintenanceWindow()
    values = list(chosen.values())
    assert all(not maintenance.weekly_overlap(a, b) for i, a in enumerate(values) for b in values[i + 1 :])
    assert not any("maintenance" in w for w in warned)


def test_chosen_windows_that_overlap_are_warned_about_and_accepted() -> None:
    both = ["us-central1 2026-01-03T01:00:00Z 2026-01-03T09:00:00Z FREQ=WEEKLY;BYDAY=SA,SU"]
    both.append("europe-west4 2026-01-04T06:00:00Z 2026-01-04T18:00:00Z FREQ=WEEKLY;BYDAY=SU")
    chosen, warned = windows_of("staging", maintenanceWindows=json.dumps(both))
    assert chosen["europe-west4"].start_time == "2026-01-04T06:00:00Z"
    (warning,) = [w for w in warned if "maintenanceWindows" in w]
    assert warning.startswith(f"{PROJECT}:maintenanceWindows: ") and "\n" not in warning
    assert "us-central1 and europe-west4 (3 h a week)" in warning
    # One stack-wide window for all three regions of prod: every pair overlaps, all are named.
    _, warned = windows_of("prod", maintenanceStartTime="2026-01-03T01:00:00Z")
    (warning,) = [w for w in warned if "maintenanceWindows" in w]
    assert warning.count(" and ") == 3
    apart = ["europe-west4 2026-01-04T09:00:00Z 2026-01-04T13:00:00Z FREQ=WEEKLY;BYDAY=SU,MO,TU"]
    _, warned = windows_of("staging", maintenanceWindows=json.dumps(apart))
    assert not any("maintenanceWindows" in w for w in warned)


@given(
    region=st.sampled_from(["us-central1", "europe-west4", "asia-east1", "mars-north1", ""]),
    start_hour=st.integers(-1, 24),
    hours=st.integers(0, 30),
    recurrence=st.sampled_from(["FREQ=WEEKLY;BYDAY=SA,SU", "FREQ=DAILY", "FREQ=WEEKLY;BYDAY=SU", "FREQ=HOURLY", ""]),
)
@EXAMPLES
def test_a_region_window_is_accepted_as_gke_would_take_it_or_refused_naming_the_key(
    region: str, start_hour: int, hours: int, recurrence: str
) -> None:
    start = f"2026-01-03T{start_hour:02d}:00:00Z"
    parsed = maintenance.zulu_time(start)
    end = (
        (parsed + datetime.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ") if parsed else "2026-01-03T09:00:00Z"
    )
    entry = f"{region} {start} {end} {recurrence}".strip()
    refusal = outcome(maintenanceWindows=json.dumps([entry]))
    try:
        expected = maintenance.checked_window(start, end, recurrence) if region in ("us-central1",) else None
    except maintenance.WindowError:
        expected = None
    if expected is None:
        assert refusal is not None and refusal.startswith(f"{PROJECT}:maintenanceWindows: ") and "\n" not in refusal
    else:
        assert refusal is None, refusal
        assert windows_of("dev", maintenanceWindows=json.dumps([entry]))[0]["us-central1"] == expected


def test_a_region_twice_or_outside_the_stack_is_refused() -> None:
    entry = "us-central1 2026-01-03T01:00:00Z 2026-01-03T09:00:00Z FREQ=WEEKLY;BYDAY=SA,SU"
    assert "has a window already" in (outcome(maintenanceWindows=json.dumps([entry, entry])) or "")
    elsewhere = entry.replace("us-central1", "europe-west4")
    assert "not one of the stack's regions" in (outcome(maintenanceWindows=json.dumps([elsewhere])) or "")


# ---- exclusions against GKE's limits --------------------------------------------------------------------------------
def exclusion(scope: str, start: datetime.datetime, end: datetime.datetime) -> str:
    return f"x {start:%Y-%m-%dT%H:%M:%SZ} {end:%Y-%m-%dT%H:%M:%SZ} {scope}"


@given(seconds=st.integers(-3600, 3600), days=st.sampled_from([29, 30, 31]))
@EXAMPLES
def test_no_upgrades_lasts_at_most_30_days(seconds: int, days: int) -> None:
    start = datetime.datetime(2026, 12, 20, tzinfo=datetime.UTC)
    length = datetime.timedelta(days=days, seconds=seconds)
    refusal = outcome(maintenanceExclusions=json.dumps([exclusion("NO_UPGRADES", start, start + length)]))
    if length <= datetime.timedelta(days=30):
        assert refusal is None, refusal
    else:
        assert refusal is not None and refusal.startswith(f"{PROJECT}:maintenanceExclusions: 'x ")
        assert "at most 30 days" in refusal and "\n" not in refusal


@given(hours=st.integers(-72, 72), scope=st.sampled_from(maintenance.MINOR_SCOPES))
@EXAMPLES
def test_minor_scopes_end_by_the_end_of_support_of_the_minor(hours: int, scope: str) -> None:
    ends = versions.load_versions()[35].end_of_standard_support
    latest = datetime.datetime.combine(ends, datetime.time(), tzinfo=datetime.UTC)
    end = latest + datetime.timedelta(hours=hours)
    entry = exclusion(scope, datetime.datetime(2026, 12, 20, tzinfo=datetime.UTC), end)
    refusal = outcome(kubernetesVersion="1.35", maintenanceExclusions=json.dumps([entry]))
    if end <= latest:
        assert refusal is None, refusal
    else:
        assert refusal is not None and refusal.startswith(f"{PROJECT}:maintenanceExclusions: 'x ")
        assert f"{latest:%Y-%m-%dT%H:%M:%SZ}" in refusal and "1.35" in refusal and "\n" not in refusal


def test_extended_keeps_a_minor_until_its_end_of_extended_support() -> None:
    table = versions.load_versions()
    cluster = ClusterSettings(
        release_channel="EXTENDED", kubernetes_version="1.35", deletion_protection=True, master_authorized_cidrs=()
    )
    assert maintenance.support_ends(cluster, table) == table[35].end_of_extended_support
    regular = dataclasses.replace(cluster, release_channel="REGULAR")
    assert maintenance.support_ends(regular, table) == table[35].end_of_standard_support
    # A minor past the table's last row has no date to judge by: nothing refused offline.
    newer = dataclasses.replace(cluster, kubernetes_version=f"1.{max(table) + 1}")
    assert maintenance.support_ends(newer, table) is None
