"""The config boundary, fuzzed: every key of Pulumi.yaml's schema, stack files, namespaces and secrets.

Generated values (wrong types, huge and negative numbers, unicode, empty, nested lists and maps, YAML special
scalars) for every setting must either plan or be refused with ONE line naming a config key: a ConfigError
in-process. Never a traceback, and within bounded time and memory. Stack files go through
settings/stack_file.py's strict reading. tests/live/offline/test_plan.py runs the real `triton-gke plan`."""

from __future__ import annotations

import base64
import json
import re
import resource
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pulumi.runtime.config import set_all_config

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import PROJECT, stack_settings
from triton_gke.infra.config import load_stack_settings
from triton_gke.offline.runtime import config_string, run_under_mocks
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.keys import provider_config_keys
from triton_gke.settings.schema import config_schema
from triton_gke.settings.stack_file import MAX_BYTES, MAX_CHARS, StackFileError, read_stack_file

KEYS = config_schema()[1]


TYPES = {f"{PROJECT}:{name}": spec.type for name, spec in KEYS.items()}


# A refusal names a config key first: the project's, or gcp:project.
# CPU_NOTE: the time bounds here count this process's CPU seconds (time.process_time: its user and system CPU time,
# not the time it waited for a core, https://docs.python.org/3/library/time.html#time.process_time), so other work
# on a busy machine does not move them; each bound stays over 10x what the work takes, room for a slower machine.
# What they catch is work out of proportion (an alias expanded, a value parsed without a bound), not a slow host.
NAMES_A_KEY = re.compile(rf"^({re.escape(PROJECT)}:[A-Za-z0-9]+|gcp:project)\b")


# YAML scalars whose meaning depends on the reader (YAML 1.1 vs yaml.v3) or that are empty.
YAML_SPECIALS = (
    "NO", "no", "yes", "Yes", "on", "off", "y", "n", "~", "null", "Null", "", "010", "0o10", "0x10", "0b11",
    "1e3", "1E3", "12:30", "1_000", "+5", "-0", ".inf", "-.inf", ".nan", "2024-01-01", "1.30", "true", "false",
    "TRUE", "0", "-1", "2147483648", "9" * 30, "[]", "{}", "[a, [b, [c]]]", "{a: 1}", "'quoted'", '"q"',
)  # fmt: skip


FILES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)


# What a setting can arrive as: JSON of any shape (as `pulumi config set --path` or a stack file's lists give),
# raw text (as `pulumi config set KEY TEXT` gives), YAML specials, and valid values of other keys.
OTHER_VALID = [config_string(spec.default) for spec in KEYS.values() if spec.default not in (None, "", [])]


config_values = (
    json_values.map(config_string)
    | st.text(max_size=60)
    | st.sampled_from(YAML_SPECIALS)
    | st.sampled_from(OTHER_VALID)
    | st.integers(min_value=-(10**12), max_value=10**12).map(str)
    # Past every float and int64: a bound missed anywhere surfaces as an OverflowError traceback, not one line.
    | st.integers(min_value=10**12, max_value=10**400).map(str)
)


def _refusal(config: dict[str, str]) -> ConfigError | None:
    """Load the settings exactly as the program does; the ConfigError if refused (anything else propagates)."""
    try:
        run_under_mocks(load_stack_settings, "dev", config, PROJECT)
    except ConfigError as err:
        return err
    return None


def _assert_one_line_naming_a_key(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert NAMES_A_KEY.match(message), f"does not start with a config key: {message}"


# ---------------------------------------------------------------- in-process, many examples
@settings(max_examples=800, deadline=None)
@given(key=st.sampled_from(sorted(KEYS)), value=config_values)
def test_any_value_of_any_setting_plans_or_is_refused_in_one_line(key: str, value: str) -> None:
    started = time.process_time()  # CPU seconds (CPU_NOTE)
    refused = _refusal(stack_settings("dev") | {f"{PROJECT}:{key}": value})
    assert time.process_time() - started < 5
    if refused is not None:
        _assert_one_line_naming_a_key(str(refused))


@settings(max_examples=300, deadline=None)
@given(values=st.dictionaries(st.sampled_from(sorted(KEYS)), config_values, min_size=2, max_size=6))
def test_several_bad_settings_at_once_are_refused_in_one_line(values: dict[str, str]) -> None:
    refused = _refusal(stack_settings("dev") | {f"{PROJECT}:{k}": v for k, v in values.items()})
    if refused is not None:
        _assert_one_line_naming_a_key(str(refused))


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(k for k, spec in KEYS.items() if spec.type == "string")), text=st.text(max_size=40))
@example(key="modelPrefix", text=" ")  # found by hypothesis: the prefix's whitespace rule answered first
def test_text_with_control_characters_is_refused(key: str, text: str) -> None:
    refused = _refusal(stack_settings("dev") | {f"{PROJECT}:{key}": f"{text}\x00{text}"})
    assert refused is not None and "control characters" in str(refused), refused
    assert str(refused).startswith(f"{PROJECT}:{key}: ")


