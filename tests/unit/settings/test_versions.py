"""kubernetesVersion against GKE's end of standard support (settings/versions.py, infra/data/gke_versions.csv).

Every test passes its own `today` (or the table's date): none depends on the machine's clock.
"""

from __future__ import annotations

import datetime
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import PROJECT
from triton_gke.settings import ConfigError, cluster, from_stack_file, versions
from triton_gke.settings.catalogue import CatalogueError
from triton_gke.settings.schema import config_schema

TABLE = versions.load_versions()
SCHEMA = config_schema()[1]
DEFAULT = SCHEMA["kubernetesVersion"].default
DEFAULT_CHANNEL = SCHEMA["releaseChannel"].default
# The day after the last end of standard support the table knows: every dated minor is past it.
AFTER_THE_TABLE = max(e.end_of_standard_support for e in TABLE.values()) + datetime.timedelta(days=1)


def version_warnings(stack: str, overrides: dict[str, str] | None = None, **kw: datetime.date) -> list[str]:
    """The stack's kubernetesVersion warnings: a stack may carry others (staging and prod, with the load balancer and
    no domain, are warned that the inference key crosses the internet unencrypted: settings/load_balancer.py)."""
    warnings = from_stack_file(stack, overrides, **kw).warnings
    return [w for w in warnings if w.startswith(f"{PROJECT}:kubernetesVersion: ")]


def test_the_shipped_default_is_supported_with_room_on_the_day_the_table_was_written() -> None:
    minor = int(DEFAULT.split(".")[1])
    end = TABLE[minor].end_of_standard_support
    assert TABLE[minor].kind == "schedule"
    assert (end - versions.TABLE_WRITTEN).days > versions.WARN_DAYS, end
    assert versions.check_support(minor, versions.TABLE_WRITTEN, channel=DEFAULT_CHANNEL) == ""


def test_an_expired_version_is_warned_in_one_line_naming_key_version_date_and_what_gke_does() -> None:
    """1.33 ended standard support on 2026-08-03: GKE has upgraded a running REGULAR cluster past it, so refusing the
    stack would only block an emergency `up` (issue 43); the warning says what GKE does and what to raise it to."""
    settings = from_stack_file("prod", {f"{PROJECT}:kubernetesVersion": "1.33"}, today=versions.TABLE_WRITTEN)
    [line] = version_warnings("prod", {f"{PROJECT}:kubernetesVersion": "1.33"}, today=versions.TABLE_WRITTEN)
    print(line)
    assert "\n" not in line and line.startswith(f"{PROJECT}:kubernetesVersion: ")
    assert "GKE standard support for 1.33 ended on 2026-08-03" in line and versions.SOURCE_URL in line
    assert "upgrades the REGULAR channel's control planes and nodes past it automatically" in line
    assert versions.RELEASE_CHANNELS_URL in line and "creates no new cluster at 1.33" in line
    assert "raise it to the minor the clusters now run, 1.35 or later" in line
    assert settings.cluster.kubernetes_version == "1.33"  # the floor as set: min_master_version never downgrades


def test_the_shipped_stacks_after_the_default_expires_are_warned_before_and_after_never_refused() -> None:
    """One version warning after the end and 30 days before it, none on the day the table was written (the shipped
    stacks' other warnings are not about the version: version_warnings)."""
    end = TABLE[int(DEFAULT.split(".")[1])].end_of_standard_support
    for stack in ("dev", "staging", "prod"):
        after = version_warnings(stack, today=end + datetime.timedelta(days=1))
        assert len(after) == 1 and f"ended on {end.isoformat()}" in after[0], after
        warned = version_warnings(stack, today=end - datetime.timedelta(days=30))
        assert len(warned) == 1 and "in 30 days" in warned[0]
        assert version_warnings(stack, today=versions.TABLE_WRITTEN) == []


