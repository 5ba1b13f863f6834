"""TritonOnCluster's Args at their boundaries (the red team's findings): every field refused in one ArgsError line
naming the component and the field, before any child is declared; the NEG switch; the cluster-wide objects
docs/library.md lists; the provider's schema (secrets, descriptions) and command line; TritonGkeRegion's unknown
fields; the YAML example's config."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import string
from typing import Any

import pulumi
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import PROJECT, stack_settings
from tests.unit.infra.test_components import cluster_args
from triton_gke import provider
from triton_gke.contracts.naming import GOOGLE_LIKE
from triton_gke.contracts.workloads import ADAPTER_NAME
from triton_gke.infra.region import TritonGkeRegion, TritonGkeRegionArgs
from triton_gke.k8s import on_cluster_args as checks
from triton_gke.k8s.common import ArgsError
from triton_gke.k8s.on_cluster import ClusterWiring, TritonOnCluster, TritonOnClusterArgs, check_args
from triton_gke.offline.runtime import CloudMocks, Plan, RecordingMonitor, run_under_mocks
from triton_gke.settings.lifecycle import LifecycleSettings

REPO = PROJECT_DIR
REPOSITORY = "gs://team-models/triton"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"
MONITORED = {"monitoring": True, "load_test": True}
FIELDS = sorted(TritonOnClusterArgs.__annotations__)


def refusal(args: dict[str, Any], name: str = "team", **kw: Any) -> str:
    """The ArgsError line check_args raises for `args` (asserting there is one, and only one line)."""
    with pytest.raises(ArgsError) as refused:
        check_args(name, args, **kw)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"TritonOnCluster {name!r}: "), message
    return message


def field_of(message: str) -> str:
    named = re.match(r"TritonOnCluster '[^']*': (\w+): ", message)
    assert named, message
    return named.group(1)


def declare_refused(args: dict[str, Any], name: str = "team") -> str:
    """Declared under the mock runtime: refused with ArgsError (a RunError: no traceback) before any resource."""
    monitor = RecordingMonitor(CloudMocks())
    with pytest.raises(ArgsError) as refused:
        run_under_mocks(lambda: TritonOnCluster(name, args), "dev", stack_settings("dev"), PROJECT, monitor)
    assert isinstance(refused.value, pulumi.RunError)
    assert monitor.records == [], "nothing declared before the refusal"
    return str(refused.value)


def plan_of(args: dict[str, Any], name: str = "team") -> Plan:
    return run_under_mocks(lambda: TritonOnCluster(name, args), "dev", stack_settings("dev"), PROJECT)


# ---- 1. region: checked in the component's own Args check ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(region=st.text(min_size=1, max_size=12).map(lambda t: t + '"') | st.sampled_from(["", "a{b}", "a\nb", "$x"]))
def test_a_bad_region_is_refused_by_the_component_before_any_child(region: str) -> None:
    message = declare_refused({"model_repository": REPOSITORY, **MONITORED, "region": region})
    assert message.startswith("TritonOnCluster 'team': region: "), message


def test_region_and_grafana_password_need_monitoring() -> None:
    for field, value in (("region", "us-east1"), ("grafana_admin_password", "x" * 20)):
        message = refusal({"model_repository": REPOSITORY, field: value})
        assert field_of(message) == field and "only with monitoring: true" in message


# ---- 2. secrets ----------------------------------------------------------------------------------------------------

SECRET_CHARS = string.ascii_letters + string.digits + "-._~+/"


@settings(max_examples=100, deadline=None)
@given(secret=st.text(alphabet=SECRET_CHARS, max_size=40) | st.sampled_from(["", " ", " " * 20, "\t" * 16]))
def test_secrets_shorter_than_the_minimum_or_blank_are_refused(secret: str) -> None:
    """NIST SP 800-63B-4: a single-factor password has at least 15 characters (k8s/on_cluster_args.py)."""
    for field, extra in (("admin_key", {}), ("grafana_admin_password", MONITORED)):
        args = {"model_repository": REPOSITORY, **extra, field: secret}
        good = len(secret) >= checks.MIN_SECRET_LENGTH and secret.strip() == secret and secret.strip() != ""
        if good:
            check_args("team", args)
        else:
            assert field_of(refusal(args)) == field


def test_an_empty_grafana_password_is_refused_where_grafana_would_keep_admin_admin() -> None:
    message = declare_refused({"model_repository": REPOSITORY, **MONITORED, "grafana_admin_password": ""})
    assert "grafana_admin_password: not valid" in message
    assert field_of(refusal({"model_repository": REPOSITORY, "admin_key": "a"})) == "admin_key"
    # The key is spliced into --http-restricted-api=API:HEADER=KEY: its separators are refused.
    assert field_of(refusal({"model_repository": REPOSITORY, "admin_key": "k" * 20 + ",x=y"})) == "admin_key"


# ---- 3. values GKE, Kubernetes and GCS would reject --------------------------------------------------------------

BAD_REPOSITORIES = [
    "gs://team-models/tri\x00ton",
    "gs://team-models/tri\x1bton",
    "gs://team-models/a\nb",
    "gs://goog-models/triton",
    "gs://my-google-bucket/x",
    "gs://g00gle-models/x",
    "gs://192.168.5.4/x",
    "gs://team..models/x",
    "gs://team-models/../x",
    "gs://team-models/a//b",
    "gs://team-models/a?b",
    "gs://team-models/a#b",
    "gs://team-models/" + "a" * 1025,
    "gs://team-models/" + "é" * 600,  # 1200 bytes
    "gs://" + "a" * 64 + "/x",
    "gs://Team-models/x",
    "gs://-team/x",
]


@pytest.mark.parametrize("url", BAD_REPOSITORIES)
def test_repositories_gcs_would_reject_are_refused(url: str) -> None:
    message = declare_refused({"model_repository": url})
    assert field_of(message) == "model_repository"


BUCKET_PART = st.from_regex(r"[a-z0-9]([a-z0-9_-]{1,20}[a-z0-9])?", fullmatch=True)
BUCKETS = (
    st.lists(BUCKET_PART, min_size=1, max_size=3)
    .map(".".join)
    .filter(lambda b: 3 <= len(b) <= 63 and not b.startswith("goog") and not GOOGLE_LIKE.search(b))
)
PATH_PART = st.text(alphabet=string.ascii_letters + string.digits + "-_.=+@", min_size=1, max_size=12).filter(
    lambda p: p not in (".", "..")
)
PATHS = st.lists(PATH_PART, max_size=4).map("/".join)


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(bucket=BUCKETS, path=PATHS)
def test_generated_valid_repositories_are_accepted(bucket: str, path: str) -> None:
    assume(not is_ip(bucket))
    check_args("team", {"model_repository": f"gs://{bucket}/{path}" if path else f"gs://{bucket}"})


@settings(max_examples=200, deadline=None)
@given(bucket=BUCKETS, path=PATHS, bad=st.sampled_from(["\x00", "\x1b", "\r", "\n", "\x7f", "?", "#", "//", "/../"]))
def test_a_forbidden_character_anywhere_in_the_prefix_is_refused(bucket: str, path: str, bad: str) -> None:
    assume(not is_ip(bucket))
    where = len(path) // 2
    url = f"gs://{bucket}/{path[:where]}{bad}{path[where:]}x"
    assert field_of(refusal({"model_repository": url})) == "model_repository"


LABEL_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
LABEL_KEY = st.tuples(st.sampled_from(["", "cloud.google.com/", "example.io/"]), LABEL_NAME).map("".join)


@settings(max_examples=150, deadline=None)
@given(key=LABEL_KEY, value=LABEL_NAME | st.just(""))
def test_kubernetes_label_syntax_is_accepted(key: str, value: str) -> None:
    check_args("team", {"model_repository": REPOSITORY, "gpu_node_selector": {key: value}, "gpu_toleration_key": key})


@pytest.mark.parametrize(
    "field,value",
    [
        ("gpu_node_selector", {"bad key": "t4"}),
        ("gpu_node_selector", {"-pool": "t4"}),
        ("gpu_node_selector", {"a" * 64: "t4"}),
        ("gpu_node_selector", {"Example.io/pool": "t4"}),
        ("gpu_node_selector", {"pool": "t4\n"}),
        ("gpu_node_selector", {"pool": "x" * 64}),
        ("gpu_node_selector", {"pool": "-t4"}),
        ("gpu_toleration_key", "nvidia.com/gpu/x"),
        ("gpu_toleration_key", "gpu key"),
        ("gpu_toleration_key", ""),
        ("image_tag", "latest"),
        ("image_tag", "foo"),
        ("image_tag", "19.05-py3"),
        ("image_tag", "25.10-py3"),  # CUDA 13: the component cannot see the nodes' driver
        ("image_tag", "25.06-py3-sdk"),
        ("gpus_per_pod", 3),
        ("gpus_per_pod", 8),
        ("model_reader_service_account", "reader@p.iam.gserviceaccount.com\n"),
        ("model_reader_service_account", "@"),
        ("model_reader_service_account", "reader@example.com"),
        ("service_account_name", "Triton"),
        ("service_account_name", "triton_dev"),
        ("service_account_name", "triton.dev"),
        ("service_account_name", "-triton"),
        ("service_account_name", "t" * 64),
        ("service_account_name", ""),
        ("service_account_name", 7),
        ("kubeconfig", "not: [yaml"),
        ("kubeconfig", "just some text"),
    ],
)
def test_values_the_cluster_would_reject_are_refused_naming_the_field(field: str, value: Any) -> None:
    assert field_of(declare_refused({"model_repository": REPOSITORY, field: value})) == field


def test_the_service_account_is_the_instances_own_by_default_and_the_one_given_otherwise() -> None:
    """The pods run as the service account a Workload Identity binding names: PROJECT.svc.id.goog[triton/NAME]. By
    default one per instance (issue 44: `triton` was one principal for every user of the component in a project):
    tritonserver-PROJECT-STACK-NAME and 8 hex digits of sha256('tritonserver-PROJECT/STACK/NAME'), also an output."""
    digest = hashlib.sha256(f"tritonserver-{PROJECT}/dev/team".encode()).hexdigest()[:8]
    own = f"tritonserver-{PROJECT}-dev-team-{digest}"
    for extra, expected in (({}, own), ({"service_account_name": "triton-qa"}, "triton-qa")):
        output: list[str] = []

        def declare(extra: dict[str, Any] = extra, output: list[str] = output) -> None:
            triton = TritonOnCluster("team", {"model_repository": REPOSITORY, **extra})  # type: ignore[typeddict-item]
            triton.service_account_name.apply(output.append)

        plan = run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)
        (account,) = plan.of_type("kubernetes:core/v1:ServiceAccount")
        assert (account.inputs["metadata"]["namespace"], account.inputs["metadata"]["name"]) == ("triton", expected)
        (deployment,) = plan.of_type("kubernetes:apps/v1:Deployment")
        assert deployment.inputs["spec"]["template"]["spec"]["serviceAccountName"] == expected
        assert output == [expected]
    other_name = plan_of({"model_repository": REPOSITORY}, name="team2").of_type("kubernetes:core/v1:ServiceAccount")
    other_stack = run_under_mocks(
        lambda: TritonOnCluster("team", {"model_repository": REPOSITORY}), "prod", stack_settings("prod"), PROJECT
    ).of_type("kubernetes:core/v1:ServiceAccount")
    names = {own} | {a.inputs["metadata"]["name"] for a in (*other_name, *other_stack)}
    assert len(names) == 3, names
    message = refusal({"model_repository": REPOSITORY, "service_account_name": "Triton_QA"})
    assert message == (
        "TritonOnCluster 'team': service_account_name: 'Triton_QA' is not valid; expected a DNS-1123 label "
        "(lowercase letters, digits and -, starting and ending with a letter or digit, at most 63 characters)"
    )
    assert (
        field_of(
            declare_refused({"model_repository": REPOSITORY, "service_account_name": pulumi.Output.from_input("x")})
        )
        == "service_account_name"
    )


def test_a_cuda13_image_passes_where_the_composer_knows_a_driver_that_runs_it() -> None:
    check_args("team", {"model_repository": REPOSITORY, "image_tag": "25.10-py3"}, driver_branch=580)
    check_args("team", {"model_repository": REPOSITORY, "image_tag": "25.10-py3"}, driver_branch=535)
    message = refusal({"model_repository": REPOSITORY, "image_tag": "25.10-py3"}, driver_branch=570)
    assert "R570" in message and field_of(message) == "image_tag"


@settings(max_examples=200, deadline=None)
@given(name=st.text(alphabet=string.ascii_letters + string.digits + "-_.", min_size=0, max_size=70))
def test_the_component_name_is_a_dns_label(name: str) -> None:
    good = re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) is not None and len(name) <= 58
    if good:
        check_args(name, {"model_repository": REPOSITORY})
    else:
        assert refusal({"model_repository": REPOSITORY}, name=name).startswith(f"TritonOnCluster {name!r}: name: ")


def test_counts_given_as_outputs_say_they_must_be_plain_numbers() -> None:
    def declare() -> None:
        TritonOnCluster("team", {"model_repository": REPOSITORY, "min_replicas": pulumi.Output.from_input(2)})

    with pytest.raises(ArgsError, match=r"^TritonOnCluster 'team': min_replicas: must be a plain number"):
        run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT)


# ---- 4. the NEG switch and the cluster-wide objects -----------------------------------------------------------


def neg_services(plan: Plan) -> list[Any]:
    return [
        r
        for r in plan.of_type("kubernetes:core/v1:Service")
        if "cloud.google.com/neg" in (r.inputs["metadata"].get("annotations") or {})
    ]


def test_a_standalone_component_makes_gke_create_no_negs_unless_asked() -> None:
    assert neg_services(plan_of({"model_repository": REPOSITORY})) == []
    (service,) = neg_services(plan_of({"model_repository": REPOSITORY, "container_native_lb": True}))
    names = {
        p["name"]
        for p in json.loads(service.inputs["metadata"]["annotations"]["cloud.google.com/neg"])["exposed_ports"].values()
    }
    assert names == {"team-http", "team-grpc"}


def test_a_region_turns_the_negs_on_and_refuses_turning_them_off() -> None:
    def region(**serving: Any) -> TritonGkeRegionArgs:
        return TritonGkeRegionArgs(
            project="demo-project", cluster=cluster_args(), serving={"model_repository": REPOSITORY, **serving}
        )

    plan = run_under_mocks(lambda: TritonGkeRegion("us-central1", region()), "dev", stack_settings("dev"), PROJECT)
    assert len(neg_services(plan)) == 1
    with pytest.raises(ArgsError, match=r"^TritonGkeRegion 'us-central1': serving.container_native_lb: "):
        run_under_mocks(
            lambda: TritonGkeRegion("us-central1", region(container_native_lb=False)),
            "dev",
            stack_settings("dev"),
            PROJECT,
        )


def cluster_wide(plan: Plan) -> set[tuple[str, str]]:
    """(kind, name) of every object outside the component's own namespaces: cluster-scoped, or in kube-system."""
    found = set()
    for r in plan.resources:
        if not (r.custom and r.type.startswith("kubernetes:")):
            continue
        metadata = r.inputs.get("metadata", {})
        if "namespace" not in metadata or metadata["namespace"] == "kube-system":
            found.add((r.type.rsplit(":", 1)[-1], metadata["name"]))
    return found