# A value no reading of the key's type takes: JSON of another type, or text that is not JSON at all.
NOT_JSON = st.text(max_size=20).filter(lambda text: not _parses(text))
WRONG_TYPE = {
    "integer": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)).map(json.dumps),
        st.sampled_from(["true", "false", "null", '"3"', "[1]", '{"a": 1}', "1.5", "NaN"]),
        st.lists(st.integers(), max_size=3).map(json.dumps),
        NOT_JSON,
    ),
    "boolean": st.one_of(
        st.integers().map(str), st.sampled_from(['"true"', "null", "[true]", "yes", "True"]), NOT_JSON
    ),
    "array": st.one_of(
        st.integers().map(str),
        st.sampled_from(["true", "null", '"us-central1"', '{"a": "b"}']),
        st.lists(st.integers() | st.booleans() | st.none(), min_size=1, max_size=3).map(json.dumps),
        NOT_JSON,
    ),
}


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_value_of_the_wrong_type_is_refused_naming_its_own_key(data: st.DataObject) -> None:
    """Each key is read by one home (settings/homes.py), so its own bad value is refused under its own name, never
    under a key read before it. (String keys: control characters, the test above.)"""
    key = data.draw(st.sampled_from(sorted(k for k, spec in KEYS.items() if spec.type != "string")))
    value = data.draw(WRONG_TYPE[KEYS[key].type])
    refused = _refusal(stack_settings("dev") | {f"{PROJECT}:{key}": value})
    assert refused is not None, f"{key}={value!r} was accepted"
    assert str(refused).startswith(f"{PROJECT}:{key}: ") and "\n" not in str(refused), refused


# ---------------------------------------------------------------- namespaces and secrets
@pytest.mark.parametrize(
    "key,suggestion",
    [
        ("triton_gke:regions", "triton-gke:regions"),
        ("triton-gk:regions", "triton-gke:regions"),
        ("tritongke:gpuMaxNode", "triton-gke:gpuMaxNodes"),
        ("Triton-GKE:gpuSpot", "triton-gke:gpuSpot"),
        ("gpc:project", "gcp:project"),
        ("kubernets:context", "kubernetes:context"),
    ],
)
def test_a_misspelt_namespace_is_refused_with_the_real_key(key: str, suggestion: str) -> None:
    refused = _refusal(stack_settings("dev") | {key: "x"})
    assert refused is not None, f"{key} was ignored"
    assert str(refused).startswith(f"{key}: unknown namespace") and f"did you mean {suggestion}?" in str(refused)


# Namespaces that are not typos stay accepted: Pulumi's own, the providers', and other packages' key spaces
# ("allows the AWS package to accept aws:region", https://www.pulumi.com/docs/iac/concepts/config/#configuration-keys).
@pytest.mark.parametrize("key", ["pulumi:tags", "aws:region", "acme:x", "gcp:impersonateServiceAccount"])
def test_keys_of_other_namespaces_are_accepted(key: str) -> None:
    assert _refusal(stack_settings("dev") | {key: "some-value"}) is None


# gcp: and kubernetes: keys are checked against the providers' own settings (settings/keys.py cites the docs).
@pytest.mark.parametrize(
    "key,value,says",
    [
        ("gcp:projekt", "x", "gcp:projekt: not a setting of the gcp provider; did you mean gcp:project?"),
        ("gcp:regoin", "us-central1", "did you mean gcp:region?"),
        ("gcp:zone", "x", "gcp:zone: 'x' is not valid"),
        ("gcp:zone", "europe-west4-a", "expected a zone of the stack's regions (us-central1)"),
        ("gcp:region", "mars", "gcp:region: 'mars' is not valid; this program deploys to triton-gke:regions"),
        ("gcp:region", "us-centrl1", "did you mean us-central1?"),
        ("kubernetes:kubeconfig", "x", "kubernetes:kubeconfig: never read"),
        ("kubernetes:contxt", "x", "did you mean kubernetes:context?"),
    ],
)
def test_provider_settings_are_checked_against_the_providers_keys(key: str, value: str, says: str) -> None:
    refused = _refusal(stack_settings("dev") | {key: value})
    assert refused is not None and str(refused).startswith(f"{key}: ") and says in str(refused), refused


