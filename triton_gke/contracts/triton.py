"""What every side that talks to Triton must agree on: its command line, ports, health paths, TensorRT cache path.

The Deployment and Services (k8s/triton.py), the global load balancer's health check, firewall and routes
(infra/global_lb.py), the local sandbox and bench (sandbox/, bench/) and the model repository's config.pbtxt
(model_repo/) read these: the local tools run the same tritonserver command line as the cluster, without importing
the Pulumi components.
The locustfile (loadtest/locustfile.py) ships alone in a ConfigMap and keeps its own copy of the inference ports;
tests/unit/contracts/test_contracts.py checks that copy against PORTS.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType

# tritonserver's default ports, which the GKE command line also states (--http-port, --grpc-port, --metrics-port):
# HTTP 8000, gRPC 8001, Prometheus metrics 8002
# (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html,
# https://triton-inference-server.github.io/pytriton/latest/reference/triton_config/ http_port "Default is 8000").
# The keys are also the container port names the Services and probes refer to.
PORTS: Mapping[str, int] = MappingProxyType({"http": 8000, "grpc": 8001, "metrics": 8002})
# The ports clients infer on (the load balancer's backends and firewall, the locustfile's defaults).
INFERENCE_PORTS: Mapping[str, int] = MappingProxyType({name: PORTS[name] for name in ("http", "grpc")})

# KServe v2 (Open Inference Protocol) HTTP paths, which Triton serves
# (https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol): server metadata, liveness,
# readiness. With --strict-readiness=true, ready means every model loaded.
SERVER_METADATA_PATH = "/v2"
LIVE_PATH = "/v2/health/live"
READY_PATH = "/v2/health/ready"
HEALTH_PATHS: Mapping[str, str] = MappingProxyType({"live": LIVE_PATH, "ready": READY_PATH})

# Where ONNX Runtime's TensorRT execution provider keeps built engines and timing caches inside the Triton container:
# config.pbtxt names it (trt_engine_cache_path, trt_timing_cache_path,
# https://github.com/triton-inference-server/onnxruntime_backend#onnx-runtime-with-tensorrt-optimization) and the pod
# mounts a volume there, so engines are built once per pod, not once per model load.
TRT_CACHE_DIR = "/trt-cache"

ADMIN_KEY_HEADER = "triton-admin-key"
ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
RESTRICTED_APIS = ("model-repository", "shared-memory", "logging", "trace")

# Inference needs a key: Triton's own restricted `inference` API group, which covers HTTP POST
# /v2/models/NAME[/versions/V]/infer (and /generate) and gRPC ModelInfer and ModelStreamInfer
# (triton-inference-server/server v2.51.0 src/http_server.cc HandleInfer, HandleGenerate:
# RETURN_AND_RESPOND_IF_RESTRICTED(req, RestrictedCategory::INFERENCE, ...); src/grpc/grpc_server.cc hands
# restricted_protocols_.Get(INFERENCE) to ModelInferHandler and ModelStreamInferHandler).
# What each checks: HTTP looks the header up (evhtp_kv_find) and answers 403 "This API is restricted, expecting header
# 'NAME'" unless its value equals the key (http_server.cc RespondIfRestricted); gRPC looks up the client metadata
# "triton-grpc-protocol-" + the configured name (command_line_parser.cc passes grpc_server.h
# kRestrictedProtocolHeaderTemplate as the prefix) and fails the call with UNAVAILABLE unless its value equals the key
# (infer_handler.h ExecutePrecondition; stream_infer_handler.cc cancels the stream). The health group stays open: the
# load balancer's health check and the kubelet's probes read READY_PATH without a key.
# One key per group: RestrictedFeatures keeps one (header, value) per category (src/restricted_features.h Insert), and
# a category named in two groups stops tritonserver ("restricted api 'inference' can not be specified in multiple
# config groups", command_line_parser.cc ParseRestrictedFeatureOption). So Triton accepts one key at a time, and a key
# change uses two slots with two header names: a client sends both while the pods roll from one slot to the other
# (docs/security.md, "Changing the inference key").
INFERENCE_API = "inference"
INFERENCE_KEY_ENV = "TRITON_INFERENCE_KEY"
INFERENCE_KEY_SLOTS = ("a", "b")
# HTTP takes the name as given, gRPC prefixes it: giving HTTP the prefixed name makes one header name serve both.
GRPC_RESTRICTED_PREFIX = "triton-grpc-protocol-"
_INFERENCE_KEY_NAME = "inference-key-"


def inference_key_header(slot: str) -> str:
    """The header (HTTP) and metadata key (gRPC) a client sends `slot`'s key in. Lowercase: gRPC runs on HTTP/2, where
    "header field names MUST be converted to lowercase prior to their encoding" (RFC 7540 section 8.1.2,
    https://datatracker.ietf.org/doc/html/rfc7540#section-8.1.2), and Triton compares the metadata key as it came."""
    if slot not in INFERENCE_KEY_SLOTS:
        raise ValueError(f"inference key slot {slot!r}: expected one of {', '.join(INFERENCE_KEY_SLOTS)}")
    return f"{GRPC_RESTRICTED_PREFIX}{_INFERENCE_KEY_NAME}{slot}"


def other_slot(slot: str) -> str:
    """The slot a key change moves to (and the one whose key is not checked now)."""
    inference_key_header(slot)  # refuses an unknown slot
    return next(s for s in INFERENCE_KEY_SLOTS if s != slot)


def inference_restrictions(key: str, slot: str) -> list[str]:
    """tritonserver flags that make the inference group answer only requests carrying `key` in `slot`'s header."""
    header = inference_key_header(slot)
    grpc_name = header.removeprefix(GRPC_RESTRICTED_PREFIX)  # Triton adds the prefix back
    return [
        f"--http-restricted-api={INFERENCE_API}:{header}={key}",
        f"--grpc-restricted-protocol={INFERENCE_API}:{grpc_name}={key}",
    ]


# Quantiles of Triton's latency summaries: p95 is the SLO, the others the dashboards.
SUMMARY_QUANTILES = "0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001"
# tritonserver --exit-timeout-secs by default (the stack's tritonExitTimeoutSeconds, settings/lifecycle.py).
DEFAULT_EXIT_TIMEOUT_S = 3

# One GPU node holds exactly one Triton pod, so a surge pod needs a spare GPU node that dev (gpuMaxNodes 1) and a
# fully scaled pool never have: the default (maxSurge 25% rounded up, maxUnavailable 25% rounded down, so 1 and 0
# for up to 3 pods) leaves the surge pod Pending and the rollout stuck. Replace one pod at a time instead: the
# controller first stops one old pod, then starts its replacement on the freed node
# (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#rolling-update-deployment). The PDB
# allows the same one pod down for node drains. k8s/triton.py ROLLING_ONE_AT_A_TIME; sandbox/rollout.py replays it.
ROLLING_MAX_SURGE = 0
ROLLING_MAX_UNAVAILABLE = 1


# ---------------------------------------------------------------- the command line

# The flags tritonserver accumulates when given more than once; every other flag keeps the last value given
# (triton-inference-server/server v2.51.0 src/command_line_parser.cc TritonParser::Parse: these cases insert into a set
# or map or push_back onto a list, e.g. OPTION_BACKEND_CONFIG backend_config_settings_.push_back, OPTION_STARTUP_MODEL
# startup_models_.insert, OPTION_METRICS_CONFIG metrics_config_settings_.push_back, OPTION_HTTP_RESTRICTED_API and
# OPTION_GRPC_RESTRICTED_PROTOCOL ParseRestrictedFeatureOption into a map of groups; the others assign, e.g.
# OPTION_EXIT_TIMEOUT_SECS exit_timeout_secs_ = ..., OPTION_MODEL_CONTROL_MODE control_mode_ = ...).
REPEATABLE_FLAGS = frozenset(
    {
        "model-repository",
        "load-model",
        "http-restricted-api",
        "grpc-restricted-protocol",
        "metrics-config",
        "trace-config",
        "backend-config",
        "host-policy",
        "cache-config",
        "rate-limit-resource",
        "cuda-memory-pool-byte-size",
        "cuda-virtual-address-size",
        "model-load-gpu-limit",
    }
)

# A flag's value in an override: one value, the values of a repeatable flag (replacing all it had), or None to drop it.
FlagValue = str | Sequence[str] | None


class ServerFlags(Mapping[str, "str | tuple[str, ...]"]):
    """tritonserver's flags as an ordered mapping: flag name (no leading --) -> its value, or for a repeatable flag
    (REPEATABLE_FLAGS) the tuple of its values. Each value keeps its own place in the command line, so the GKE line's
    alternating --http-restricted-api / --grpc-restricted-protocol stay where they were written.

    A single-valued flag given twice is refused: tritonserver would silently keep the last one, and a reader of the
    command line the first."""

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        self._entries = tuple(entries)
        seen = [flag for flag, _ in self._entries]
        twice = sorted({f for f in seen if f not in REPEATABLE_FLAGS and seen.count(f) > 1})
        if twice:
            raise ValueError(f"tritonserver flag(s) given twice, keeping only the last value: {', '.join(twice)}")

    def __getitem__(self, flag: str) -> str | tuple[str, ...]:
        values = tuple(value for f, value in self._entries if f == flag)
        if not values:
            raise KeyError(flag)
        return values if flag in REPEATABLE_FLAGS else values[0]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(flag for flag, _ in self._entries))

    def __len__(self) -> int:
        return len(set(flag for flag, _ in self._entries))

    def __repr__(self) -> str:
        return f"ServerFlags({dict(self)!r})"

    @property
    def entries(self) -> tuple[tuple[str, str], ...]:
        """(flag, value) in command-line order, one per argument."""
        return self._entries

    def replaced(self, overrides: Mapping[str, FlagValue]) -> ServerFlags:
        """These flags with each flag of `overrides` replaced, as a dict's update does: its new value(s) where it was
        (its first place), flags new here at the end in the overrides' order (a ServerFlags' own argument order); a
        repeatable flag's values all replaced by those given; None drops the flag."""
        given = _entries(overrides)
        here = {flag for flag, _ in self._entries}
        entries: list[tuple[str, str]] = []
        for flag, value in self._entries:
            if flag not in overrides:
                entries.append((flag, value))
            elif not any(f == flag for f, _ in entries):
                entries += [e for e in given if e[0] == flag]
        return ServerFlags([*entries, *(e for e in given if e[0] not in here)])

    def argv(self, program: str = "tritonserver") -> list[str]:
        return [program, *(f"--{flag}={value}" for flag, value in self._entries)]


