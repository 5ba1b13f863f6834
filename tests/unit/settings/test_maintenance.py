"""The maintenance window and exclusions (settings/maintenance.py): GKE's 48 hours in any 32 days, the shapes."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import PROJECT
from triton_gke.settings import ConfigError, from_stack_file, maintenance

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
        assert parsed is not None
    else:
        assert "\n" not in refusal and refusal.startswith(f"{PROJECT}:maintenanceStartTime: ")


@EXAMPLES
@given(text=st.text(alphabet="FREQ=DAILYWEKBYSMOTUHR;,", max_size=40))
def test_recurrences_are_daily_or_weekly_by_day_or_refused(text: str) -> None:
    refusal = outcome(maintenanceRecurrence=text)
    if refusal is None:
        assert maintenance.weekdays(text.strip()) is not None
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