def test_docs_list_every_cluster_wide_object_the_component_creates() -> None:
    plan = plan_of({"model_repository": REPOSITORY, **MONITORED, "autoscaling": True})
    docs = (REPO / "docs" / "library.md").read_text()
    section = docs.split("### Cluster-wide objects", 1)[1].split("\n## ", 1)[0]
    for kind, name in cluster_wide(plan):
        # The table spells the adapter's objects by their prefix, adapter_name (default prometheus-adapter).
        spelt = name.replace(f"{ADAPTER_NAME}-", "ADAPTER-", 1)
        assert f"`{spelt}`" in section and kind in section, (kind, name)
    assert f"default `{ADAPTER_NAME}`" in section
    assert "v1beta1.custom.metrics.k8s.io" in section and "`container_native_lb`" in docs


# ---- 5. the provider: secrets, descriptions, command line -------------------------------------------------------


def test_the_schema_marks_secrets_and_has_no_docstring_indentation() -> None:
    resource = provider.infer_schema()["resources"]["triton-gke:index:TritonOnCluster"]
    inputs, outputs = resource["inputProperties"], resource["properties"]
    assert all(inputs[name].get("secret") is True for name in ("kubeconfig", "adminKey", "grafanaAdminPassword"))
    assert outputs["adminKey"].get("secret") is True
    assert not any(
        p.get("secret") for name, p in inputs.items() if name not in provider.SECRET_INPUTS["TritonOnCluster"]
    )
    for prop in [*inputs.values(), *outputs.values()]:
        assert "\n " not in prop.get("description", ""), prop["description"]