def _entries(flags: Mapping[str, FlagValue]) -> tuple[tuple[str, str], ...]:
    if isinstance(flags, ServerFlags):
        return flags.entries
    return tuple((flag, v) for flag, value in flags.items() for v in _values(flag, value))


def _values(flag: str, value: FlagValue) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if flag not in REPEATABLE_FLAGS and len(value) != 1:
        raise ValueError(f"tritonserver flag {flag} takes one value (it keeps the last), got {list(value)}")
    return tuple(value)


def triton_command(program: str, *layers: Mapping[str, FlagValue]) -> list[str]:
    """THE tritonserver command line, for every place that starts one (the cluster's Deployment, the sandbox and its
    rollout, the bench, Model Analyzer through model_analyzer_flags, the tests' servers): the layers' flags in order,
    each layer's value of a flag replacing the earlier layers' (never a second copy of a single-valued flag)."""
    return compose_flags(*layers).argv(program)


def compose_flags(*layers: Mapping[str, FlagValue]) -> ServerFlags:
    """The flags triton_command would write, as a mapping."""
    flags = ServerFlags()
    for layer in layers:
        flags = flags.replaced(layer)
    return flags


def cluster_flags(
    model_repository: str,
    gpu: bool = True,
    admin_key: str = f"$({ADMIN_KEY_ENV})",
    exit_timeout_s: int = DEFAULT_EXIT_TIMEOUT_S,
    model_config_name: str | None = None,
    inference_key: str | None = None,
    inference_key_slot: str = INFERENCE_KEY_SLOTS[0],
) -> ServerFlags:
    """tritonserver's flags on the cluster; local runs reuse them with a local repository and gpu=False.

    exit_timeout_s: --exit-timeout-secs, how long requests in flight may finish after SIGTERM (the lifecycle
    contract's exit_timeout_s, settings/lifecycle.py, default DEFAULT_EXIT_TIMEOUT_S; Triton's HTTP and gRPC front
    ends wait for them: triton-inference-server/server PRs #6986 and #7969).
    model_config_name: --model-config-name, for a region that holds its model versions (modelHoldRegions): Triton
    loads <model>/configs/NAME.pbtxt where it exists and config.pbtxt otherwise (triton-inference-server/core
    src/model_repository_manager.cc GetModelConfigFullPath); the sync writes those files (model_repo/sync.py --hold).
    inference_key: the key inference requests must carry in inference_key_header(inference_key_slot)
    (inference_restrictions); the cluster passes f"$({INFERENCE_KEY_ENV})", which Kubernetes expands from the pod's
    Secret-backed variable. None: inference open to any caller (inferenceAuth false).
    """
    restricted = f"{','.join(RESTRICTED_APIS)}:{ADMIN_KEY_HEADER}={admin_key}"
    inference = [] if inference_key is None else inference_restrictions(inference_key, inference_key_slot)
    args = [
        f"--model-repository={model_repository}",
        # Ready only when every model loaded; exit (and restart) rather than serve half a repository.
        "--strict-readiness=true",
        "--exit-on-error=true",
        # Load the repository once at start and ignore later changes (Triton's default, stated on purpose): a model
        # update reaches pods by a rolling restart (MODEL_DIGEST_ANNOTATION), so every pod serves one repository.
        # docs.nvidia.com/deeplearning/triton-inference-server/archives/triton-inference-server-2540/user-guide/docs/user_guide/model_management.html  # noqa: E501
        "--model-control-mode=none",
        f"--http-port={PORTS['http']}",
        f"--grpc-port={PORTS['grpc']}",
        "--allow-metrics=true",
        f"--allow-gpu-metrics={'true' if gpu else 'false'}",
        f"--metrics-port={PORTS['metrics']}",
        "--metrics-config=summary_latencies=true",
        f"--metrics-config=summary_quantiles={SUMMARY_QUANTILES}",
        f"--http-restricted-api={restricted}",
        f"--grpc-restricted-protocol={restricted}",
        *inference,
        f"--exit-timeout-secs={exit_timeout_s}",
        *([f"--model-config-name={model_config_name}"] if model_config_name else []),
    ]
    return parse_flags(args)


def parse_flags(args: Sequence[str]) -> ServerFlags:
    """--flag=value arguments (tritonserver's own spelling) as ServerFlags, in their order."""
    entries = []
    for arg in args:
        flag, equals, value = arg.partition("=")
        if not flag.startswith("--") or not equals:
            raise ValueError(f"not a --flag=value tritonserver argument: {arg!r}")
        entries.append((flag.removeprefix("--"), value))
    return ServerFlags(entries)


def triton_server_args(
    model_repository: str,
    gpu: bool = True,
    admin_key: str = f"$({ADMIN_KEY_ENV})",
    exit_timeout_s: int = DEFAULT_EXIT_TIMEOUT_S,
    model_config_name: str | None = None,
    inference_key: str | None = None,
    inference_key_slot: str = INFERENCE_KEY_SLOTS[0],
) -> list[str]:
    """The cluster's tritonserver command line: cluster_flags (which explains the arguments) through triton_command."""
    flags = cluster_flags(
        model_repository, gpu, admin_key, exit_timeout_s, model_config_name, inference_key, inference_key_slot
    )
    return triton_command("tritonserver", flags)
