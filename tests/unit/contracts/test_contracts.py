"""The cross-component contracts (contracts/): one value per agreement, and every side that must agree on it does.

Each test reads the sides as a user meets them: the plan of `pulumi up`, the model repository Triton loads, the
locustfile's own settings parser, and the two parts that ship alone (the locustfile and the policy pack), which
keep copies of a contract that must equal it."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.checkout import PROJECT_DIR
from tests.support.stacks import stack_settings
from triton_gke.contracts.loadtest import LOCUST_ENV_KEYS, LOCUST_METRICS_PORT, LocustEnvironment
from triton_gke.contracts.naming import BUCKET_NAME_MAX, model_bucket_name
from triton_gke.contracts.paths import LOCUSTFILE
from triton_gke.contracts.placement import GPU_TAINT_EFFECT_GKE, GPU_TAINT_KEY
from triton_gke.contracts.triton import INFERENCE_PORTS, LIVE_PATH, PORTS, READY_PATH, TRT_CACHE_DIR
from triton_gke.contracts.workloads import TRITON_NAMESPACE, workload_identity_member
from triton_gke.infra.model_upload import BUILT_REPOSITORY
from triton_gke.loadtest import arrivals
from triton_gke.observability.settings import POD_SELECTORS
from triton_gke.offline.runtime import Plan, PlannedResource
from triton_gke.policy.principals import triton_service_account

FEW = settings(max_examples=40, deadline=None)


DEPLOYMENT = "kubernetes:apps/v1:Deployment"


WORKLOADS = (DEPLOYMENT, "kubernetes:apps/v1:DaemonSet")


# ---------------------------------------------------------------- the copies that ship alone
def _locustfile_nodes(names: set[str]) -> list[ast.stmt]:
    """Top-level definitions of the locustfile by name; fails loudly when the locustfile renames one."""
    tree = ast.parse(LOCUSTFILE.read_text())

    def name_of(node: ast.stmt) -> str | None:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        return getattr(node, "name", None)

    nodes = [n for n in tree.body if name_of(n) in names]
    assert {name_of(n) for n in nodes} == names, "the locustfile no longer defines these at top level"
    return nodes


def _locustfile_parser() -> tuple[Callable[[Mapping[str, str]], Any], type[Exception]]:
    """The locustfile's load_settings and SettingError, compiled from its source with its own helpers (importing the
    locustfile would import Locust and patch this process with gevent; tests/unit/k8s/test_loadtest.py does the
    same for rate_steps)."""
    wanted = {"DEFAULT_PORTS", "PAYLOAD_TYPES", "SettingError", "Settings", "load_settings"}
    wanted |= {"_get", "_number", "_integer", "_choice", "_name", "_server_url", "_arrival", "_steps", "_rate"}
    wanted |= {"_headers", "_HEADER_NAME", "_HEADER_KEY"}
    namespace: dict[str, Any] = {"__name__": "locustfile_settings", "arrivals": arrivals, "Mapping": Mapping}
    namespace |= {"re": __import__("re")}
    namespace |= {"dataclass": dataclass, "math": __import__("math"), "urlsplit": urlsplit, "Path": Path}
    module = ast.Module(body=_locustfile_nodes(wanted), type_ignores=[])
    # dont_inherit: evaluate annotations now, as dataclass finds no module of this name to resolve text ones in.
    exec(compile(module, str(LOCUSTFILE), "exec", dont_inherit=True), namespace)  # noqa: S102
    return namespace["load_settings"], namespace["SettingError"]


LOAD_SETTINGS, SETTING_ERROR = _locustfile_parser()


def test_the_locustfiles_default_ports_are_tritons_inference_ports() -> None:
    """The locustfile ships alone in a ConfigMap: its DEFAULT_PORTS copy must equal the contract, and a saddr
    without a port reaches Triton's port of the protocol."""
    (node,) = _locustfile_nodes({"DEFAULT_PORTS"})
    assert ast.literal_eval(node.value) == dict(INFERENCE_PORTS)
    for protocol, port in INFERENCE_PORTS.items():
        assert LOAD_SETTINGS({"protocol": protocol, "saddr": "triton"}).url == f"triton:{port}"
    assert LOAD_SETTINGS({}).metrics_port == LOCUST_METRICS_PORT


