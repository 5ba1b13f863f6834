"""The checks of TritonOnClusterArgs: one problem line per field, run before any child is declared.

Each check returns None (fine) or "FIELD: what is wrong; what is expected"; k8s/on_cluster.py check_args turns the
first one into an ArgsError naming the component. A pulumi Output is accepted where the field is an Input (the
cluster or the cloud checks it later) and refused where the component needs the value at plan time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
import yaml

from triton_gke.contracts import workloads
from triton_gke.contracts.gke_limits import MAX_TRITON_REPLICAS
from triton_gke.contracts.naming import DNS_LABEL, DNS_LABEL_MAX, bucket_name_problem, object_prefix_problem
from triton_gke.contracts.triton import INFERENCE_KEY_SLOTS
from triton_gke.k8s.common import TAINT_EFFECTS
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.recipes import driver_needed, image_runs_on_driver
from triton_gke.model_repo.settings import FIRST_CUDA13_RELEASE, image_release
from triton_gke.observability.settings import MonitoringError, validate_label_value
from triton_gke.settings.serving import MAX_QUEUE_TIME_TARGET_MS, MAX_STARTUP_MINUTES

# The component's name becomes the zonal NEGs' names `<name>-http`/`<name>-grpc` (k8s/triton.py neg_names), the
# default `region` label of its metrics and its children's names. A NEG is a Compute Engine resource: "[a-z]([-a-z0-9]*
# [a-z0-9])?", 1-63 characters (RFC 1035, https://cloud.google.com/compute/docs/naming-resources#resource-name-format),
# which is also a Kubernetes DNS-1123 label (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
# #dns-label-names). 63 less the longest suffix, "-grpc".
COMPONENT_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_NAME_LENGTH = 63 - len("-grpc")

# Bucket names: contracts/naming.py bucket_name_problem, the one rule the sync asks too; the prefix's characters and
# parts: object_prefix_problem there, also the sync's. Object names are at most 1024 bytes of UTF-8
# (https://cloud.google.com/storage/docs/naming-objects).
MAX_OBJECT_NAME_BYTES = 1024
GS = "gs://"

# Label keys and values (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
# #syntax-and-character-set): a key is an optional DNS-subdomain prefix (at most 253 characters) and "/", then a name
# of at most 63 characters "beginning and ending with an alphanumeric character ([a-z0-9A-Z]) with dashes (-),
# underscores (_), dots (.), and alphanumerics between"; a value is empty or such a name. A taint key follows the
# same syntax (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/: "The key must begin
# with a letter or number, and may contain letters, numbers, hyphens, dots, and underscores ... Optionally, the key
# can begin with a DNS subdomain prefix and a single /"; the API server validates it as a qualified name).
LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

# A Kubernetes service account's name is a DNS subdomain (https://kubernetes.io/docs/concepts/security/
# service-accounts/); the component takes the stricter DNS-1123 label (contracts/naming.py DNS_LABEL, at most 63), the
# form the stack's own names take (policy/principals.py triton_service_account) and a Workload Identity principal
# PROJECT.svc.id.goog[NAMESPACE/KSA] spells without dots.
KSA_NAME_MAX = DNS_LABEL_MAX

# T4 machine shapes carry 1, 2 or 4 GPUs (https://cloud.google.com/compute/docs/gpus#t4-gpus, "NVIDIA T4 GPUs";
# settings/cluster.py T4_LIMITS), and a pod takes all of its node's.
GPUS_PER_POD = (1, 2, 4)

# A Google service account's email: ACCOUNT@PROJECT.iam.gserviceaccount.com for user-managed accounts (ACCOUNT 6-30
# characters, lowercase letters, digits, dashes), or a Google-managed one under *.gserviceaccount.com, e.g.
# PROJECT_NUMBER-compute@developer.gserviceaccount.com (https://cloud.google.com/iam/docs/service-account-types).
# GKE's Workload Identity annotation `iam.gke.io/gcp-service-account` takes one of these
# (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity).
SERVICE_ACCOUNT = re.compile(
    r"[a-z0-9][a-z0-9-]{0,61}[a-z0-9]@[a-z0-9]([a-z0-9.:-]{0,251}[a-z0-9])?\.gserviceaccount\.com"
)

# Secrets: NIST SP 800-63B-4 section 3.1.1.2 requires passwords used as a single factor to be at least 15 characters
# (https://pages.nist.gov/800-63-4/sp800-63b.html#passwordver). The admin key alone unlocks Triton's admin APIs and
# the Grafana password alone Grafana's admin account, so both are single factors; the generated ones have 40.
MIN_SECRET_LENGTH = 15
MAX_SECRET_LENGTH = 256
# The admin key is sent as an HTTP header value and is spliced into tritonserver's
# `--http-restricted-api=API[,API]:HEADER=KEY` (k8s/triton.py triton_server_args), so it keeps to characters that
# neither syntax reads: letters, digits and - . _ ~ + / (RFC 9110 section 5.5 forbids CR, LF and NUL in a field
# value; ',' ':' '=' are the option's separators).
ADMIN_KEY = re.compile(r"[A-Za-z0-9._~+/-]+")

# One pod per GPU node: at most as many as a cluster holds nodes (contracts/gke_limits.py, the stack's bound too).
LIMITS = {
    "min_replicas": (1, MAX_TRITON_REPLICAS),
    "max_replicas": (1, MAX_TRITON_REPLICAS),
    "startup_minutes": (1, MAX_STARTUP_MINUTES),  # the stack's tritonStartupMinutes bound, from its one home
    "queue_time_target_us": (1, MAX_QUEUE_TIME_TARGET_MS * 1000),  # the stack's autoscaleQueueTimeMs bound
}
WHOLE_NUMBERS = (*LIMITS, "gpus_per_pod")
FLAGS = ("autoscaling", "monitoring", "load_test", "container_native_lb", "inference_auth")
# The inference keys' fields, by slot (contracts/triton.py INFERENCE_KEY_SLOTS).
INFERENCE_KEY_FIELDS = {slot: f"inference_key_{slot}" for slot in INFERENCE_KEY_SLOTS}

Problem = str | None


def name_problem(name: Any) -> Problem:
    if isinstance(name, str) and COMPONENT_NAME.fullmatch(name) and len(name) <= MAX_NAME_LENGTH:
        return None
    return (
        f"name: {name!r} is not valid; expected a DNS label for the NEG and resource names derived from it "
        f"(lowercase letters, digits and -, starting with a letter, at most {MAX_NAME_LENGTH} characters)"
    )


def _must_be_plain(key: str, value: Any, kind: str) -> Problem:
    return f"{key}: {kind} must be given as a plain value, not a pulumi Output (it is needed at plan time)"


def repository_problem(value: Any) -> Problem:
    key = "model_repository"
    if value is None:
        return f"{key}: required; expected gs://BUCKET/PREFIX"
    if isinstance(value, pulumi.Output):
        return None
    if not isinstance(value, str):
        return f"{key}: expected text, got {value!r}"
    if not value.startswith(GS):
        return f"{key}: {value!r} is not a gs://BUCKET/PREFIX URL"
    bucket, _, path = value[len(GS) :].partition("/")
    why = bucket_name_problem(bucket) or _object_path_problem(path)
    return f"{key}: {value!r} is not a gs://BUCKET/PREFIX URL: {why}" if why else None


def _object_path_problem(path: str) -> Problem:
    if len(path.encode()) > MAX_OBJECT_NAME_BYTES:
        return f"an object name has at most {MAX_OBJECT_NAME_BYTES} bytes"
    prefix = path.rstrip("/")
    why = object_prefix_problem(prefix) if prefix else None  # the one prefix rule, which the sync asks too
    return f"the prefix takes {why}" if why else None


def whole_number_problem(key: str, value: Any, a: Mapping[str, Any]) -> Problem:
    if isinstance(value, pulumi.Output):
        return f"{key}: must be a plain number, not a pulumi Output (it sizes the rollout and the HPA at plan time)"
    if key == "gpus_per_pod":
        if isinstance(value, bool) or value not in GPUS_PER_POD:
            return f"{key}: {value!r} is not valid; expected 1, 2 or 4 (the GPUs of one T4 node)"
        return None
    low, high = LIMITS[key]
    if key == "max_replicas" and is_int(a.get("min_replicas")):
        low = max(low, a["min_replicas"])
    if not is_int(value) or not low <= value <= high:
        return f"{key}: {value!r} is not valid; expected a whole number from {low} to {high}"
    return None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def flag_problem(key: str, value: Any, a: Mapping[str, Any], serves_metrics: bool) -> Problem:
    if isinstance(value, pulumi.Output):
        return f"{key}: must be a plain true or false, not a pulumi Output (it decides which resources exist)"
    if not isinstance(value, bool):
        return f"{key}: {value!r} is not valid; expected true or false"
    # An HPA on a metric nobody serves never scales (FailedGetPodsMetric): the metric comes from monitoring's adapter.
    if key == "autoscaling" and value and a.get("monitoring") is not True:
        return "autoscaling: needs monitoring: true (its adapter serves the HPA's queue-time metric)"
    if key == "autoscaling" and value and not serves_metrics:
        # Operator mode (k8s/autoscaling.py serves_custom_metrics) makes no adapter: an HPA would never scale.
        return "autoscaling: needs the builtin monitoring mode (in operator mode no adapter serves the HPA's metric)"
    # Prometheus reads pods in Triton's, Locust's and the exporter's namespaces (k8s/monitoring/prometheus.py
    # POD_SELECTORS): its Roles need the Locust namespace to exist.
    if key == "monitoring" and value and a.get("load_test") is not True:
        return "monitoring: needs load_test: true (Prometheus also scrapes Locust's namespace)"
    return None


def image_tag_problem(value: Any, driver_branch: int | None) -> Problem:
    """The one rule of a Triton tag (model_repo/settings.py image_release: a released YY.MM-py3 server image, the
    rule the settings layer applies to tritonImageTag), and a CUDA 13 image only where the nodes' driver branch is
    known to run it (model_repo/recipes.py image_runs_on_driver, the toolchain table's rule)."""
    if isinstance(value, pulumi.Output):
        return _must_be_plain("image_tag", value, "the Triton image tag")
    try:
        release = image_release(value)
    except ModelRepoError as err:
        return f"image_tag: {err.reason}"  # the rule's reason under this component's own field name
    if release < FIRST_CUDA13_RELEASE or (driver_branch is not None and image_runs_on_driver(release, driver_branch)):
        return None
    known = "its nodes' driver is unknown here" if driver_branch is None else f"its nodes run R{driver_branch}"
    return (
        f"image_tag: {value!r} is a CUDA 13 image (25.08 and later), which needs driver {driver_needed(release)} "
        f"(infra/data/triton_toolchain.csv), and {known}: use 25.06-py3 (CUDA 12)"
    )


def selector_problem(value: Any, key: str = "gpu_node_selector", *, may_be_empty: bool = False) -> Problem:
    """A nodeSelector: a map of label key to label value; the GPU one non-empty (it picks the GPU nodes), the CPU
    one may be empty (no selector: any node) and plain (it places several components at plan time)."""
    if isinstance(value, pulumi.Output):
        return _must_be_plain(key, value, "the CPU workloads' node selector") if may_be_empty else None
    if not isinstance(value, Mapping) or not (value or may_be_empty):
        kind = "a map" if may_be_empty else "a non-empty map"
        return f"{key}: {value!r} is not valid; expected {kind} of label to value"
    for label, text in value.items():
        if not is_label_key(label):
            return f"{key}: {label!r} is not a Kubernetes label key ([PREFIX/]NAME, NAME at most 63)"
        if not (isinstance(text, pulumi.Output) or is_label_value(text)):
            return f"{key}: {label}: {text!r} is not a Kubernetes label value (at most 63, [A-Za-z0-9_.-])"
    return None


# A Toleration (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/): "The default value for
# operator is Equal"; with Exists "no value should be specified"; "If the key is empty, then the operator must be
# Exists, which matches all keys and values"; "An empty effect matches all effects with key key1". The key follows
# the label-key syntax (above), a value the label-value syntax, the effect one of TAINT_EFFECTS.
TOLERATION_FIELDS = ("key", "operator", "value", "effect")
TOLERATION_OPERATORS = ("Equal", "Exists")


def tolerations_problem(value: Any, key: str = "cpu_tolerations") -> Problem:
    if isinstance(value, pulumi.Output):
        return _must_be_plain(key, value, "the tolerations")
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        return f"{key}: {value!r} is not valid; expected a list of tolerations (key, operator, value, effect)"
    for number, toleration in enumerate(value, start=1):
        why = _toleration_problem(toleration)
        if why:
            return f"{key}: toleration {number} {toleration!r}: {why}"
    return None


def _toleration_problem(toleration: Any) -> Problem:
    if not isinstance(toleration, Mapping):
        return "expected a map with key, operator, value, effect"
    unknown = next((f for f in toleration if f not in TOLERATION_FIELDS), None)
    if unknown is not None:
        return f"unknown field {unknown!r}; expected {', '.join(TOLERATION_FIELDS)}"
    if not all(isinstance(text, str) for text in toleration.values()):
        return "every field is text"
    taint_key, operator = toleration.get("key", ""), toleration.get("operator", "") or "Equal"
    taint_value, effect = toleration.get("value", ""), toleration.get("effect", "")
    if operator not in TOLERATION_OPERATORS:
        return f"operator {operator!r} is not one of {', '.join(TOLERATION_OPERATORS)}"
    if taint_key and not is_label_key(taint_key):
        return f"key {taint_key!r} is not a Kubernetes taint key ([PREFIX/]NAME, NAME at most 63)"
    if not taint_key and operator != "Exists":
        return "an empty key needs operator Exists (it then tolerates every taint)"
    if operator == "Exists" and taint_value:
        return "operator Exists takes no value"
    if not is_label_value(taint_value):
        return f"value {taint_value!r} is not a Kubernetes label value (at most 63, [A-Za-z0-9_.-])"
    if effect and effect not in TAINT_EFFECTS:
        return f"effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)} (or empty: every effect)"
    return None


def is_label_key(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and not (DNS_SUBDOMAIN.fullmatch(prefix) and len(prefix) <= 253):
        return False
    return bool(LABEL_NAME.fullmatch(name))


def is_label_value(value: Any) -> bool:
    return isinstance(value, str) and (value == "" or bool(LABEL_NAME.fullmatch(value)))


def toleration_key_problem(value: Any) -> Problem:
    if value is None or isinstance(value, pulumi.Output) or is_label_key(value):
        return None
    return f"gpu_toleration_key: {value!r} is not a Kubernetes taint key ([PREFIX/]NAME, NAME at most 63)"


def kubeconfig_problem(value: Any) -> Problem:
    if value is None or isinstance(value, pulumi.Output):
        return None
    if not isinstance(value, str) or not value.strip():
        return f"kubeconfig: {value!r} is not valid; expected the text of a kubeconfig (YAML)"
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = None
    # A kubeconfig is a YAML mapping (apiVersion, kind: Config, clusters, ...):
    # https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
    if not isinstance(parsed, Mapping):
        return "kubeconfig: not a kubeconfig; expected YAML text with apiVersion, clusters, contexts, users"
    return None


def service_account_problem(value: Any) -> Problem:
    if value is None or isinstance(value, pulumi.Output):
        return None
    if isinstance(value, str) and SERVICE_ACCOUNT.fullmatch(value):
        return None
    return (
        f"model_reader_service_account: {value!r} is not a service account email (NAME@PROJECT.iam.gserviceaccount.com)"
    )


def service_account_name_problem(value: Any) -> Problem:
    key = "service_account_name"
    if isinstance(value, pulumi.Output):
        return _must_be_plain(key, value, "the Kubernetes service account's name")
    if value == "default":
        # Kubernetes makes a `default` account in every namespace (its token controller), so the component would
        # fight over it, and every pod of the namespace naming no account would run as the reader's principal
        # (https://kubernetes.io/docs/concepts/security/service-accounts/#default-service-accounts).
        return f"{key}: 'default' is the service account Kubernetes makes in every namespace; name one of Triton's own"
    if isinstance(value, str) and DNS_LABEL.fullmatch(value) and len(value) <= KSA_NAME_MAX:
        return None
    return (
        f"{key}: {value!r} is not valid; expected a DNS-1123 label (lowercase letters, digits and -, starting and "
        f"ending with a letter or digit, at most {KSA_NAME_MAX} characters)"
    )


def admin_key_problem(value: Any, key: str = "admin_key") -> Problem:
    """The admin key, and the inference keys (`key` names the field): the same header value in the same flag syntax.
    An Output passes here; its value is checked once known (known_key_problem, k8s/on_cluster.py checked_key)."""
    if value is None or isinstance(value, pulumi.Output):
        return None
    return known_key_problem(value, key)


def known_key_problem(value: Any, key: str) -> Problem:
    """A key's value as tritonserver gets it: anything but a string of the rule is refused, None included (an Output
    that resolved to nothing would start Triton without its key). The line never repeats the (secret) value."""
    if isinstance(value, str) and MIN_SECRET_LENGTH <= len(value) <= MAX_SECRET_LENGTH and ADMIN_KEY.fullmatch(value):
        return None
    return (
        f"{key}: not valid; expected {MIN_SECRET_LENGTH}-{MAX_SECRET_LENGTH} letters, digits or - . _ ~ + / "
        "(leave it out for a generated one)"
    )


def inference_key_problem(key: str, value: Any, a: Mapping[str, Any]) -> Problem:
    if value is not None and a.get("inference_auth") is False:
        return f"{key}: only with inference_auth: true (without it inference takes no key)"
    return admin_key_problem(value, key)


def inference_key_slot_problem(value: Any) -> Problem:
    if isinstance(value, pulumi.Output):
        return _must_be_plain("inference_key_slot", value, "the header Triton checks")
    if value in INFERENCE_KEY_SLOTS:
        return None
    return f"inference_key_slot: {value!r} is not valid; expected one of {', '.join(INFERENCE_KEY_SLOTS)}"


def grafana_password_problem(value: Any, a: Mapping[str, Any]) -> Problem:
    if value is None:
        return None
    if a.get("monitoring") is not True:
        return "grafana_admin_password: only with monitoring: true (without it there is no Grafana)"
    if isinstance(value, pulumi.Output):
        return None
    # An empty password leaves Grafana's own default, admin/admin: "admin_password: The password of the default
    # Grafana Admin. Set once on first-run. Default is admin."
    # (https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#admin_password; sign-in page:
    # https://grafana.com/docs/grafana/latest/setup-grafana/sign-in-to-grafana/).
    printable = isinstance(value, str) and value.isprintable() and value.strip() == value
    if printable and MIN_SECRET_LENGTH <= len(value) <= MAX_SECRET_LENGTH:
        return None
    return (
        f"grafana_admin_password: not valid; expected {MIN_SECRET_LENGTH}-{MAX_SECRET_LENGTH} printable characters "
        "without surrounding spaces (leave it out for a generated one)"
    )


def namespaces_problem(value: Any) -> Problem:
    if isinstance(value, pulumi.Output):
        return _must_be_plain("namespaces", value, "the namespaces' names")
    if isinstance(value, Mapping) and any(isinstance(v, pulumi.Output) for v in value.values()):
        return _must_be_plain("namespaces", value, "the namespaces' names")
    problem = workloads.namespaces_problem(value)
    return f"namespaces: {problem}" if problem else None


def adapter_name_problem(value: Any, a: Mapping[str, Any]) -> Problem:
    if value == workloads.ADAPTER_NAME:
        return None
    if a.get("autoscaling") is not True:
        return "adapter_name: only with autoscaling: true (it names prometheus-adapter's RBAC objects)"
    if isinstance(value, pulumi.Output):
        return _must_be_plain("adapter_name", value, "the adapter's RBAC names")
    if isinstance(value, str) and workloads.adapter_name_ok(value):
        return None
    return (
        f"adapter_name: {value!r} is not valid; expected a DNS-1123 label (lowercase letters, digits and -, starting"
        f" and ending with a letter or digit, at most {workloads.ADAPTER_NAME_MAX} characters)"
    )


def region_problem(value: Any, a: Mapping[str, Any]) -> Problem:
    if value is None:
        return None
    if a.get("monitoring") is not True:
        return "region: only with monitoring: true (it labels the metrics and alerts)"
    if isinstance(value, pulumi.Output):
        return _must_be_plain("region", value, "the metrics' region label")
    try:
        validate_label_value("region", value)
    except MonitoringError as err:
        return f"region: {err.reason}"
    return None


Check = Callable[[Any, Mapping[str, Any]], Problem]


def field_checks(serves_metrics: bool, driver_branch: int | None) -> dict[str, Check]:
    """Field -> its check, given the field's value and all the Args (with defaults)."""
    checks: dict[str, Check] = {
        "model_repository": lambda v, a: repository_problem(v),
        "kubeconfig": lambda v, a: kubeconfig_problem(v),
        "gpu_node_selector": lambda v, a: None if v is None else selector_problem(v),
        "gpu_toleration_key": lambda v, a: toleration_key_problem(v),
        "cpu_node_selector": lambda v, a: selector_problem(v, "cpu_node_selector", may_be_empty=True),
        "cpu_tolerations": lambda v, a: tolerations_problem(v),
        "image_tag": lambda v, a: image_tag_problem(v, driver_branch),
        "model_reader_service_account": lambda v, a: service_account_problem(v),
        "service_account_name": lambda v, a: service_account_name_problem(v),
        "admin_key": lambda v, a: admin_key_problem(v),
        "inference_key_slot": lambda v, a: inference_key_slot_problem(v),
        "grafana_admin_password": grafana_password_problem,
        "region": region_problem,
        "namespaces": lambda v, a: namespaces_problem(v),
        "adapter_name": adapter_name_problem,
    }
    for key in WHOLE_NUMBERS:
        checks[key] = lambda v, a, key=key: whole_number_problem(key, v, a)
    for key in FLAGS:
        checks[key] = lambda v, a, key=key: flag_problem(key, v, a, serves_metrics)
    for key in INFERENCE_KEY_FIELDS.values():
        checks[key] = lambda v, a, key=key: inference_key_problem(key, v, a)
    return checks
