"""triton-gke smoke's input boundary: addresses and repositories are refused in one line, before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triton_gke.model_repo.smoke import SmokeError, main, parse_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://34.1.2.3", ("34.1.2.3:80", False)),
        ("https://triton.example.com", ("triton.example.com:443", True)),
        ("http://localhost:8000/", ("localhost:8000", False)),
        # The stack's httpEndpoint output, pasted as it is.
        ("http://34.1.2.3/v2/models/MODEL/infer", ("34.1.2.3:80", False)),
        ("http://[::1]:8000", ("[::1]:8000", False)),
    ],
)
def test_addresses_a_user_pastes_become_tritonclients_host_and_port(text: str, expected: tuple[str, bool]) -> None:
    assert parse_address(text) == expected


@given(st.text(max_size=80))
def test_any_text_is_an_address_or_a_one_line_refusal_naming_it(text: str) -> None:
    try:
        host, ssl = parse_address(text)
    except SmokeError as err:
        assert "\n" not in str(err).strip("\n") or "\n" in text
        assert str(err).startswith("address ") and len(str(err)) < 600 and "\n" not in str(err)
        assert "@" not in text.split("//", 1)[-1].split("/", 1)[0] or "***@" in str(err) or "//" not in text
    else:
        assert text.startswith(("http://", "https://")) and ssl == text.startswith("https://")
        assert host.rsplit(":", 1)[1].isdigit()


def refusal(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err, (out, err)
    (line,) = err.splitlines()
    return line


def test_a_bad_address_is_refused_before_the_repository_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(capsys, "ftp://host", "--repository", str(tmp_path / "missing"))
    assert line == "error: triton-gke smoke: address 'ftp://host': expected http://HOST[:PORT] or https://HOST[:PORT]"


def test_a_repository_without_the_model_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(capsys, "http://127.0.0.1:1", "--repository", str(tmp_path), "--model", "original")
    assert line.startswith(f"error: triton-gke smoke: {tmp_path / 'original' / 'config.pbtxt'}: no such model config")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("http://[::1", "not an http(s)://HOST[:PORT] URL"),
        ("http://" + "a" * 300 + ".com", "is not an IP address or a DNS name"),
        ("http://a b", "is not an IP address or a DNS name"),
        ("http://user:secret@127.0.0.1:8000", "expected no user, query or fragment"),
        ("http://127.0.0.1:0", "port 0"),
        ("http://host/?q=1", "expected no user, query or fragment"),
    ],
)
def test_addresses_no_server_answers_are_refused_before_anything_is_sent(text: str, says: str) -> None:
    """Red team of issue 33: these once printed tracebacks, or were tried and reported as no answer."""
    with pytest.raises(SmokeError) as refused:
        parse_address(text)
    assert says in str(refused.value) and "secret" not in str(refused.value) and len(str(refused.value)) < 600


def test_a_model_name_that_is_a_path_and_a_repository_that_is_a_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "not a model folder name" in refusal(
        capsys, "http://127.0.0.1:1", "--model", "../x", "--repository", str(tmp_path)
    )
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "not a folder" in refusal(capsys, "http://127.0.0.1:1", "--repository", str(a_file))