def test_the_policy_packs_gpu_taint_is_the_pools_taint() -> None:
    """The policy pack runs with only policy/ on sys.path, so it copies the taint; the copy must equal it."""
    from triton_gke.policy import policies

    assert policies.GPU_TAINT_KEY == GPU_TAINT_KEY
    assert GPU_TAINT_EFFECT_GKE in policies.GPU_TAINT_EFFECTS


# ---------------------------------------------------------------- the Locust environment
class _Recording(dict):
    """An environment that records every key read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


def test_the_environment_keys_are_exactly_the_keys_the_locustfile_reads() -> None:
    env = _Recording()
    LOAD_SETTINGS(env)
    assert env.read == set(LOCUST_ENV_KEYS)
    assert LocustEnvironment().to_env() == {}, "unset values are left out: the locustfile's defaults apply"


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", min_size=1, max_size=16)


_HOST = st.sampled_from(["127.0.0.1", "triton.triton.svc.cluster.local", "localhost", "[::1]", "10.0.0.7"])


_RATE = st.floats(min_value=0.001, max_value=arrivals.MAX_RATE) | st.integers(min_value=1, max_value=10_000)


# rate_steps numbers as the parser takes them: [0-9.eE+], so no negative exponent (1e-05) in the text.
_STEP_RATE = st.just(0.0) | st.floats(min_value=0.001, max_value=arrivals.MAX_RATE)


_SEGMENT = st.builds(arrivals.Segment, _STEP_RATE, _STEP_RATE, st.floats(min_value=0.001, max_value=86_400))


def _optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.none() | strategy


def _steps_text(segments: list[arrivals.Segment]) -> str:
    items = (
        f"{s.start!r}:{s.seconds!r}" if s.start == s.end else f"{s.start!r}-{s.end!r}:{s.seconds!r}" for s in segments
    )
    return ",".join(items)


@st.composite
def environments(draw: st.DrawFn) -> tuple[LocustEnvironment, tuple[arrivals.Segment, ...]]:
    """Valid settings, each set or left unset; rate and rate_steps never together (the locustfile refuses that)."""
    port = draw(_optional(st.integers(min_value=1, max_value=65535)))
    host = draw(_optional(_HOST))
    segments = draw(st.lists(_SEGMENT, min_size=1, max_size=4)) if draw(st.booleans()) else []
    environment = LocustEnvironment(
        model=draw(_optional(_NAME)),
        saddr=None if host is None else (host if port is None else f"{host}:{port}"),
        rps=draw(_optional(st.floats(min_value=0, max_value=1e6) | st.integers(min_value=0, max_value=1000))),
        arrival=draw(_optional(st.sampled_from(["poisson", "constant"]))),
        protocol=draw(_optional(st.sampled_from(["http", "grpc"]))),
        payload=draw(_optional(st.sampled_from(["fp32", "uint8"]))),
        metrics_port=draw(_optional(st.integers(min_value=0, max_value=65535))),
        rate=None if segments else draw(_optional(_RATE)),
        rate_steps=_steps_text(segments) if segments else None,
        input_name=draw(_optional(_NAME)),
        output_name=draw(_optional(_NAME)),
        batch=draw(_optional(st.integers(min_value=1, max_value=4096))),
        timeout_s=draw(_optional(st.floats(min_value=0.001, max_value=3600))),
        metrics_addr=draw(_optional(st.sampled_from(["0.0.0.0", "127.0.0.1", "::"]))),
        users=draw(_optional(st.integers(min_value=1, max_value=1_000_000))),
    )
    return environment, tuple(segments)


def _expected_url(environment: LocustEnvironment) -> str:
    protocol = environment.protocol or "http"
    parts = urlsplit(f"//{environment.saddr or '127.0.0.1'}")
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{parts.port or INFERENCE_PORTS[protocol]}"


@FEW
@given(environments())
def test_to_env_reads_back_through_the_locustfiles_parser(generated) -> None:
    """What a side sets is what the locustfile runs with; what it leaves unset takes the locustfile's default."""
    environment, segments = generated
    env = environment.to_env()
    assert set(env) <= set(LOCUST_ENV_KEYS) and all(isinstance(v, str) and v for v in env.values())
    parsed = LOAD_SETTINGS(env)
    defaults = LOAD_SETTINGS({})
    for key in ("model", "protocol", "payload", "input_name", "output_name", "metrics_addr", "arrival"):
        value = getattr(environment, key)
        assert getattr(parsed, key) == (getattr(defaults, key) if value is None else value), key
    for key in ("rps", "rate", "timeout_s", "batch", "metrics_port", "users"):
        value = getattr(environment, key)
        assert getattr(parsed, key) == (getattr(defaults, key) if value is None else value), key
    assert parsed.url == _expected_url(environment)
    assert parsed.rate_steps == segments
    assert parsed.trace == ()