def test_provider_help_lists_its_options_and_a_bad_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        provider.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--schema" in out and "--write-schema" in out
    for bad in (["--bogus"], ["--schemaa"], []):
        with pytest.raises(SystemExit) as done:
            provider.main(bad)
        err = capsys.readouterr().err
        assert done.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err


# ---- 6. TritonGkeRegion: unknown fields first --------------------------------------------------------------------


def test_a_region_names_an_unknown_field_with_a_did_you_mean() -> None:
    with pytest.raises(ArgsError, match=r"^TritonGkeRegion 'r': bogus: unknown field; expected one of project"):
        run_under_mocks(lambda: TritonGkeRegion("r", {"bogus": 1}), "dev", stack_settings("dev"), PROJECT)
    with pytest.raises(ArgsError, match=r"^TritonGkeRegion 'r': servng: unknown field; did you mean serving\?"):
        run_under_mocks(lambda: TritonGkeRegion("r", {"servng": {}}), "dev", stack_settings("dev"), PROJECT)


# ---- 7. the YAML example's config ------------------------------------------------------------------------------


def test_yaml_example_says_which_config_to_set() -> None:
    """Pulumi YAML: a config key without `default` must be set, one with it is optional
    (https://www.pulumi.com/docs/iac/languages-sdks/yaml/yaml-language-reference/#config). Every key the program
    needs is named in the file's `pulumi config set` comments, and none holds a default the component refuses."""
    path = REPO / "examples" / "on-cluster-yaml" / "Pulumi.yaml"
    text, program = path.read_text(), yaml.safe_load(path.read_text())
    for key, spec in program["config"].items():
        if "default" not in spec:
            assert re.search(rf"pulumi config set (--secret )?{key} ", text), f"{key}: required, but not explained"
    triton = program["resources"]["triton"]["properties"]
    for key, spec in program["config"].items():
        if "default" in spec and f"${{{key}}}" in triton.values():
            camel = next(k for k, v in triton.items() if v == f"${{{key}}}")
            field = re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), camel)
            check_args("triton", {"model_repository": REPOSITORY, field: spec["default"]})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), value=st.text(max_size=20) | st.integers(-3, 3) | st.none())
