"""kubernetesVersion against GKE's end of standard support (settings/versions.py, infra/data/gke_versions.csv).

Every test passes its own `today` (or the table's date): none depends on the machine's clock.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import PROJECT
from triton_gke.settings import ConfigError, from_stack_file, versions
from triton_gke.settings.catalogue import CatalogueError
from triton_gke.settings.schema import config_schema

TABLE = versions.load_versions()
DEFAULT = config_schema()[1]["kubernetesVersion"].default


def test_the_shipped_default_is_supported_with_room_on_the_day_the_table_was_written() -> None:
    minor = int(DEFAULT.split(".")[1])
    end = TABLE[minor].end_of_standard_support
    assert TABLE[minor].kind == "schedule"
    assert (end - versions.TABLE_WRITTEN).days > versions.WARN_DAYS, end
    assert versions.check_support(minor, versions.TABLE_WRITTEN) == ""


def test_an_expired_version_is_refused_in_one_line_naming_key_version_date_and_source() -> None:
    with pytest.raises(ConfigError) as refused:
        from_stack_file("prod", {f"{PROJECT}:kubernetesVersion": "1.33"}, today=versions.TABLE_WRITTEN)
    line = str(refused.value)
    print(line)  # the "refusal of an expired version in one line"
    assert "\n" not in line
    assert line.startswith(f"{PROJECT}:kubernetesVersion: '1.33' is not valid; ")
    assert "2026-08-03" in line and versions.SOURCE_URL in line and "use 1.35 or later" in line


def test_the_shipped_stacks_after_the_default_expires_are_refused_and_warned_before() -> None:
    end = TABLE[int(DEFAULT.split(".")[1])].end_of_standard_support
    with pytest.raises(ConfigError, match="kubernetesVersion"):
        from_stack_file("dev", today=end + datetime.timedelta(days=1))
    warned = from_stack_file("dev", today=end - datetime.timedelta(days=30))
    assert len(warned.warnings) == 1 and "in 30 days" in warned.warnings[0]
    assert warned.warnings[0].startswith(f"{PROJECT}:kubernetesVersion: ")
    assert from_stack_file("dev", today=versions.TABLE_WRITTEN).warnings == ()


@settings(max_examples=200, deadline=None)
@given(minor=st.integers(0, 120), today=st.dates(datetime.date(2020, 1, 1), datetime.date(2032, 12, 31)))
def test_refused_exactly_after_the_end_warned_within_the_window(minor: int, today: datetime.date) -> None:
    first, last = min(TABLE), max(TABLE)
    try:
        notice = versions.check_support(minor, today, TABLE)
    except versions.VersionError as err:
        assert "\n" not in str(err)
        assert minor < first or today > TABLE[minor].end_of_standard_support
        return
    if minor > last:
        assert "newer than the GKE version table" in notice
        return
    end = TABLE[minor].end_of_standard_support
    assert minor >= first and today <= end
    assert bool(notice) == ((end - today).days <= versions.WARN_DAYS)


@given(text=st.text(max_size=30))
def test_the_today_variable_is_a_date_or_one_line_naming_it(text: str) -> None:
    try:
        day = versions.today_from_env({versions.TODAY_ENV: text})
    except versions.VersionError as err:
        assert str(err).startswith(versions.TODAY_ENV) and "\n" not in str(err)
        return
    assert day.isoformat() == text.strip()


def test_without_the_variable_the_real_date_is_used() -> None:
    assert versions.today_from_env({}) == datetime.date.today()


def test_a_bad_today_variable_is_one_config_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(versions.TODAY_ENV, "yesterday")
    with pytest.raises(ConfigError, match=r"^TRITON_GKE_TODAY: 'yesterday' is not a date"):
        from_stack_file("dev")


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ("35,2026-02-11,2027-04-11,,schedule\n37,,2027-09-01,,estimated\n", "does not follow"),
        ("35,2026-02-11,2027-04-11,,schedule\n36,,2027-01-01,,estimated\n", "before 1.35"),
        ("35,2026-02-11,2027-13-11,,schedule\n", "is not a date"),
        ("35,2026-02-11,2027-04-11,,guess\n", "kind"),
        ("x5,2026-02-11,2027-04-11,,schedule\n", "minor"),
        ("", "no GKE versions"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_file(tmp_path, rows: str, says: str) -> None:
    path = tmp_path / "versions.csv"
    path.write_text("minor,regular_available,end_of_standard_support,end_of_extended_support,kind\n" + rows)
    with pytest.raises(CatalogueError, match=says) as refused:
        versions.load_versions(path)
    assert "\n" not in str(refused.value) and "versions.csv" in str(refused.value)


@pytest.mark.parametrize("text", ["1.035", "1.0", "01.35", "1.+35"])
def test_versions_gke_never_names_are_refused_in_one_line(text: str) -> None:
    """int("035") is 35: a leading zero once passed the settings and crashed the schema check."""
    with pytest.raises(ConfigError) as refused:
        from_stack_file("dev", {f"{PROJECT}:kubernetesVersion": text})
    assert "\n" not in str(refused.value) and str(refused.value).startswith(f"{PROJECT}:kubernetesVersion: ")


def test_the_settings_carry_the_version_as_gke_spells_it() -> None:
    assert from_stack_file("dev", {f"{PROJECT}:kubernetesVersion": "1.35"}).cluster.kubernetes_version == "1.35"


@pytest.mark.parametrize("stack", ["Dev", "a_b", "a.b", "9dev", "dev-", "-dev"])
def test_a_stack_whose_google_cloud_names_would_collide_or_be_invalid_is_refused(stack: str) -> None:
    """gcp_name lowercases and maps '_' and '.' to '-': 'Dev' and 'dev' would name one bucket and one set of service
    accounts, and a service account id must start with a letter (a red-team finding of issue 32)."""
    from triton_gke.settings import load_stack_settings

    with pytest.raises(ConfigError) as refused:
        load_stack_settings({}, stack=stack)
    assert str(refused.value).startswith(f"stack {stack!r}: ") and "\n" not in str(refused.value)