@pytest.mark.parametrize("key,value", [("gcp:region", "us-central1"), ("gcp:zone", "us-central1-b")])
def test_provider_defaults_inside_the_stacks_regions_are_accepted(key: str, value: str) -> None:
    assert _refusal(stack_settings("dev") | {key: value}) is None


@settings(max_examples=40, deadline=None)
@given(name=st.from_regex(r"[a-z][A-Za-z]{2,20}", fullmatch=True))
def test_any_gcp_key_is_accepted_only_if_the_provider_has_it(name: str) -> None:
    refused = _refusal(stack_settings("dev") | {f"gcp:{name}": "false"})
    if name in provider_config_keys("gcp") and name not in ("region", "zone", "credentials", "accessToken"):
        assert refused is None, refused
    else:
        assert refused is not None and str(refused).startswith(f"gcp:{name}: "), refused


PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"


SERVICE_ACCOUNT = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "k", "private_key": PEM})


PUTTY = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: me\nPublic-Lines: 2\nAAAAC3Nza\n"


OAUTH_TOKEN = "ya29.a0AfB_byC9xY8kLmN3oPqRsTuVwXyZ0123456789"


OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("key", [f"{PROJECT}:modelSource", "acme:token"])
@pytest.mark.parametrize(
    "secret", [PUTTY, OAUTH_TOKEN, OPENSSH, _b64(SERVICE_ACCOUNT), _b64(PEM), _b64(_b64(PEM)), f"x={_b64(PUTTY)}"]
)
def test_wrapped_key_material_is_refused(key: str, secret: str) -> None:
    refused = _refusal(stack_settings("dev") | {key: secret})
    assert refused is not None and str(refused).startswith(f"{key}: holds a private key"), refused
    assert f"pulumi config set --secret {key}" in str(refused) and secret[:12] not in str(refused)


@settings(max_examples=30, deadline=None)
@given(key=st.sampled_from(["gcp:credentials", "gcp:accessToken"]), value=st.text(max_size=60))
def test_credential_keys_are_refused_in_plain_text_whatever_the_value(key: str, value: str) -> None:
    refused = _refusal(stack_settings("dev") | {key: value})
    assert refused is not None and str(refused).startswith(f"{key}: a credential"), refused


@pytest.mark.parametrize("key", ["gcp:credentials", "gcp:accessToken", "acme:token"])
def test_a_value_set_with_secret_is_accepted(key: str) -> None:
    """`pulumi config set --secret`: the engine hands the program the decrypted value and lists the key as secret."""
    config = stack_settings("dev") | {key: _b64(SERVICE_ACCOUNT)}

    def load_as_pulumi_up() -> None:
        set_all_config(config, secret_keys=[key])  # what the Python language host does with the engine's list
        load_stack_settings()

    run_under_mocks(load_as_pulumi_up, "dev", config, PROJECT)
    assert _refusal(stack_settings("dev") | {key: "[secret]"}) is None  # the offline plan's stand-in for `secure:`


@pytest.mark.parametrize("key", ["gcp:credentials", f"{PROJECT}:modelSource", "acme:token"])
@pytest.mark.parametrize("secret", [PEM, SERVICE_ACCOUNT, PEM.replace("PRIVATE", "RSA PRIVATE")])
def test_key_material_in_plain_config_is_refused_without_echoing_it(key: str, secret: str) -> None:
    refused = _refusal(stack_settings("dev") | {key: secret})
    assert refused is not None
    assert str(refused).startswith(f"{key}: ") and f"pulumi config set --secret {key}" in str(refused)
    assert "MIIE" not in str(refused) and "\n" not in str(refused)


# ---------------------------------------------------------------- stack files
def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "Pulumi.fuzz.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _read(path: Path) -> dict[str, str]:
    return read_stack_file(path, PROJECT, TYPES)


