"""Command lines are logged with every restricted-API key redacted (sandbox, bench and tests share TritonServer)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from triton_gke.contracts.triton import ADMIN_KEY_HEADER, RESTRICTED_APIS, triton_server_args
from triton_gke.sandbox.triton import REDACTED, redact_command

# Keys as a user might set them: anything printable without whitespace, ':' and '=' included.
_keys = st.text(st.characters(codec="ascii", categories=("L", "N", "P", "S")), min_size=8, max_size=40)
_header_chars = st.characters(codec="ascii", categories=("L", "N"), include_characters="-_")
_headers = st.text(_header_chars, min_size=1, max_size=20)
_other_args = st.lists(st.sampled_from(["--strict-readiness=true", "--log-verbose=1", "--http-port=8000"]), max_size=3)


@settings(max_examples=60, deadline=None)
@given(key=_keys, header=_headers, apis=st.lists(st.sampled_from(RESTRICTED_APIS), min_size=1, unique=True))
def test_no_key_survives_redaction_and_the_rest_is_kept(key: str, header: str, apis: list[str]) -> None:
    value = f"{','.join(apis)}:{header}={key}"
    assume(key not in f"tritonserver --exit-on-error=true {value.removesuffix(key)}")  # else found where it belongs
    command = ["tritonserver", f"--http-restricted-api={value}", "--exit-on-error=true"]
    command.append(f"--grpc-restricted-protocol={value}")

    logged = redact_command(command)

    assert not any(key in arg for arg in logged)
    expected = f"{','.join(apis)}:{header}={REDACTED}"
    assert logged == [command[0], f"--http-restricted-api={expected}", command[2]] + [
        f"--grpc-restricted-protocol={expected}"
    ]


@settings(max_examples=30, deadline=None)
@given(key=_keys, others=_other_args)
def test_the_gke_command_line_keeps_everything_but_the_key(key: str, others: list[str]) -> None:
    command = [*triton_server_args("gs://b/models", gpu=False, admin_key=key), *others]
    assume(key not in " ".join([*triton_server_args("gs://b/models", gpu=False, admin_key=""), *others]))

    logged = redact_command(command)

    assert not any(key in arg for arg in logged)
    changed = [(a, b) for a, b in zip(command, logged, strict=True) if a != b]
    assert [a.split("=", 1)[0] for a, _ in changed] == ["--http-restricted-api", "--grpc-restricted-protocol"]
    assert all(b.endswith(f":{ADMIN_KEY_HEADER}={REDACTED}") for _, b in changed)


@settings(max_examples=30, deadline=None)
@given(value=st.text(st.characters(codec="ascii", exclude_characters="\x00"), max_size=30))
def test_any_restriction_value_keeps_at_most_its_apis_and_header(value: str) -> None:
    flag = "--grpc-restricted-protocol="
    (logged,) = redact_command([flag + value])

    assert logged.startswith(flag) and logged.endswith(REDACTED)
    kept = logged[len(flag) : -len(REDACTED)]
    # Either everything is hidden, or only "APIS:HEADER=" is kept: never a character after that "=".
    assert kept == "" or (value.startswith(kept) and kept.endswith("=") and ":" in kept and kept.count("=") == 1)
