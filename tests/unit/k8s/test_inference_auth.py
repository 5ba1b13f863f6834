"""Inference needs a key (issue 44): every tritonserver the plan runs restricts the inference API group to a key from
a Secret, the stack exports the key as a secret, no address outside the cluster reaches Triton past that check, and
the opt-out is explicit.

Why Triton checks and what it checks (header, gRPC metadata, one key per group): contracts/triton.py, citing
triton-inference-server/server v2.51.0. The live proof with a real tritonserver:
tests/live/sandbox/test_inference_key.py.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import evaluate
from tests.unit.contracts.test_contracts import LOAD_SETTINGS, SETTING_ERROR
from triton_gke.contracts.loadtest import INFERENCE_HEADERS_ENV, join_headers
from triton_gke.contracts.triton import (
    GRPC_RESTRICTED_PREFIX,
    INFERENCE_KEY_ENV,
    INFERENCE_KEY_SLOTS,
    inference_key_header,
    inference_restrictions,
    other_slot,
    triton_server_args,
)
from triton_gke.k8s.on_cluster_args import ADMIN_KEY, inference_key_problem, inference_key_slot_problem
from triton_gke.k8s.triton import INFERENCE_KEYS_SECRET
from triton_gke.offline.runtime import Plan, output_values
from triton_gke.settings.errors import ConfigError

DEPLOYMENT, SECRET, SERVICE = "kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Secret", "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
# Every key the component accepts (k8s/on_cluster_args.py ADMIN_KEY, 15-256 characters).
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/-"
KEYS = st.text(alphabet=KEY_ALPHABET, min_size=15, max_size=256)


@pytest.fixture(scope="module")
def prod() -> Plan:
    return evaluate("prod")


def _outputs(plan: Plan) -> dict[str, Any]:
    """The stack outputs' values, secrets masked (what `triton-gke plan` prints). output_values awaits them with
    asyncio.run, which leaves the main thread without an event loop; the next mock run needs one."""
    try:
        return output_values(plan.outputs)
    finally:
        asyncio.set_event_loop(asyncio.new_event_loop())


def _containers(plan: Plan, name: str) -> list[tuple[Any, dict[str, Any]]]:
    return [
        (deployment, container)
        for deployment in plan.of_type(DEPLOYMENT)
        for container in deployment.inputs["spec"]["template"]["spec"]["containers"]
        if container["name"] == name
    ]


def _secret_env(container: dict[str, Any], name: str) -> dict[str, str]:
    (env,) = [e for e in container.get("env", []) if e["name"] == name]
    return env["valueFrom"]["secretKeyRef"]


def _parse_like_triton(flag_value: str) -> tuple[list[str], str, str]:
    """tritonserver's reading of API[,API]:NAME=VALUE: the first ':' then the first '=' after it
    (command_line_parser.cc ParseGenericConfigOption, v2.51.0)."""
    colon = flag_value.index(":")
    equals = flag_value.index("=", colon + 1)
    return flag_value[:colon].split(","), flag_value[colon + 1 : equals], flag_value[equals + 1 :]


def test_every_triton_of_prod_restricts_inference_to_the_key_of_its_secret(prod: Plan) -> None:
    tritons = _containers(prod, "tritonserver")
    assert len(tritons) == 3  # one per region
    for deployment, container in tritons:
        args = container["args"]
        assert [a for a in args if a.startswith("--") and "inference" in a] == inference_restrictions(
            f"$({INFERENCE_KEY_ENV})", "a"
        ), deployment.name
        assert _secret_env(container, INFERENCE_KEY_ENV) == {"name": INFERENCE_KEYS_SECRET, "key": "a"}
    secrets = [s for s in prod.of_type(SECRET) if s.inputs["metadata"]["name"] == INFERENCE_KEYS_SECRET]
    assert len(secrets) == 3
    # Both slots' keys, masked in the plan: Pulumi secrets (the random provider's result).
    assert all(s.inputs["stringData"] == {"a": "[secret]", "b": "[secret]"} for s in secrets)


def test_prod_exports_the_key_as_a_secret_and_names_its_header(prod: Plan) -> None:
    outputs = _outputs(prod)
    assert outputs["inferenceKey"] == "[secret]" and outputs["inferenceNextKey"] == "[secret]"
    assert outputs["inferenceKeyHeader"] == inference_key_header("a")
    assert outputs["inferenceNextKeyHeader"] == inference_key_header("b")


def test_no_address_outside_the_cluster_reaches_triton_but_through_its_check(prod: Plan) -> None:
    """The global load balancer's backends are the NEGs of the triton-neg Service, whose pods are the Deployments
    above; no LoadBalancer or NodePort Service and no Ingress selects Triton's pods."""
    assert prod.of_type(INGRESS) == []
    triton_labels = {d.name: d.inputs["spec"]["selector"]["matchLabels"] for d, _ in _containers(prod, "tritonserver")}
    for service in prod.of_type(SERVICE):
        spec = service.inputs["spec"]
        selects_triton = any(
            spec.get("selector") and labels.items() <= spec["selector"].items() for labels in triton_labels.values()
        )
        if selects_triton:
            assert spec.get("type", "ClusterIP") == "ClusterIP", service.name
    # The NEG Services exist (the load balancer's only path in) and carry the NEG annotation.
    negs = [s for s in prod.of_type(SERVICE) if "cloud.google.com/neg" in s.inputs["metadata"].get("annotations", {})]
    assert len(negs) == 3