def test_a_trace_file_reaches_the_locustfile() -> None:
    """arrival=trace with a file: the one setting the generator above leaves out (it needs a file)."""
    trace = PROJECT_DIR / "build" / "test-contracts-trace.txt"
    trace.parent.mkdir(exist_ok=True)
    trace.write_text("1000\n3000\n")
    try:
        parsed = LOAD_SETTINGS(LocustEnvironment(arrival="trace", trace=str(trace)).to_env())
    finally:
        trace.unlink()
    assert (parsed.arrival, parsed.trace) == ("trace", (0.001, 0.003))


def test_empty_text_is_unset_like_the_locustfile_reads_it() -> None:
    """The cluster leaves locustRateSteps '' out of the ConfigMap; to_env() does the same for any empty text."""
    assert LocustEnvironment(model="", rate_steps="", rps=0).to_env() == {"rps": "0"}


# ---------------------------------------------------------------- names
# Project IDs: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter
# (https://cloud.google.com/resource-manager/docs/creating-managing-projects); Pulumi stack names: letters, digits,
# '-', '_' and '.' (https://www.pulumi.com/docs/iac/concepts/stacks/).
_PROJECT = st.from_regex(r"\A[a-z][a-z0-9-]{4,28}[a-z0-9]\Z")


_STACK = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


# Bucket names (https://cloud.google.com/storage/docs/buckets#naming); gcp_name keeps to letters, digits and '-'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@FEW
@given(_PROJECT, _STACK)
def test_every_project_and_stack_gets_a_valid_bucket_name(project: str, stack: str) -> None:
    name = model_bucket_name(project, stack)
    assert _BUCKET.match(name) and len(name) <= BUCKET_NAME_MAX, name
    assert model_bucket_name(project, stack) == name


def test_the_plans_bucket_is_the_one_the_sandbox_fills(dev_plan: Plan) -> None:
    """pulumi up creates model_bucket_name(project, stack); the sandbox uploads to the same name on its emulator."""
    from triton_gke.sandbox import run as sandbox_run
    from triton_gke.settings import from_stack_file

    (bucket,) = dev_plan.of_type("gcp:storage/bucket:Bucket")
    assert bucket.inputs["name"] == model_bucket_name(from_stack_file("dev").project, "dev")
    assert sandbox_run.model_bucket_name is model_bucket_name


def test_the_binding_and_the_service_account_name_one_principal(dev_plan: Plan) -> None:
    """The model store binds PROJECT.svc.id.goog[triton/triton-dev]; Triton's pods run as that service account."""
    (binding,) = dev_plan.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    name, project = triton_service_account("dev"), stack_settings("dev")["gcp:project"]
    assert binding.inputs["member"] == workload_identity_member(project, TRITON_NAMESPACE, name)
    accounts = [
        a.inputs["metadata"]
        for a in dev_plan.of_type("kubernetes:core/v1:ServiceAccount")
        if a.inputs["metadata"]["namespace"] == TRITON_NAMESPACE
    ]
    assert [a["name"] for a in accounts] == [name]
    assert "iam.gke.io/gcp-service-account" in accounts[0]["annotations"]
    (triton,) = [d for d in dev_plan.of_type(DEPLOYMENT) if d.inputs["metadata"]["namespace"] == TRITON_NAMESPACE]
    assert triton.inputs["spec"]["template"]["spec"]["serviceAccountName"] == name


# ---------------------------------------------------------------- the plan: every side agrees
def _pod(workload: PlannedResource) -> dict:
    return workload.inputs["spec"]["template"]


