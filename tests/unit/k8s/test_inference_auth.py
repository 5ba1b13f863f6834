"""Inference needs a key (issue 44): every tritonserver the plan runs restricts the inference API group to a key from
a Secret, the stack exports the key as a secret, no address outside the cluster reaches Triton past that check, and
the opt-out is explicit.

Why Triton checks and what it checks (header, gRPC metadata, one key per group): contracts/triton.py, citing
triton-inference-server/server v2.51.0. The live proof with a real tritonserver:
tests/live/sandbox/test_inference_key.py.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from typing import Any

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.stacks import evaluate
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
from triton_gke.k8s.triton import (
    INFERENCE_KEY_DIGEST_ANNOTATION,
    INFERENCE_KEYS_SECRET,
    MODEL_DIGEST_ANNOTATION,
    key_digest,
)
from triton_gke.offline.plan_view import plan_records
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


# ---- the active key's digest in the pod template (red team 44, finding 4b) -----------------------------------------
def _component_plan(admin: str, key_a: str, key_b: str, slot: str) -> Plan:
    """A TritonOnCluster with the keys given (plain, as TritonOnClusterArgs take them)."""
    from tests.support.stacks import evaluate_component
    from triton_gke.k8s.on_cluster import TritonOnCluster

    args = {"model_repository": "gs://team-models/triton", "admin_key": admin, "inference_key_slot": slot}
    return evaluate_component(
        lambda: TritonOnCluster("team", {**args, "inference_key_a": key_a, "inference_key_b": key_b})
    )


@functools.cache
def _plan_text_with_other_keys() -> str:
    return json.dumps(plan_records(_component_plan(*(f"{name}-key-of-fifteen" for name in ("adm", "aaa", "bbb")), "a")))


def _digest_annotation(plan: Plan) -> str:
    ((deployment, _),) = _containers(plan, "tritonserver")
    return deployment.inputs["spec"]["template"]["metadata"]["annotations"][INFERENCE_KEY_DIGEST_ANNOTATION]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(INFERENCE_KEY_SLOTS), st.lists(KEYS, min_size=4, max_size=4, unique=True))
def test_the_pod_template_carries_the_active_keys_digest_and_nothing_of_the_keys(slot: str, keys: list[str]) -> None:
    """Replacing the active key changes the pod template, so the Deployment rolls every pod onto it (Kubernetes rolls
    a Deployment only when .spec.template changes, k8s/triton.py); replacing the idle key changes nothing there, and
    no key's text is anywhere in the plan (only a digest keyed with the admin key)."""
    admin, active, idle, other = keys
    by_slot = {slot: active, other_slot(slot): idle}
    plan = _component_plan(admin, by_slot["a"], by_slot["b"], slot)
    annotation = _digest_annotation(plan)
    assert annotation == key_digest(admin, active) and re.fullmatch(r"[0-9a-f]{16}", annotation)
    idle_renewed = {slot: active, other_slot(slot): other}
    assert _digest_annotation(_component_plan(admin, idle_renewed["a"], idle_renewed["b"], slot)) == annotation
    active_renewed = {slot: other, other_slot(slot): idle}
    assert _digest_annotation(_component_plan(admin, active_renewed["a"], active_renewed["b"], slot)) != annotation
    text = json.dumps(plan_records(plan))
    # A generated key may be a word the plan holds anyway ('inference-serve'): only the others can tell.
    telling = [k for k in keys if k not in _plan_text_with_other_keys()]
    assert not [k for k in telling if k in text], "a key in the plan"
    assert hashlib.sha256(active.encode()).hexdigest()[:16] not in text  # keyed, not a plain hash


def test_the_stacks_slots_give_two_digests_and_the_template_stays_visible(prod: Plan) -> None:
    """The digest is no Pulumi secret on purpose: a secret anywhere in the pod template made the SDK send the whole
    template as one secret (every label, argument and the model digest [secret]), hiding every change of the
    Deployment from preview and `plan --against`."""
    digests = {_digest_annotation(evaluate("dev", inferenceKeySlot=slot)) for slot in INFERENCE_KEY_SLOTS}
    assert len(digests) == 2
    for deployment, container in _containers(prod, "tritonserver"):
        template = deployment.inputs["spec"]["template"]
        assert "[secret]" not in json.dumps(template), deployment.name
        assert container["args"][0] == "tritonserver" and template["metadata"]["annotations"][MODEL_DIGEST_ANNOTATION]
    assert not any(
        INFERENCE_KEY_DIGEST_ANNOTATION in json.dumps(d.inputs)
        for d, _ in _containers(evaluate("dev", inferenceAuth=False), "tritonserver")
    )


# ---- keys given as Outputs (red team 44, finding 5) ----------------------------------------------------------------
KEY_FIELDS = ("admin_key", "inference_key_a", "inference_key_b")


@settings(max_examples=25, deadline=None)
@given(
    field=st.sampled_from(KEY_FIELDS),
    value=KEYS | st.text(max_size=300) | st.sampled_from(["", "abc", "k" * 20 + ",x=y", "k" * 257]),
)
def test_a_key_given_as_an_output_meets_the_rule_of_a_plain_one(field: str, value: str) -> None:
    """config.require_secret hands the component an Output: its value is checked once known, and a bad one stops the
    run with the plain key's one line (a RunError: no traceback), never repeating the value."""
    from tests.support.stacks import evaluate_component
    from triton_gke.k8s.on_cluster import KeyValueError, TritonOnCluster

    args = {"model_repository": "gs://team-models/triton", field: pulumi.Output.secret(value)}
    problem = inference_key_problem(field, value, {"inference_auth": True})
    try:
        evaluate_component(lambda: TritonOnCluster("team", args))
    except KeyValueError as err:
        assert isinstance(err, pulumi.RunError) and problem is not None
        assert str(err) == f"TritonOnCluster 'team': {problem}" and "\n" not in str(err)
    else:
        assert problem is None