def test_any_refusal_names_the_field_it_is_about(field: str, value: Any) -> None:
    try:
        check_args("team", {"model_repository": REPOSITORY, **MONITORED, field: value})
    except ArgsError as err:
        assert field_of(str(err)) in (*FIELDS, "name")


# ---- the lifecycle contract a Python composer wires in ----------------------------------------------------------


def declare_with_lifecycle(lifecycle: LifecycleSettings, min_replicas: int = 1) -> tuple[Plan | None, str]:
    """(the plan, "") when TritonOnCluster takes `lifecycle`, else (None, its one-line refusal); nothing is declared
    before a refusal."""
    args: dict[str, Any] = {"model_repository": REPOSITORY, "min_replicas": min_replicas, "max_replicas": 8}
    monitor = RecordingMonitor(CloudMocks())
    wiring = ClusterWiring(lifecycle=lifecycle)
    try:
        declare = lambda: TritonOnCluster("team", args, wiring=wiring)  # noqa: E731
        return run_under_mocks(declare, "dev", stack_settings("dev"), PROJECT, monitor), ""
    except ArgsError as err:
        assert monitor.records == [], "nothing declared before the refusal"
        assert "\n" not in str(err)
        return None, str(err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pre_stop=st.integers(0, 30),
    interval=st.integers(1, 5),
    unhealthy=st.integers(1, 4),
    programming=st.integers(1, 10),
)
def test_a_pre_stop_shorter_than_the_endpoints_removal_is_refused_by_the_component(
    pre_stop: int, interval: int, unhealthy: int, programming: int
) -> None:
    """The composer's contract passes the stack's rules too (the red team: a ClusterWiring lifecycle skipped them)."""
    lifecycle = LifecycleSettings(
        pre_stop_s=pre_stop, health_check_interval_s=interval, health_check_timeout_s=1,
        unhealthy_threshold=unhealthy, lb_programming_s=programming, termination_grace_s=pre_stop + 5,
        drain_timeout_s=10,
    )  # fmt: skip
    plan, refused = declare_with_lifecycle(lifecycle)
    removal = unhealthy * interval + programming
    if pre_stop < removal:
        assert plan is None
        assert refused.startswith("TritonOnCluster 'team': wiring.lifecycle.pre_stop_s (tritonPreStopSeconds) ")
    else:
        assert plan is not None, refused