def test_the_health_check_path_stays_open(prod: Plan) -> None:
    """READY_PATH is in Triton's health group, which nothing restricts: the load balancer's check needs no key."""
    for _, container in _containers(prod, "tritonserver"):
        groups = [_parse_like_triton(a.split("=", 1)[1])[0] for a in container["args"] if "restricted" in a]
        assert all("health" not in g for g in groups)


def test_locust_in_the_cluster_sends_both_keys_from_a_secret(prod: Plan) -> None:
    locusts = _containers(prod, "locust")
    assert locusts
    for _, container in locusts:
        ref = _secret_env(container, INFERENCE_HEADERS_ENV)
        assert ref == {"name": "locust-inference-headers", "key": INFERENCE_HEADERS_ENV}
    configs = [
        c for c in prod.of_type("kubernetes:core/v1:ConfigMap") if c.inputs["metadata"]["name"] == "locust-config"
    ]
    assert configs and all(INFERENCE_HEADERS_ENV not in c.inputs["data"] for c in configs)  # never in a ConfigMap


def test_the_key_slot_b_checks_b_and_exports_it_first() -> None:
    plan = evaluate("dev", inferenceKeySlot="b")
    ((_, container),) = _containers(plan, "tritonserver")
    assert inference_restrictions(f"$({INFERENCE_KEY_ENV})", "b")[0] in container["args"]
    assert _secret_env(container, INFERENCE_KEY_ENV)["key"] == "b"
    outputs = _outputs(plan)
    assert outputs["inferenceKeyHeader"] == inference_key_header("b")
    assert outputs["inferenceNextKeyHeader"] == inference_key_header("a")


def test_opting_out_is_explicit_and_leaves_no_key() -> None:
    plan = evaluate("dev", inferenceAuth=False)
    ((_, container),) = _containers(plan, "tritonserver")
    assert not any("inference" in a for a in container["args"] if a.startswith("--"))
    assert [e["name"] for e in container["env"]] == ["TRITON_ADMIN_KEY"]
    assert not [s for s in plan.of_type(SECRET) if "inference" in s.inputs["metadata"]["name"]]
    assert not {k for k in plan.outputs if k.startswith("inference")}


@given(st.text(max_size=8).filter(lambda v: v not in INFERENCE_KEY_SLOTS))
def test_a_key_slot_other_than_a_or_b_is_refused_in_one_line(slot: str) -> None:
    from triton_gke.settings import from_stack_file

    with pytest.raises(ConfigError) as caught:
        from_stack_file("dev", {"triton-gke:inferenceKeySlot": slot})
    message = str(caught.value)
    assert message.startswith("triton-gke:inferenceKeySlot: ") and "\n" not in message
    assert inference_key_slot_problem(slot).startswith("inference_key_slot: ")


