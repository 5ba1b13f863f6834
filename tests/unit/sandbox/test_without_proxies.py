"""Every local process (Locust, Model Analyzer, the bench's Locust) gets its environment through one rule: no proxy
variable in any case, no_proxy=*, the rest kept (sandbox/processes.py without_proxies)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from triton_gke.sandbox.processes import PROXY_KEYS, without_proxies

PROXY_NAMES = st.sampled_from(PROXY_KEYS).flatmap(
    lambda key: st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(key, upper, strict=True))
    )
)
OTHER_NAMES = st.text(st.characters(codec="ascii", categories=("Lu", "Ll", "Nd")), min_size=1, max_size=12).filter(
    lambda name: name.lower() not in PROXY_KEYS
)


@given(st.dictionaries(PROXY_NAMES, st.text(max_size=20)), st.dictionaries(OTHER_NAMES, st.text(max_size=20)))
def test_no_proxy_variable_survives_and_the_rest_is_kept(proxies: dict[str, str], others: dict[str, str]) -> None:
    result = without_proxies({**others, **proxies})
    assert result == {**others, "no_proxy": "*"}


def test_grpc_and_upper_case_spellings_are_removed() -> None:
    env = {"GRPC_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "No_Proxy": "x", "PATH": "/bin"}
    assert without_proxies(env) == {"PATH": "/bin", "no_proxy": "*"}


def test_a_locust_starts_without_the_callers_locust_settings_or_proxies(monkeypatch) -> None:
    from triton_gke.sandbox.processes import locust_base_environment

    monkeypatch.setenv("rate", "99")  # a locust-config key (contracts/loadtest.py LOCUST_ENV_KEYS)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("KEEP_ME", "1")
    env = locust_base_environment()
    assert "rate" not in env and "HTTPS_PROXY" not in env and env["no_proxy"] == "*" and env["KEEP_ME"] == "1"
