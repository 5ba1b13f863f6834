"""Under a real engine the version check judges the real date: TRITON_GKE_TODAY (a hook of the offline runtime and
the tests) must not move it, or one environment variable would switch the check off for a deployment."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from triton_gke.infra import config
from triton_gke.settings.versions import TODAY_ENV


def judged_day(monkeypatch: pytest.MonkeyPatch, offline: bool) -> datetime.date | None:
    seen: dict[str, Any] = {}

    def load(_config: Any, *, today: datetime.date | None = None, **_kwargs: Any) -> Any:
        seen["today"] = today
        raise config.settings.ConfigError("stop here")

    monkeypatch.setenv(TODAY_ENV, "1999-01-01")
    monkeypatch.setitem(config._RUNTIME, "offline", offline)
    monkeypatch.setattr(config.settings, "load_stack_settings", load)
    monkeypatch.setattr(config, "RuntimeConfig", dict)
    monkeypatch.setattr(config, "_secret_keys", lambda _keys: frozenset())
    monkeypatch.setattr(config.pulumi, "get_stack", lambda: "dev")
    with pytest.raises(config.ConfigError):
        config.load_stack_settings()
    return seen["today"]


def test_a_real_engine_judges_todays_date_whatever_the_variable_says(monkeypatch: pytest.MonkeyPatch) -> None:
    assert judged_day(monkeypatch, offline=False) == datetime.date.today()


def test_the_offline_runtime_leaves_the_day_to_the_settings_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert judged_day(monkeypatch, offline=True) is None  # then settings/versions.py reads TRITON_GKE_TODAY


def test_the_offline_runtime_marks_itself_before_it_runs_a_program() -> None:
    from tests.support.stacks import evaluate

    evaluate("dev")
    assert config._RUNTIME["offline"] is True