def test_prod_plans_the_day_after_the_tables_last_end_of_support_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path
) -> None:
    """Issue 43's must-show: `triton-gke plan --stack prod` on the day after the latest end of standard support in
    infra/data/gke_versions.csv (computed from the table) exits 0 and warns once, naming prod's version and its end
    date; the clusters keep their floor and channel (nothing in the plan moves for a date). The program's
    pulumi.log.warn reaches the mock runtime's logging (stderr from the command, pytest's log capture here)."""
    from tests.support.stacks import evaluate
    from triton_gke.offline import plan as plan_command

    monkeypatch.setenv(versions.TODAY_ENV, AFTER_THE_TABLE.isoformat())
    version = from_stack_file("prod", today=AFTER_THE_TABLE).cluster.kubernetes_version
    end = TABLE[int(version.split(".")[1])].end_of_standard_support.isoformat()
    caplog.set_level(logging.WARNING)
    assert plan_command.main(["--stack", "prod", "--out", str(tmp_path / "plan")]) == 0
    assert "error" not in capsys.readouterr().err
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"{PROJECT}:kubernetesVersion: ")]
    print(warned)
    assert len(warned) == 1 and f"GKE standard support for {version} ended on {end}" in warned[0], warned
    clusters = evaluate("prod").of_type("gcp:container/cluster:Cluster")
    assert len(clusters) == 3
    assert {(c.inputs["minMasterVersion"], c.inputs["releaseChannel"]["channel"]) for c in clusters} == {
        (version, DEFAULT_CHANNEL)
    }


def test_the_documented_warning_is_the_one_prod_gets_the_day_after_the_table() -> None:
    """docs/upgrades.md quotes the warning of `TRITON_GKE_TODAY=<that day> make plan STACK=prod`: it must stay true."""
    page = (PROJECT_DIR / "docs" / "upgrades.md").read_text()
    [warning] = version_warnings("prod", today=AFTER_THE_TABLE)
    assert f"`{warning}`" in page and f"TRITON_GKE_TODAY={AFTER_THE_TABLE.isoformat()} make plan STACK=prod" in page


def test_extended_keeps_the_minor_past_standard_support_and_names_both_dates() -> None:
    on = TABLE[35].end_of_standard_support + datetime.timedelta(days=1)
    extended = TABLE[35].end_of_extended_support
    settings = from_stack_file("prod", {f"{PROJECT}:releaseChannel": "EXTENDED"}, today=on)
    [line] = version_warnings("prod", {f"{PROJECT}:releaseChannel": "EXTENDED"}, today=on)
    assert f"GKE standard support for 1.35 ended on {TABLE[35].end_of_standard_support.isoformat()}" in line
    assert f"in extended support until about {extended.isoformat()} (estimated)" in line
    assert versions.PRICING_URL in line and "extra cluster management fee" in line
    assert settings.cluster.release_channel == "EXTENDED"
    [line] = version_warnings("prod", {f"{PROJECT}:releaseChannel": "EXTENDED"}, today=extended + datetime.timedelta(1))
    assert f"GKE extended support for 1.35 ended on {extended.isoformat()}" in line and "automatically" in line


def test_extended_before_its_first_minor_is_refused_naming_the_channel() -> None:
    config = {f"{PROJECT}:releaseChannel": "EXTENDED", f"{PROJECT}:kubernetesVersion": "1.26"}
    with pytest.raises(ConfigError) as refused:
        from_stack_file("dev", config)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{PROJECT}:releaseChannel: 'EXTENDED' is not valid; ")
    assert "from 1.27 on" in line
    config[f"{PROJECT}:kubernetesVersion"] = "1.27"
    assert from_stack_file("dev", config).cluster.release_channel == "EXTENDED"


CHANNELS = st.sampled_from(cluster.RELEASE_CHANNELS)


@settings(max_examples=300, deadline=None)
@given(
    minor=st.integers(0, 120),
    today=st.dates(datetime.date(2020, 1, 1), datetime.date(2032, 12, 31)),
    channel=CHANNELS,
)
def test_never_refused_warned_naming_the_date_once_past_it(minor: int, today: datetime.date, channel: str) -> None:
    notice = versions.check_support(minor, today, TABLE, channel=channel)  # raises nothing, whatever the day
    assert "\n" not in notice
    first, last = min(TABLE), max(TABLE)
    if minor > last:
        assert "newer than the GKE version table" in notice
        return
    if minor < first:
        assert f"1.{minor} is older than every GKE minor" in notice and "automatically" in notice
        return
    entry = TABLE[minor]
    standard, extended = entry.end_of_standard_support, entry.end_of_extended_support
    on_extended = channel == "EXTENDED" and extended is not None
    if today > standard:
        assert f"GKE standard support for 1.{minor} ended on {standard.isoformat()}" in notice or (
            on_extended and today > extended
        ), notice
    if on_extended and today > extended:
        assert f"GKE extended support for 1.{minor} ended on {extended.isoformat()}" in notice
    elif on_extended and today > standard:
        assert f"until about {extended.isoformat()}" in notice
    if today > (extended if on_extended else standard):
        assert "automatically" in notice and "raise it to" in notice
    if today <= standard:
        assert bool(notice) == ((standard - today).days <= versions.WARN_DAYS)
        assert not notice or f"ends on {standard.isoformat()}" in notice


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