@given(st.sampled_from(INFERENCE_KEY_SLOTS), KEYS)
def test_triton_reads_back_the_header_and_key_it_is_given(slot: str, key: str) -> None:
    """For every key the component accepts, tritonserver's own split of the two flags yields the inference group, the
    slot's header (HTTP as given, gRPC after Triton adds its prefix) and the key unchanged."""
    http, grpc = inference_restrictions(key, slot)
    http_apis, http_name, http_key = _parse_like_triton(http.removeprefix("--http-restricted-api="))
    grpc_apis, grpc_name, grpc_key = _parse_like_triton(grpc.removeprefix("--grpc-restricted-protocol="))
    assert http_apis == grpc_apis == ["inference"]
    assert http_key == grpc_key == key
    assert http_name == GRPC_RESTRICTED_PREFIX + grpc_name == inference_key_header(slot)
    assert inference_key_header(slot) != inference_key_header(other_slot(slot))


@given(st.text(max_size=300))
def test_a_key_outside_the_flag_syntax_is_refused_naming_its_field(value: str) -> None:
    ok = 15 <= len(value) <= 256 and ADMIN_KEY.fullmatch(value) is not None
    assert set(KEY_ALPHABET) == {c for c in map(chr, range(128)) if ADMIN_KEY.fullmatch(c)}
    problem = inference_key_problem("inference_key_a", value, {"inference_auth": True})
    assert (problem is None) == ok
    if problem:  # one fixed line: it never repeats the (secret) value
        assert problem == (
            "inference_key_a: not valid; expected 15-256 letters, digits or - . _ ~ + / "
            "(leave it out for a generated one)"
        )


def test_a_key_given_with_inference_auth_off_is_refused() -> None:
    problem = inference_key_problem("inference_key_b", "k" * 20, {"inference_auth": False})
    assert problem == "inference_key_b: only with inference_auth: true (without it inference takes no key)"


def test_without_a_key_the_command_line_restricts_no_inference() -> None:
    assert not [a for a in triton_server_args("gs://b/m") if "inference" in a]


@given(st.dictionaries(st.sampled_from([inference_key_header(s) for s in INFERENCE_KEY_SLOTS]), KEYS, min_size=1))
def test_the_locustfile_reads_back_the_headers_every_side_writes(headers: dict[str, str]) -> None:
    assert dict(LOAD_SETTINGS({INFERENCE_HEADERS_ENV: join_headers(headers)}).headers) == headers


@given(st.text(min_size=1, max_size=60).filter(lambda t: t.strip()))
def test_the_locustfile_refuses_bad_headers_without_repeating_them(text: str) -> None:
    pairs = [item.partition("=") for item in text.strip().split(",")]
    well_formed = all(
        eq and re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) and re.fullmatch(r"[A-Za-z0-9._~+/-]+", key)
        for name, eq, key in pairs
    )
    try:
        LOAD_SETTINGS({INFERENCE_HEADERS_ENV: text})
    except SETTING_ERROR as err:
        # A fixed line with the item's position: never the text, which holds keys.
        assert not well_formed and re.fullmatch(
            r"inference_headers: expected NAME=KEY\[,NAME=KEY\] \(item \d+ is not\)", str(err)
        )
    else:
        assert well_formed


@given(st.text(max_size=40), st.text(max_size=40))
def test_smoke_takes_the_key_from_the_environment_both_or_neither(header: str, key: str) -> None:
    """triton-gke smoke reads TRITON_INFERENCE_KEY_HEADER and TRITON_INFERENCE_KEY (never the command line): a pair it
    accepts is sent as given; anything else is one line naming a variable, never repeating the key."""
    from triton_gke.model_repo.smoke import KEY_ENV, KEY_HEADER_ENV, SmokeError, key_headers

    env = {k: v for k, v in ((KEY_HEADER_ENV, header), (KEY_ENV, key)) if v}
    good_header = re.fullmatch(r"[a-z0-9][a-z0-9-]*", header) is not None
    good_key = ADMIN_KEY.fullmatch(key) is not None
    try:
        found = key_headers(env)
    except SmokeError as err:
        assert str(err).startswith((f"{KEY_HEADER_ENV}: ", f"{KEY_ENV}: ")) and "\n" not in str(err)
        # The messages naming the key's variable are fixed texts: the key is never in them.
        assert not str(err).startswith(f"{KEY_ENV}: ") or str(err) in (
            f"{KEY_ENV}: not a key (letters, digits and - . _ ~ + / only)",
            f"{KEY_ENV}: set it too, or neither ({KEY_HEADER_ENV} and {KEY_ENV} go together)",
        )
        assert not (good_header and good_key)
    else:
        assert found == ({} if not env else {header: key}) and (not env or (good_header and good_key))