def _refused(path: Path) -> str:
    with pytest.raises(StackFileError) as refused:
        _read(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(path.name), message
    return message


@pytest.mark.parametrize(
    "value,key_type,says",
    [
        ("NO", "kubernetesVersion", 'quote it: "NO"'),
        ("1.30", "kubernetesVersion", 'quote it: "1.30"'),
        ("010", "tritonImageTag", "8 to YAML 1.1"),
        ("1e3", "modelPrefix", "a number to yaml.v3"),
        ("0x10", "cpuMaxNodes", "16 to YAML 1.1"),
        ("010", "cpuMaxNodes", "plain decimal"),
        ("12:30", "cpuMaxNodes", "750 to YAML 1.1"),
        ("yes", "gpuSpot", "true or false"),
        ("~", "modelSource", "empty value"),
        ("", "domain", "empty value"),
        ("[us-central1, NO]", "regions", 'quote it: "NO"'),
        ("y", "tritonImageTag", "True to the YAML 1.1 spec"),
        ("N", "kubernetesVersion", 'quote it: "N"'),
        ("[us-central1, n]", "regions", 'quote it: "n"'),
        ("Y", "gpuSpot", "true or false"),
    ],
)
def test_values_whose_meaning_depends_on_the_yaml_reader_are_refused(
    tmp_path: Path, value: str, key_type: str, says: str
) -> None:
    message = _refused(_write(tmp_path, f"config:\n  gcp:project: p-123456\n  {PROJECT}:{key_type}: {value}\n"))
    assert f"line 3: {PROJECT}:{key_type}: " in message and says in message, message


def test_the_shipped_stack_files_read_as_before() -> None:
    for stack in ("dev", "staging", "prod"):
        config = _read(PROJECT_DIR / f"Pulumi.{stack}.yaml")
        plain = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert config == {k: config_string(v) for k, v in plain.items()}


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    text = f"config:\n  {PROJECT}:gpuMaxNodes: 3\n  gcp:project: p-123456\n  {PROJECT}:gpuMaxNodes: 30\n"
    assert f"{PROJECT}:gpuMaxNodes: given twice (lines 2 and 4)" in _refused(_write(tmp_path, text))


@pytest.mark.parametrize(
    "content,says",
    [
        (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00", "binary"),
        (b"config:\n  gcp:project: \xff\xfe\n", "not UTF-8"),
        ("- a\n- b\n", "expected a YAML mapping"),
        ("just text\n", "expected a YAML mapping"),
        ("config: [a, b]\n", "config: expected a mapping"),
        ("config: {\n", "not valid YAML"),
        ("a: 1\n---\nb: 2\n", "not valid YAML"),
        ("config:\n  regions: [us-central1]\n", f"did you mean {PROJECT}:regions?"),
        ("config:\n  gcp:x: !!binary aGk=\n", "tag"),
        ("config:\n  gcp:x: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        ("config:\n  gcp:x: &a [*a]\n", "recursive alias"),
    ],
)
def test_a_file_that_is_not_a_stack_file_is_refused_in_one_line(tmp_path: Path, content: str | bytes, says: str):
    assert says in _refused(_write(tmp_path, content))


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, "config:\n" + "  # padding\n" * (MAX_BYTES // 10))
    assert "a stack file may hold at most" in _refused(path)


def _laughs(levels: int, fanout: int) -> str:
    lines = ["lol0: &lol0 [lol]"]
    for level in range(1, levels):
        lines.append(f"lol{level}: &lol{level} [{', '.join([f'*lol{level - 1}'] * fanout)}]")
    lines.append(f"config:\n  gcp:x: *lol{levels - 1}")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_fast_and_in_bounded_memory(tmp_path: Path) -> None:
    path = _write(tmp_path, _laughs(levels=10, fanout=10))  # 10^9 values once expanded
    started = time.process_time()  # CPU seconds (CPU_NOTE)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert "aliases included" in _refused(path)
    assert time.process_time() - started < 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: under 200 MiB more


# The YAML 1.1 boolean spellings (https://yaml.org/type/bool.html): whatever PyYAML or yaml.v3 make of them, a
# string setting written as one unquoted is refused, and the same text quoted arrives as written.
YAML11_BOOLS = [
    *("y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE"),
    *("on", "On", "ON", "off", "Off", "OFF"),
]


@FILES
@given(
    key=st.sampled_from(sorted(k for k, spec in KEYS.items() if spec.type == "string")),
    word=st.sampled_from(YAML11_BOOLS),
)
def test_a_yaml_1_1_boolean_for_a_string_setting_is_refused_unless_quoted(tmp_path: Path, key: str, word: str) -> None:
    message = _refused(_write(tmp_path, f"config:\n  {PROJECT}:{key}: {word}\n"))
    assert f"line 2: {PROJECT}:{key}: {word} unquoted is " in message and f'quote it: "{word}"' in message
    assert _read(_write(tmp_path, f"config:\n  {PROJECT}:{key}: '{word}'\n")) == {f"{PROJECT}:{key}": word}


def _aliased_strings(length: int, copies: int) -> str:
    """The red team's file: one long string anchored in one setting and aliased `copies` times in another."""
    aliases = ", ".join(["*s"] * copies)
    return f'config:\n  {PROJECT}:modelPrefix: &s "{"a" * length}"\n  {PROJECT}:modelVariants: [{aliases}]\n'


@FILES
@given(length=st.integers(1, 60_000), copies=st.integers(1, 4_000))
def test_aliases_are_bounded_by_the_characters_they_expand_to(tmp_path: Path, length: int, copies: int) -> None:
    """Refused, fast, exactly when the expanded text (anchor and copies) passes MAX_CHARS; read as written below."""
    path = _write(tmp_path, _aliased_strings(length, copies))
    expanded = len(PROJECT) * 2 + len("modelPrefix") + len("modelVariants") + 2 + len("config") + length * (copies + 1)
    started = time.process_time()  # CPU seconds (CPU_NOTE)
    if expanded > MAX_CHARS:
        assert "characters (aliases included)" in _refused(path)
        assert time.process_time() - started < 2
    else:
        assert json.loads(_read(path)[f"{PROJECT}:modelVariants"]) == ["a" * length] * copies


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    text = f"zones: &z [us-central1-a]\nconfig:\n  gcp:project: p-123456\n  {PROJECT}:zones: *z\n"
    assert _read(_write(tmp_path, text))[f"{PROJECT}:zones"] == '["us-central1-a"]'


@FILES
@given(key=st.sampled_from(sorted(k for k, spec in KEYS.items() if spec.type == "string")), text=st.text(max_size=40))
def test_quoted_text_is_read_back_exactly(tmp_path: Path, key: str, text: str) -> None:
    """Whatever the text, written as YAML writes strings (quoted where needed), it arrives unchanged.

    Except YAML's own line breaks (CR, LF, NEL, U+2028/9), which PyYAML's writer leaves for line folding to eat;
    no setting may hold them (settings/reader.py refuses control characters).
    """
    assume(not set(text) & set("\r\n\x85\u2028\u2029"))
    # PyYAML's writer leaves y/Y/n/N unquoted (its resolver knows no such booleans), while YAML 1.1 and Pulumi's
    # writer (go-yaml v3 quotes every "old bool", yaml.v3 encode.go isOldBool) treat them as booleans: the reader
    # refuses them unquoted on purpose (the test of YAML 1.1 booleans above covers that).
    assume(text not in {"y", "Y", "n", "N"})
    document = yaml.safe_dump({"config": {f"{PROJECT}:{key}": text}}, allow_unicode=True)
    assert _read(_write(tmp_path, document)) == {f"{PROJECT}:{key}": text}


@FILES
@given(number=st.integers(min_value=-(10**15), max_value=10**15), flag=st.booleans())
def test_plain_numbers_and_booleans_arrive_as_pulumi_passes_them(tmp_path: Path, number: int, flag: bool) -> None:
    text = f"config:\n  {PROJECT}:gpuMaxNodes: {number}\n  {PROJECT}:gpuSpot: {str(flag).lower()}\n"
    assert _read(_write(tmp_path, text)) == {
        f"{PROJECT}:gpuMaxNodes": str(number),
        f"{PROJECT}:gpuSpot": str(flag).lower(),
    }


yaml_fragments = (
    st.sampled_from(YAML_SPECIALS)
    | st.text(max_size=40)
    | json_values.map(lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip())
)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(KEYS)), fragment=yaml_fragments, junk=st.binary(max_size=30) | st.just(b""))
def test_any_stack_file_reads_or_is_refused_in_one_line(key: str, fragment: str, junk: bytes) -> None:
    text = f"config:\n  gcp:project: p-123456\n  {PROJECT}:{key}: {fragment}\n".encode() + junk
    path = Path(f"/tmp/Pulumi.fuzz-{id(text)}.yaml")
    try:
        path.write_bytes(text)
        try:
            config = _read(path)
        except StackFileError as err:
            assert "\n" not in str(err) and str(err).startswith(path.name)
            return
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items())
        refused = _refusal(stack_settings("dev") | config)
        if refused is not None:
            _assert_one_line_naming_a_key(str(refused))
    finally:
        path.unlink(missing_ok=True)