def _tritons(plan: Plan) -> list[PlannedResource]:
    found = [d for d in plan.of_type(DEPLOYMENT) if d.inputs["metadata"]["name"] == "triton"]
    assert found and all(d.inputs["metadata"]["namespace"] == "triton" for d in found)
    return found


def _container(deployment: PlannedResource) -> dict:
    (container,) = _pod(deployment)["spec"]["containers"]
    return container


def test_the_trt_cache_in_config_pbtxt_lies_in_the_pods_cache_volume(dev_plan: Plan) -> None:
    """config.pbtxt tells ONNX Runtime where to keep TensorRT engines; the Triton pod must mount a writable volume
    there, or every engine is rebuilt (minutes on a T4) at every model load, or the build fails on a read-only path."""
    (deployment,) = _tritons(dev_plan)
    container = _container(deployment)
    volumes = {v["name"]: v for v in _pod(deployment)["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert TRT_CACHE_DIR in mounts and not mounts[TRT_CACHE_DIR].get("readOnly")
    assert "emptyDir" in volumes[mounts[TRT_CACHE_DIR]["name"]]
    checked = 0
    for path in sorted(BUILT_REPOSITORY.glob("*/config.pbtxt")):
        config = text_format.Parse(path.read_text(), mc.ModelConfig())
        for accelerator in config.optimization.execution_accelerators.gpu_execution_accelerator:
            for key in ("trt_engine_cache_path", "trt_timing_cache_path"):
                cache = PurePosixPath(accelerator.parameters[key])
                assert cache.is_relative_to(TRT_CACHE_DIR) and cache.parts[2] == config.name, (path, key, cache)
                checked += 1
    assert checked >= 2 * 4, "the reference repository has four TensorRT variants"


def test_triton_serves_the_contract_ports_and_paths(prod_plan: Plan) -> None:
    """The container, its Service, the load balancer's health check and firewall all name the same ports."""
    for deployment in _tritons(prod_plan):
        container = _container(deployment)
        assert {p["name"]: p["containerPort"] for p in container["ports"]} == dict(PORTS)
        assert container["readinessProbe"]["httpGet"]["path"] == READY_PATH
        assert container["livenessProbe"]["httpGet"]["path"] == LIVE_PATH
    (check,) = prod_plan.of_type("gcp:compute/healthCheck:HealthCheck")
    http_check = check.inputs["httpHealthCheck"]
    assert (http_check["port"], http_check["requestPath"]) == (PORTS["http"], READY_PATH)
    for firewall in prod_plan.of_type("gcp:compute/firewall:Firewall"):
        if "-allow-lb-" in firewall.name:
            (allow,) = firewall.inputs["allows"]
            assert sorted(allow["ports"]) == sorted(str(p) for p in INFERENCE_PORTS.values())
    for service in prod_plan.of_type("kubernetes:core/v1:Service"):
        if service.inputs["metadata"]["namespace"] == "triton":
            for port in service.inputs["spec"]["ports"]:
                assert port["port"] == PORTS[port["targetPort"]]


def test_locust_config_reaches_tritons_service(dev_plan: Plan) -> None:
    """The ConfigMap the locustfile reads (through its own parser) points at Triton's Service, port and all."""
    (config,) = [
        c for c in dev_plan.of_type("kubernetes:core/v1:ConfigMap") if c.inputs["metadata"]["name"] == "locust-config"
    ]
    parsed = LOAD_SETTINGS(config.inputs["data"])
    service = next(
        s
        for s in dev_plan.of_type("kubernetes:core/v1:Service")
        if s.inputs["metadata"]["name"] == "triton" and s.inputs["metadata"]["namespace"] == "triton"
    )
    ports = {p["name"]: int(p["port"]) for p in service.inputs["spec"]["ports"]}  # the mock gives numbers as floats
    assert parsed.url == f"triton.triton.svc.cluster.local:{ports[parsed.protocol]}"
    assert parsed.metrics_port == LOCUST_METRICS_PORT


def test_every_scrape_job_finds_its_pods(dev_plan: Plan) -> None:
    """Prometheus selects pods by namespace, labels and port name (observability/settings.py); the components label
    them from the same contract, so each job finds exactly one workload with a port of that name."""
    for selector in POD_SELECTORS:
        found = [
            w
            for kind in WORKLOADS
            for w in dev_plan.of_type(kind)
            if w.inputs["metadata"]["namespace"] == selector.namespace
            and dict(selector.labels).items() <= _pod(w)["metadata"]["labels"].items()
        ]
        assert len(found) == 1, (selector.job, [w.name for w in found])
        ports = [p["name"] for c in _pod(found[0])["spec"]["containers"] for p in c.get("ports", [])]
        assert selector.port in ports, (selector.job, ports)


@pytest.mark.parametrize("field", [f.name for f in fields(LocustEnvironment)])
def test_the_locustfiles_settings_table_documents_every_key(field: str) -> None:
    """The locustfile's docstring is the user's reference for locust-config: every key of the contract is in it."""
    docstring = ast.get_docstring(ast.parse(LOCUSTFILE.read_text())) or ""
    assert re.search(rf"^    {field}\s", docstring, re.MULTILINE), field


def test_local_runs_hand_the_locustfile_only_what_they_mean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The sandbox and the benchmark start Locust from this process's environment: a variable left over in the shell
    under a locustfile key (model=..., rate=...) must never reach their run; what they set reads back as meant."""
    from triton_gke.bench.plans.load_plan import LoadPlan
    from triton_gke.bench.plans.slo_search import RateLadder, SloCriteria
    from triton_gke.bench.runners import runner
    from triton_gke.model_repo.settings import REFERENCE_VARIANTS
    from triton_gke.sandbox.components import LoadSettings, LocustLoad

    for key in LOCUST_ENV_KEYS:
        monkeypatch.setenv(key, "left-over")
    triton = SimpleNamespace(http_url="127.0.0.1:18000", grpc_url="127.0.0.1:18001")
    load = LocustLoad(LoadSettings("original", "grpc", "uint8", 3, 2, 5), triton, tmp_path)
    plan = LoadPlan(RateLadder(2.5, 1.5, 0.05, 500, 0.4), 8, 6.0, 2.0, 4.0, SloCriteria(), "constant")
    model = runner.Model(REFERENCE_VARIANTS[0], None, "input", "probabilities", 0)
    endpoint = runner.Endpoint("127.0.0.1:18000", "127.0.0.1:18001", None, None, None)
    sandbox_env, bench_env = load.environment(), runner.locust_env(plan, model, endpoint, "http")
    for env in (sandbox_env, bench_env):
        assert "left-over" not in env.values()
    sandbox = LOAD_SETTINGS(sandbox_env)
    assert (sandbox.model, sandbox.url) == ("original", "127.0.0.1:18001")
    assert (sandbox.protocol, sandbox.payload) == ("grpc", "uint8")
    assert (sandbox.rps, sandbox.arrival, sandbox.metrics_port, sandbox.metrics_addr) == (
        3.0,
        "poisson",
        load.metrics_port,
        "127.0.0.1",
    )
    bench = LOAD_SETTINGS(bench_env)
    assert (bench.model, bench.url, bench.rate, bench.arrival) == (model.name, "127.0.0.1:18000", 2.5, "constant")
    assert (bench.input_name, bench.output_name, bench.metrics_port) == ("input", "probabilities", 0)


@FEW
@given(
    rate=st.integers(min_value=0, max_value=5000),
    arrival=st.sampled_from(["poisson", "constant"]),
    rps=st.integers(min_value=0, max_value=100),
    users=st.integers(min_value=1, max_value=500),
)
def test_the_sandbox_runs_the_stacks_rate_and_arrival_process(rate: int, arrival: str, rps: int, users: int) -> None:
    """The sandbox's Locust gets the stack's locustRate and locustArrival, as the cluster's ConfigMap does."""
    from triton_gke.sandbox.components import LoadSettings, LocustLoad

    triton = SimpleNamespace(http_url="127.0.0.1:18000", grpc_url="127.0.0.1:18001")
    settings = LoadSettings("original", "http", "fp32", rps, users, 5, rate=rate, arrival=arrival)
    parsed = LOAD_SETTINGS(LocustLoad(settings, triton, Path("/nonexistent")).environment())
    assert (parsed.arrival, parsed.rps) == (arrival, rps)
    assert parsed.rate == (rate if rate else LOAD_SETTINGS({}).rate)
    assert arrival in settings.describe() and (f"{rate} req/s in all" in settings.describe()) == bool(rate)