def test_a_disruption_budget_that_could_evict_every_minimum_pod_is_refused() -> None:
    lifecycle = LifecycleSettings(pdb_max_unavailable=2)
    plan, refused = declare_with_lifecycle(lifecycle, min_replicas=2)
    assert plan is None and "wiring.lifecycle.pdb_max_unavailable (tritonMaxUnavailable) 2: more than 1" in refused
    plan, refused = declare_with_lifecycle(lifecycle, min_replicas=3)
    assert plan is not None, refused
    budgets = [r.inputs["spec"]["maxUnavailable"] for r in plan.resources if r.type.endswith("PodDisruptionBudget")]
    assert budgets == [2]


# ---- red team of issue 33 ------------------------------------------------------------------------------------------
def test_a_custom_gpu_toleration_key_adds_to_gkes_gpu_taint_for_the_dcgm_exporter() -> None:
    """GKE taints GPU nodes nvidia.com/gpu in a cluster with CPU pools and tolerates it only for pods requesting GPUs:
    the exporter requests none, so it keeps that toleration beside a custom key (it once had the custom key only)."""
    args = {"model_repository": REPOSITORY, "monitoring": True, "load_test": True}
    plan = plan_of({**args, "gpu_toleration_key": "team.example.com/gpu"})
    (dcgm,) = [r for r in plan.resources if r.type == "kubernetes:apps/v1:DaemonSet" and "dcgm" in r.name]
    keys = {t["key"] for t in dcgm.inputs["spec"]["template"]["spec"]["tolerations"]}
    assert keys == {"nvidia.com/gpu", "team.example.com/gpu"}


def test_the_cpu_node_selector_as_an_output_is_refused_naming_it() -> None:
    message = declare_refused(
        {"model_repository": REPOSITORY, "cpu_node_selector": pulumi.Output.from_input({"a": "b"})}
    )
    assert field_of(message) == "cpu_node_selector" and "plain value" in message


def test_the_namespaces_default_service_account_is_refused() -> None:
    message = declare_refused({"model_repository": REPOSITORY, "service_account_name": "default"})
    assert field_of(message) == "service_account_name" and "every namespace" in message
