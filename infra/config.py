"""Stack configuration: read once from pulumi.Config, validated, returned as frozen dataclasses.

Every error is a `ConfigError` (a `pulumi.RunError`, so `pulumi up` prints the one line without a
traceback) raised before any resource is declared. Types, defaults and the set of known keys come
from the schema in Pulumi.yaml, the one place where settings are declared.
"""

from __future__ import annotations

import base64
import difflib
import importlib.util
import inspect
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import config as runtime_config

from infra import catalogue
from infra.catalogue import CatalogueError, GpuCatalogue
from infra.stack_file import SECRET_PLACEHOLDER, StackFileError, read_stack_file
from model_repo.errors import ModelRepoError
from model_repo.settings import (
    REFERENCE_VARIANTS,
    UINT64_MAX,
    ModelRepoSettings,
    VariantSettings,
    image_release,
    runs_on_driver,
    validate_settings,
)
from monitoring.settings import MonitoringError, SloSettings, validate_duration, validate_slo
from policy import address_space

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROJECT_FILE = PROJECT_DIR / "Pulumi.yaml"

RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE")
DRIVER_VERSIONS = ("DEFAULT", "LATEST", "INSTALLATION_DISABLED")
# kubernetes-validate ships schemas for these minors; a cluster outside them cannot be checked.
KUBERNETES_MINORS = range(25, 38)
# T4 on N1: T4 count per VM -> (most vCPUs, most memory in GB) of the VM. Google's table "NVIDIA T4 GPUs" on
# "GPU machine types" (https://cloud.google.com/compute/docs/gpus#t4-gpus): 1 or 2 GPUs 1-48 vCPUs and 1-312 GB,
# 4 GPUs 1-96 vCPUs and 1-624 GB. (One T4 allows 48 vCPUs, not 24.)
T4_LIMITS = {1: (48, 312), 2: (48, 312), 4: (96, 624)}
# Kubernetes API counts (replicas, HPA min/maxReplicas, ports) are "integer (int32)", e.g.
# https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/deployment-v1/; the node and worker limits
# below are far lower. Triton's batch sizes and instance counts are int32 too (model_repo.settings.FIELD_MAXIMUM).
INT32_MAX = 2**31 - 1
# A Kubernetes quantity (HPA target averageValue) cannot exceed 2^63-1
# (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/).
QUANTITY_MAX = 2**63 - 1
# GKE limits (https://cloud.google.com/kubernetes-engine/quotas): 1,000 nodes per node pool per zone,
# 15,000 nodes per Standard cluster.
MAX_NODES_PER_POOL_ZONE = 1000
MAX_NODES_PER_CLUSTER = 15000
# Persistent Disk sizes, GB: pd-balanced (node boot disks and the standard-rwo class behind Prometheus' volume)
# from 10 GB to 64 TiB ("Persistent Disk" limits, https://cloud.google.com/compute/docs/disks/persistent-disks).
DISK_MIN_GB = 10
DISK_MAX_GB = 65536
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver"
MAX_LOCUST_WORKERS = 100
DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
GCP_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
# Longest startup budget accepted for one Triton pod (tritonStartupMinutes): 3 hours.
MAX_STARTUP_MINUTES = 180
# Cloud Armor throttle thresholds: 1 to 1,000,000 requests per interval
# (https://cloud.google.com/armor/docs/rate-limiting-overview).
MAX_RATE_LIMIT = 1_000_000


class ConfigError(pulumi.RunError):
    """One line naming the key, the bad value and what is allowed."""


@dataclass(frozen=True)
class RegionSettings:
    name: str
    zones: tuple[str, ...]
    # Row of the region in infra/data/gcp_regions.csv: fixes its address ranges, so adding or
    # removing another region never renumbers this one.
    index: int


@dataclass(frozen=True)
class ClusterSettings:
    release_channel: str
    kubernetes_version: str
    deletion_protection: bool
    master_authorized_cidrs: tuple[str, ...]


@dataclass(frozen=True)
class CpuPoolSettings:
    machine_type: str
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True)
class GpuPoolSettings:
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    min_nodes: int
    max_nodes: int
    spot: bool
    disk_size_gb: int
    driver_version: str

    @property
    def gke_installs_driver(self) -> bool:
        return self.driver_version != "INSTALLATION_DISABLED"


@dataclass(frozen=True)
class ModelStoreSettings:
    location: str
    force_destroy: bool
    prefix: str


@dataclass(frozen=True)
class ServingSettings:
    image: str
    queue_time_target_us: int
    # tritonStartupMinutes: the one budget Triton's startup probe and Pulumi's waits derive from (k8s/triton.py).
    startup_minutes: int = 40


@dataclass(frozen=True)
class LoadTestSettings:
    workers: int
    model: str
    rps_per_user: int
    protocol: str
    payload: str


@dataclass(frozen=True)
class LoadBalancerSettings:
    enabled: bool
    domain: str
    max_rate_per_pod: int
    # Cloud Armor: requests per minute one client IP may send to each backend service, and the only sources
    # allowed (empty: any source).
    rate_limit_per_minute: int = 3000
    source_ranges: tuple[str, ...] = ()


@dataclass(frozen=True)
class MonitoringSettings:
    mode: str
    slo: SloSettings
    retention: str
    storage_gb: int


@dataclass(frozen=True)
class StackSettings:
    project: str
    stack: str
    regions: tuple[RegionSettings, ...]
    cluster: ClusterSettings
    cpu_pool: CpuPoolSettings
    gpu_pool: GpuPoolSettings
    gpu_catalogue: GpuCatalogue
    model_store: ModelStoreSettings
    model_repo: ModelRepoSettings
    serving: ServingSettings
    load_test: LoadTestSettings
    web_ui_source_ranges: tuple[str, ...]
    load_balancer: LoadBalancerSettings
    monitoring: MonitoringSettings


@dataclass(frozen=True)
class _Key:
    name: str
    type: str
    default: Any


@cache
def config_schema(project_file: Path = PROJECT_FILE) -> tuple[str, dict[str, _Key]]:
    """(project name, declared keys) from Pulumi.yaml."""
    project = yaml.safe_load(project_file.read_text())
    keys = {
        name: _Key(name, spec.get("type", "string"), spec.get("default"))
        for name, spec in (project.get("config") or {}).items()
        if ":" not in name
    }
    return project["name"], keys


class _Reader:
    """Typed access to the project's config keys, with one-line errors naming the key."""

    def __init__(self, project: str, keys: dict[str, _Key]) -> None:
        self.project = project
        self.keys = keys
        self.config = pulumi.Config(project)

    def full(self, key: str) -> str:
        return f"{self.project}:{key}"

    def fail(self, key: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{self.full(key)}: {_show(value)} is not valid; {allowed}")

    def raw(self, key: str) -> Any:
        spec = self.keys[key]
        text = self.config.get(key)
        if text is None:
            return spec.default
        if not isinstance(text, str):  # PULUMI_CONFIG (a JSON bag) may carry JSON values; the engine sends text
            text = json.dumps(text)
        if len(text) > MAX_VALUE_CHARS:
            raise self.fail(key, text, f"longer than {MAX_VALUE_CHARS:,} characters")
        if spec.type == "string":
            if text == "null":
                # What `pulumi up` passes for an empty value (`key:` or `~`) in a stack file (Pulumi's
                # sdk/go/common/resource/config/object.go marshals a nil value as JSON null); no setting means it.
                raise self.fail(key, text, "an empty value in the stack file; remove the line or quote the text")
            return text
        try:
            # NaN and Infinity are not JSON (Python's json takes them); a 4,300-digit number is a ValueError too.
            return json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise self.fail(key, text, f"expected {_a(spec.type)}") from None

    def string(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self.fail(key, value, "expected a string")
        return _text(self, key, value.strip())

    def path(self, key: str) -> str:
        """A file path, relative to the project: text the file system can take (a longer name is an OSError)."""
        value = self.string(key)
        parts = Path(value).parts
        if len(os.fsencode(value)) > PATH_MAX or any(len(os.fsencode(part)) > NAME_MAX for part in parts):
            raise self.fail(key, value, f"a path of at most {PATH_MAX} bytes, {NAME_MAX} per file or folder name")
        return value

    def integer(self, key: str, minimum: int = 0) -> int:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, value, "expected a whole number")
        if value < minimum:
            raise self.fail(key, value, f"expected a number >= {minimum}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self.fail(key, value, "expected true or false")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, value, "expected a list of strings")
        return tuple(_text(self, key, v.strip()) for v in value)

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        value = self.string(key)
        if value not in allowed:
            raise self.fail(key, value, f"allowed: {', '.join(allowed)}")
        return value


# Longest value a setting may hold: far above any real one (a CIDR list of a few hundred ranges).
MAX_VALUE_CHARS = 64 * 1024
SHOWN_CHARS = 200
# C0 and C1 control characters and Unicode's line and paragraph separators (YAML reads those as line breaks too).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Linux limits (limits.h): a longer path or name is ENAMETOOLONG, an OSError, when the file is looked at.
PATH_MAX = 4096
NAME_MAX = 255


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _text(reader: _Reader, key: str, value: str) -> str:
    """Text without control characters: no setting holds a newline, tab or NUL (a NUL even breaks file paths)."""
    if CONTROL.search(value):
        raise reader.fail(key, value, "control characters (newline, tab, NUL...) are not allowed")
    return value


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


def _a(type_name: str) -> str:
    return {"array": "a list (JSON array)", "integer": "a whole number", "boolean": "true or false"}.get(
        type_name, type_name
    )


def _set_keys() -> set[str]:
    try:
        from_env = runtime_config.get_config_env()
    except ValueError:  # PULUMI_CONFIG is a JSON object of full key -> value
        raise ConfigError("PULUMI_CONFIG: not valid JSON; expected an object of namespace:key to value") from None
    if not isinstance(from_env, dict):
        raise ConfigError("PULUMI_CONFIG: expected a JSON object of namespace:key to value")
    return set(runtime_config.CONFIG.get()) | set(from_env)


# Namespaces a key may legitimately use besides the project's: Pulumi's own (pulumi:tags, ...) and the providers
# this program uses (requirements.txt). Keys of any other namespace are left alone: packages and components define
# their own key spaces (https://www.pulumi.com/docs/iac/concepts/config/#configuration-keys), and ESC environments
# may hand a stack keys it does not read.
OTHER_NAMESPACES = ("pulumi", "gcp", "kubernetes", "random", "command")
# Key material in any of its usual wrappings, which belongs in `pulumi config set --secret`: PEM private keys
# (PKCS#1/#8, "OPENSSH PRIVATE KEY"), service-account key files (JSON with "private_key" / "type":
# "service_account", https://cloud.google.com/iam/docs/keys-create-delete), PuTTY private keys ("PuTTY-User-Key-File-2:"
# or "-3:", https://the.earth.li/~sgtatham/putty/0.78/htmldoc/AppendixC.html) and Google OAuth 2.0 access tokens
# ("usually start with ya29.", https://api-aomint.aodocs.com/authentication/access-apis-with-bearer-tokens).
PRIVATE_KEY = re.compile(
    r'-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----|"private_key"\s*:|"type"\s*:\s*"service_account"'
    r"|PuTTY-User-Key-File-\d+:|\bya29\.[A-Za-z0-9_.-]{20,}"
)
# A run of base64 (standard or URL-safe alphabet) long enough to wrap a key: `$(base64 -w0 sa.json)` is one.
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}")
BASE64_LAYERS = 2  # base64 of base64 is unwrapped too; a deeper wrapping is no accident
# Keys whose value is a credential by definition, whatever it looks like (pulumi-gcp "credentials": a service
# account key file or its path, "accessToken": an OAuth 2.0 token; the provider reads both from its config:
# https://www.pulumi.com/registry/packages/gcp/installation-configuration/ and
# https://registry.terraform.io/providers/hashicorp/google/latest/docs/guides/provider_reference#authentication).
SECRET_BY_DEFINITION = ("gcp:credentials", "gcp:accessToken")


def _holds_key_material(text: str, layers: int = BASE64_LAYERS) -> bool:
    if PRIVATE_KEY.search(text):
        return True
    if layers == 0:
        return False
    for run in BASE64_RUN.findall(text):
        try:
            decoded = base64.b64decode(run.replace("-", "+").replace("_", "/") + "=" * (-len(run) % 4))
        except ValueError:
            continue
        if _holds_key_material(decoded.decode("utf-8", "replace"), layers - 1):
            return True
    return False


def _refuse_plain_secrets(keys: list[str]) -> None:
    """Key material in plain config is refused without echoing it; secret values arrive marked secret.

    Under `pulumi up` the engine lists the keys set with --secret (pulumi.runtime's secret keys, also exported as
    PULUMI_CONFIG_SECRET_KEYS); the offline plan cannot decrypt and reads a `secure:` value as SECRET_PLACEHOLDER.
    """
    secret = set(runtime_config.get_config_secret_keys_env())
    for full_key in keys:
        if runtime_config.is_config_secret(full_key) or full_key in secret:
            continue
        value = runtime_config.get_config(full_key)
        text = value if isinstance(value, str) else json.dumps(value)
        if text == SECRET_PLACEHOLDER:
            continue
        if full_key in SECRET_BY_DEFINITION:
            raise ConfigError(
                f"{full_key}: a credential, so it must be set as a secret, not in plain text; remove it from the "
                f"stack file and store it encrypted: pulumi config set --secret {full_key} < FILE"
            )
        if _holds_key_material(text):
            raise ConfigError(
                f"{full_key}: holds a private key, service-account key or access token in plain text (perhaps "
                f"base64-wrapped); remove it from the stack file and store it encrypted: "
                f"pulumi config set --secret {full_key} < KEY_FILE"
            )


def _refuse_misspelt_namespace(reader: _Reader, full_key: str) -> None:
    """A namespace one typo away from the project's or a provider's (triton_gke:, tritongke:, gpc:) is refused."""
    namespace, _, key = full_key.partition(":")
    known = (reader.project, *OTHER_NAMESPACES)
    if namespace in known:
        return
    squashed = {re.sub(r"[-_.\s]", "", name.lower()): name for name in known}
    close = squashed.get(re.sub(r"[-_.\s]", "", namespace.lower()))
    close = close or next((name for name in known if sorted(name) == sorted(namespace)), None)
    close = close or next(iter(difflib.get_close_matches(namespace, known, n=1, cutoff=0.75)), None)
    if close is None:
        return
    name = key
    if close == reader.project and key not in reader.keys:
        name = next(iter(difflib.get_close_matches(key, reader.keys, n=1)), key)
    raise ConfigError(f"{full_key}: unknown namespace {namespace!r}; did you mean {close}:{name}?")


# Where the providers' documented settings are listed: the installed SDKs are generated from the same provider
# schema as those pages, so the key lists below match the provider version requirements.txt pins.
PROVIDER_DOCS = {
    "gcp": "https://www.pulumi.com/registry/packages/gcp/installation-configuration/",
    "kubernetes": "https://www.pulumi.com/registry/packages/kubernetes/installation-configuration/",
}


@cache
def provider_config_keys(namespace: str) -> frozenset[str]:
    """The config keys a provider reads: pulumi-gcp's config module, pulumi-kubernetes' Provider arguments."""
    if namespace == "gcp":
        spec = importlib.util.find_spec("pulumi_gcp")  # found without importing the whole SDK
        if spec is None or spec.origin is None:
            raise ConfigError("gcp: the pulumi_gcp package is not installed; run make setup (requirements.txt)")
        source = (Path(spec.origin).parent / "config" / "vars.py").read_text(encoding="utf-8")
        return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'\)", source))
    from pulumi_kubernetes.provider import ProviderArgs

    names = inspect.signature(ProviderArgs.__init__).parameters
    return frozenset(re.sub(r"_(\w)", lambda m: m.group(1).upper(), name) for name in names if name != "__self__")


def _refuse_provider_key(full_key: str) -> None:
    """gcp: and kubernetes: keys: only the provider's documented settings, and only those this program reads.

    Every Kubernetes resource here uses the explicit provider of its own GKE cluster (infra/cluster.py); only a
    default provider takes its settings from the stack's `kubernetes:` keys ("Default provider instances are
    created ... with inputs sourced from the stack's configuration values for the relevant provider package",
    https://github.com/pulumi/pulumi/blob/master/docs/architecture/providers/default.md), so any kubernetes: key
    would be silently ignored. gcp: keys configure the default gcp provider, which every Google resource uses.
    """
    namespace, _, name = full_key.partition(":")
    known = provider_config_keys(namespace)
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.7)
        hint = f"did you mean {namespace}:{close[0]}?" if close else f"its settings: {PROVIDER_DOCS[namespace]}"
        raise ConfigError(f"{full_key}: not a setting of the {namespace} provider; {hint}")
    if namespace == "kubernetes":
        raise ConfigError(
            f"{full_key}: never read: each Kubernetes resource uses the provider of its own GKE cluster "
            "(infra/cluster.py), which takes no kubernetes: stack settings; remove it"
        )


def _check_provider_location(regions: tuple[RegionSettings, ...]) -> None:
    """gcp:region and gcp:zone, the gcp provider's defaults for resources that name no region or zone.

    This program names one for every regional and zonal resource, from triton-gke:regions and triton-gke:zones
    (resources without one, like the VPC, firewalls and the global load balancer, are global), so the defaults
    place nothing. A default outside the stack's regions is still refused: it says the user meant to deploy
    elsewhere, which would silently not happen; one of the stack's own regions (or its zones) is harmless.
    """
    names = [r.name for r in regions]
    known = catalogue.load_regions()
    gcp = pulumi.Config("gcp")
    region, zone = gcp.get("region"), gcp.get("zone")
    if region is not None and region not in names:
        close = difflib.get_close_matches(region, names, n=1) or difflib.get_close_matches(region, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"gcp:region: {_show(region)} is not valid{hint}; this program deploys to triton-gke:regions "
            f"({', '.join(names)}): set the regions there, and gcp:region to one of them or not at all"
        )
    zones = [z for r in names for z in known[r]]
    if zone is not None and zone not in zones:
        close = difflib.get_close_matches(zone, zones, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"gcp:zone: {_show(zone)} is not valid{hint}; expected a zone of the stack's regions "
            f"({', '.join(names)}): set the zones in triton-gke:zones, and gcp:zone to one of them or not at all"
        )


def _refuse_unknown_keys(reader: _Reader) -> None:
    prefix = f"{reader.project}:"
    keys = sorted(_set_keys())
    _refuse_plain_secrets(keys)
    for full_key in keys:
        namespace, sep, name = full_key.partition(":")
        if not (namespace and sep and name) or CONTROL.search(full_key):
            raise ConfigError(f"{_show(full_key)}: not a config key; expected namespace:name, e.g. {prefix}regions")
        if namespace in PROVIDER_DOCS:
            _refuse_provider_key(full_key)
            continue
        if not full_key.startswith(prefix):
            _refuse_misspelt_namespace(reader, full_key)
            continue
        key = full_key[len(prefix) :]
        if key not in reader.keys:
            close = difflib.get_close_matches(key, reader.keys, n=1)
            hint = f"did you mean {close[0]}?" if close else "see Pulumi.yaml for the known keys"
            raise ConfigError(f"{full_key}: unknown setting; {hint}")


def _check_stack_file(reader: _Reader) -> None:
    """The selected stack's file, read as strictly as the offline plan reads it (infra/stack_file.py).

    Under `pulumi up` the engine has already read the file with yaml.v3 and hands over only strings, so an
    unquoted `NO`, `010` or `1.30` would arrive as "NO", "8" or "1.3" with nothing to tell; reading the file
    again here refuses those (and duplicate keys, empty values) there too. A stack configured without a file
    (`--config-file` elsewhere, ESC only) has none to check.
    """
    path = PROJECT_DIR / f"Pulumi.{pulumi.get_stack()}.yaml"
    if path.is_file():
        types = {reader.full(key): spec.type for key, spec in reader.keys.items()}
        try:
            read_stack_file(path, reader.project, types)
        except StackFileError as err:
            raise ConfigError(str(err)) from None


def _gcp_project() -> str:
    project = pulumi.Config("gcp").get("project")
    if not project:
        raise ConfigError(
            "gcp:project: missing; set the Google Cloud project with `pulumi config set gcp:project PROJECT_ID`"
        )
    if not GCP_PROJECT_ID.match(project):
        raise ConfigError(
            f"gcp:project: {project!r} is not a valid project ID; expected 6-30 lowercase letters, digits or hyphens"
        )
    return project


def _gpu_catalogue(reader: _Reader) -> GpuCatalogue:
    override = reader.path("gpuCatalogue")
    path = (PROJECT_DIR / override) if override else catalogue.DEFAULT_GPU_CATALOGUE
    try:
        return catalogue.load_gpu_catalogue(path)
    except CatalogueError as err:
        raise ConfigError(f"{reader.full('gpuCatalogue')}: {err}") from None


def _regions(reader: _Reader, gpu_catalogue: GpuCatalogue, accelerator: str) -> tuple[RegionSettings, ...]:
    known = catalogue.load_regions()
    names = reader.strings("regions")
    if not names:
        raise reader.fail("regions", [], "list at least one region")
    zones = reader.strings("zones")
    with_gpu = gpu_catalogue.regions_with(accelerator)
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see infra/data/gcp_regions.csv"
            raise reader.fail("regions", name, f"unknown GCP region; {hint}")
        if name not in with_gpu:
            raise reader.fail(
                "regions",
                name,
                f"it has no {accelerator} zone in the GPU catalogue; regions with one: {', '.join(with_gpu)}",
            )
        if names.count(name) > 1:
            raise reader.fail("regions", name, "each region may be listed once")
    for zone in zones:
        _check_zone(reader, zone, names, known, gpu_catalogue, accelerator)
        if zones.count(zone) > 1:
            raise reader.fail("zones", zone, "each zone may be listed once")
    return tuple(
        RegionSettings(
            name=name,
            zones=tuple(z for z in zones if z.startswith(f"{name}-"))
            or gpu_catalogue.zones_with(accelerator, name)[:3],
            index=list(known).index(name),
        )
        for name in names
    )


def _check_zone(
    reader: _Reader,
    zone: str,
    regions: tuple[str, ...],
    known: dict[str, tuple[str, ...]],
    gpu_catalogue: GpuCatalogue,
    accelerator: str,
) -> None:
    region = next((r for r in regions if zone.startswith(f"{r}-")), None)
    if region is None or zone not in known[region]:
        raise reader.fail("zones", zone, f"not a zone of the stack's regions ({', '.join(regions)})")
    if gpu_catalogue.offer(accelerator, zone) is None:
        in_region = gpu_catalogue.zones_with(accelerator, region)
        raise reader.fail("zones", zone, f"it has no {accelerator}; {region} zones with one: {', '.join(in_region)}")


def _cluster(reader: _Reader) -> ClusterSettings:
    version = reader.string("kubernetesVersion")
    match = re.fullmatch(r"1\.(\d+)", version)
    if not match or int(match.group(1)) not in KUBERNETES_MINORS:
        supported = f"1.{KUBERNETES_MINORS.start}..1.{KUBERNETES_MINORS.stop - 1}"
        raise reader.fail("kubernetesVersion", version, f'expected a minor version in {supported}, like "1.33"')
    cidrs = _cidrs(reader, "masterAuthorizedCidrs", public_allowed=True)
    return ClusterSettings(
        release_channel=reader.choice("releaseChannel", RELEASE_CHANNELS),
        kubernetes_version=version,
        deletion_protection=reader.boolean("deletionProtection"),
        master_authorized_cidrs=cidrs,
    )


def _at_most(reader: _Reader, key: str, maximum: int, why: str, minimum: int = 0) -> int:
    """A whole number from `minimum` to `maximum`; `why` names the limit (and so its source) in the error."""
    value = reader.integer(key, minimum=minimum)
    if value > maximum:
        raise reader.fail(key, value, f"expected a number from {minimum} to {maximum:,} ({why})")
    return value


def _node_range(reader: _Reader, prefix: str) -> tuple[int, int]:
    low = _at_most(reader, f"{prefix}MinNodes", MAX_NODES_PER_CLUSTER, "GKE nodes per cluster")
    high = _at_most(reader, f"{prefix}MaxNodes", MAX_NODES_PER_CLUSTER, "GKE nodes per cluster", minimum=1)
    if low > high:
        raise reader.fail(f"{prefix}MinNodes", low, f"must not exceed {prefix}MaxNodes ({high})")
    return low, high


def _cpu_pool(reader: _Reader) -> CpuPoolSettings:
    low, high = _node_range(reader, "cpu")
    machine_type = reader.string("cpuMachineType")
    shape = _machine_shape(reader, "cpuMachineType", machine_type)
    if shape.accelerator_optimized:
        raise reader.fail(
            "cpuMachineType", machine_type, "an accelerator-optimized type comes with GPUs; use e.g. n1-standard-8"
        )
    if shape.arm:
        raise reader.fail(
            "cpuMachineType", machine_type, "Arm nodes are tainted arm64 on GKE and the pool's images are amd64"
        )
    return CpuPoolSettings(machine_type=machine_type, min_nodes=low, max_nodes=high)


def _machine_shape(reader: _Reader, key: str, machine_type: str) -> catalogue.MachineShape:
    try:
        return catalogue.machine_shape(machine_type)
    except ValueError as err:
        raise reader.fail(key, machine_type, str(err)) from None


def _check_nodes_per_zone(
    reader: _Reader, regions: tuple[RegionSettings, ...], cpu: CpuPoolSettings, gpu: GpuPoolSettings
) -> None:
    """Pool-wide maxima within GKE's per-zone and per-cluster node limits, for the region with fewest zones."""
    region = min(regions, key=lambda r: len(r.zones))
    for prefix, pool in (("cpu", cpu), ("gpu", gpu)):
        most = MAX_NODES_PER_POOL_ZONE * len(region.zones)
        if pool.max_nodes > most:
            raise reader.fail(
                f"{prefix}MaxNodes",
                pool.max_nodes,
                f"GKE allows {MAX_NODES_PER_POOL_ZONE:,} nodes per pool per zone: at most {most:,} over "
                f"{region.name}'s {len(region.zones)} zone(s)",
            )
    if cpu.max_nodes + gpu.max_nodes > MAX_NODES_PER_CLUSTER:
        raise reader.fail(
            "gpuMaxNodes",
            gpu.max_nodes,
            f"with cpuMaxNodes ({cpu.max_nodes:,}) above GKE's {MAX_NODES_PER_CLUSTER:,} nodes per cluster",
        )


def _gpu_pool(reader: _Reader, gpu_catalogue: GpuCatalogue) -> GpuPoolSettings:
    accelerator = reader.string("gpuAcceleratorType")
    if accelerator not in gpu_catalogue.accelerators:
        raise reader.fail(
            "gpuAcceleratorType",
            accelerator,
            f"unknown accelerator type; allowed: {', '.join(gpu_catalogue.accelerators)}",
        )
    count = reader.integer("gpuAcceleratorCount", minimum=1)
    if count not in T4_LIMITS:
        raise reader.fail("gpuAcceleratorCount", count, "a T4 node carries 1, 2 or 4 GPUs")
    machine_type = reader.string("gpuMachineType")
    _check_t4_machine_type(reader, machine_type, count)
    low, high = _node_range(reader, "gpu")
    disk = _at_most(reader, "gpuDiskSizeGb", DISK_MAX_GB, "pd-balanced boot disk size in GB", minimum=DISK_MIN_GB)
    return GpuPoolSettings(
        machine_type=machine_type,
        accelerator_type=accelerator,
        accelerator_count=count,
        min_nodes=low,
        max_nodes=high,
        spot=reader.boolean("gpuSpot"),
        disk_size_gb=disk,
        driver_version=reader.choice("gpuDriverVersion", DRIVER_VERSIONS),
    )


def _check_t4_machine_type(reader: _Reader, machine_type: str, gpus: int) -> None:
    shape = _machine_shape(reader, "gpuMachineType", machine_type)
    # T4s attach to N1 general-purpose types only, not to the shared-core f1-micro and g1-small (same GPU page).
    if shape.family != "n1" or machine_type in catalogue.SHARED_CORE:
        raise reader.fail("gpuMachineType", machine_type, "a T4 attaches to N1 machine types only, e.g. n1-standard-4")
    most_vcpus, most_gb = T4_LIMITS[gpus]
    if shape.vcpus > most_vcpus:
        raise reader.fail("gpuMachineType", machine_type, f"{gpus} T4 allow at most {most_vcpus} vCPUs per VM")
    if shape.memory_mb is not None and shape.memory_mb > most_gb * 1024:
        raise reader.fail("gpuMachineType", machine_type, f"{gpus} T4 allow at most {most_gb} GB of memory per VM")


def _model_store(reader: _Reader, regions: tuple[RegionSettings, ...]) -> ModelStoreSettings:
    prefix = reader.string("modelPrefix").strip("/")
    segments = prefix.split("/")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*", prefix) or {".", ".."} & set(segments):
        raise reader.fail("modelPrefix", prefix, "expected a folder path of letters, digits, '_', '-', '.' and '/'")
    location = reader.string("bucketLocation") or regions[0].name
    _check_bucket_location(reader, location, tuple(r.name for r in regions))
    return ModelStoreSettings(location=location, force_destroy=reader.boolean("bucketForceDestroy"), prefix=prefix)


def _check_bucket_location(reader: _Reader, location: str, clusters: tuple[str, ...]) -> None:
    """A GCS location that exists and holds data in at least one cluster's region (else every model load crosses
    continents, billed as inter-region egress: https://cloud.google.com/storage/pricing#network-pricing)."""
    try:
        held = catalogue.bucket_location_regions(location, tuple(catalogue.load_regions()))
    except ValueError as err:
        raise reader.fail("bucketLocation", location, str(err)) from None
    if not set(held) & set(clusters):
        kind = "region" if len(held) == 1 else f"location ({', '.join(held[:4])}{', ...' if len(held) > 4 else ''})"
        raise reader.fail(
            "bucketLocation", location, f"that {kind} holds none of the cluster regions ({', '.join(clusters)})"
        )


def _model_repo(reader: _Reader) -> ModelRepoSettings:
    known = {v.name: v for v in REFERENCE_VARIANTS}
    names = reader.strings("modelVariants")
    if not names:
        raise reader.fail("modelVariants", [], f"list at least one of {', '.join(known)}")
    for name in names:
        if name not in known:
            raise reader.fail("modelVariants", name, f"unknown variant; allowed: {', '.join(known)}")
        if names.count(name) > 1:
            raise reader.fail("modelVariants", name, "each variant may be listed once")
    uint8 = reader.strings("modelUint8Input")
    for name in uint8:
        if name not in names:
            raise reader.fail("modelUint8Input", name, f"not in modelVariants ({', '.join(names)})")
    variants = tuple(_variant(reader, known[name], uint8_input=name in uint8) for name in names)
    source = reader.path("modelSource")
    settings = ModelRepoSettings(
        variants=variants,
        source=str(PROJECT_DIR / source) if source else None,
        triton_image_tag=reader.string("tritonImageTag"),
    )
    try:
        validate_settings(settings)
    except ModelRepoError as err:
        raise ConfigError(f"{reader.full(_model_key(str(err)))}: {str(err).split(': ', 1)[-1]}") from None
    return settings


def _model_key(message: str) -> str:
    """The stack key behind a model-settings error (they start with the settings field they concern)."""
    for prefix, key in (("source", "modelSource"), ("triton_image_tag", "tritonImageTag")):
        if message.startswith(prefix):
            return key
    return "modelVariants"


def _variant(reader: _Reader, reference: VariantSettings, uint8_input: bool) -> VariantSettings:
    small = reference.max_batch_size != REFERENCE_VARIANTS[0].max_batch_size
    batch_key, count_key = (
        ("modelSmallBatchSize", "modelSmallBatchInstanceCount")
        if small
        else ("modelMaxBatchSize", "modelInstanceCount")
    )
    max_batch = _at_most(reader, batch_key, INT32_MAX, "int32 max_batch_size in Triton's model config", minimum=1)
    preferred = (
        max_batch
        if small
        else _at_most(reader, "modelPreferredBatchSize", INT32_MAX, "int32 in Triton's model config", minimum=1)
    )
    if preferred > max_batch:
        raise reader.fail("modelPreferredBatchSize", preferred, f"must not exceed modelMaxBatchSize ({max_batch})")
    return VariantSettings(
        name=reference.name,
        precision=reference.precision,
        max_batch_size=max_batch,
        preferred_batch_size=preferred,
        max_queue_delay_us=_at_most(reader, "modelMaxQueueDelayUs", UINT64_MAX, "uint64 in Triton's model config"),
        instance_count=_at_most(reader, count_key, INT32_MAX, "int32 instance_group count in Triton", minimum=1),
        input_dtype="UINT8" if uint8_input else "FP32",
    )


def _check_image_runs_on_driver(
    reader: _Reader, model_repo: ModelRepoSettings, gpu: GpuPoolSettings, cluster: ClusterSettings
) -> None:
    """The Triton image must run on the NVIDIA driver branch the GPU nodes get (infra/data/gke_gpu_drivers.csv)."""
    # INSTALLATION_DISABLED deploys k8s/nvidia_driver.py's preloaded COS installer without a version, which installs
    # the COS image's default driver, the same branch as DEFAULT.
    choice = "DEFAULT" if gpu.driver_version == "INSTALLATION_DISABLED" else gpu.driver_version
    tag = model_repo.triton_image_tag
    branch = catalogue.gke_driver_branch(int(cluster.kubernetes_version.split(".")[1]), choice)
    if not runs_on_driver(image_release(tag), branch):
        raise reader.fail(
            "tritonImageTag",
            tag,
            f"a CUDA 13 image (25.08 and later) needs driver R575+ or R535 on a T4, and gpuDriverVersion "
            f"{gpu.driver_version} on Kubernetes {cluster.kubernetes_version} installs R{branch}; use "
            "gpuDriverVersion DEFAULT (R535), a kubernetesVersion whose LATEST is R580, or tritonImageTag 25.06-py3",
        )


def _serving(reader: _Reader, model_repo: ModelRepoSettings) -> ServingSettings:
    return ServingSettings(
        image=f"{TRITON_IMAGE}:{model_repo.triton_image_tag}",
        queue_time_target_us=_at_most(
            reader, "autoscaleQueueTimeMs", QUANTITY_MAX // 1000, "in microseconds a Kubernetes quantity", minimum=1
        )
        * 1000,
        startup_minutes=_startup_minutes(reader),
    )


def _startup_minutes(reader: _Reader) -> int:
    # Under 10 minutes is less than pulumi-kubernetes' own default wait; over 3 hours a crash-looping pod holds `up`.
    minutes = reader.integer("tritonStartupMinutes", minimum=10)
    if minutes > MAX_STARTUP_MINUTES:
        raise reader.fail("tritonStartupMinutes", minutes, f"expected at most {MAX_STARTUP_MINUTES} minutes")
    return minutes


def _load_test(reader: _Reader, model_repo: ModelRepoSettings) -> LoadTestSettings:
    served = [v.name for v in model_repo.variants]
    model = reader.string("locustModel")
    if model not in served:
        raise reader.fail("locustModel", model, f"not a served model; modelVariants: {', '.join(served)}")
    payload = reader.choice("locustPayload", ("fp32", "uint8"))
    served_dtype = next(v.input_dtype for v in model_repo.variants if v.name == model)
    if payload.upper() != served_dtype:
        raise reader.fail("locustPayload", payload, f"{model} takes {served_dtype} input (see modelUint8Input)")
    workers = reader.integer("locustWorkers", minimum=1)
    if workers > MAX_LOCUST_WORKERS:
        raise reader.fail("locustWorkers", workers, f"at most {MAX_LOCUST_WORKERS} workers per cluster")
    return LoadTestSettings(
        workers=workers,
        model=model,
        rps_per_user=reader.integer("locustRps"),
        protocol=reader.choice("locustProtocol", ("http", "grpc")),
        payload=payload,
    )


def _load_balancer(reader: _Reader) -> LoadBalancerSettings:
    domain = reader.string("domain").lower().rstrip(".")
    if domain and not DOMAIN.fullmatch(domain):
        raise reader.fail("domain", domain, "expected a DNS name such as infer.example.com")
    enabled = reader.boolean("globalLoadBalancer")
    if domain and not enabled:
        raise reader.fail("domain", domain, "a domain needs globalLoadBalancer: true")
    sources = _source_ranges(reader, "lbSourceRanges")
    if sources and not enabled:
        raise reader.fail("lbSourceRanges", list(sources), "a source allowlist needs globalLoadBalancer: true")
    rate_limit = reader.integer("lbRateLimitPerMinute", minimum=1)
    if rate_limit > MAX_RATE_LIMIT:
        raise reader.fail("lbRateLimitPerMinute", rate_limit, f"Cloud Armor allows at most {MAX_RATE_LIMIT:,}")
    return LoadBalancerSettings(
        enabled=enabled,
        domain=domain,
        max_rate_per_pod=reader.integer("lbMaxRatePerPod", minimum=1),
        rate_limit_per_minute=rate_limit,
        source_ranges=sources,
    )


def _source_ranges(reader: _Reader, key: str) -> tuple[str, ...]:
    """An allowlist: valid CIDRs, each once, none the whole internet (that is what an empty list means)."""
    cidrs = _cidrs(reader, key, public_allowed=True)
    networks = [address_space.parse(cidr) for cidr in cidrs]
    for cidr, network in zip(cidrs, networks, strict=True):
        if network.prefixlen == 0:
            raise reader.fail(key, cidr, "allows every source; leave the list empty for that")
        if networks.count(network) > 1:
            raise reader.fail(key, cidr, "each range may be listed once")
    return cidrs


def _monitoring(reader: _Reader) -> MonitoringSettings:
    failure_percent = reader.integer("sloMaxFailurePercent")
    if failure_percent > 100:
        raise reader.fail("sloMaxFailurePercent", failure_percent, "expected a percentage, 0 to 100")
    slo = SloSettings(
        latency_ms=reader.integer("sloLatencyMs", minimum=1),
        for_minutes=reader.integer("sloForMinutes", minimum=1),
        max_failure_ratio=failure_percent / 100,
    )
    retention = reader.string("prometheusRetention")
    validate_slo(slo)  # cannot fail on the whole numbers read above; guards the dataclass contract
    try:
        validate_duration("prometheusRetention", retention)
    except MonitoringError:
        raise reader.fail(
            "prometheusRetention", retention, "expected a Prometheus duration such as 15d or 720h"
        ) from None
    return MonitoringSettings(
        mode=reader.choice("monitoringMode", ("builtin", "operator")),
        slo=slo,
        retention=retention,
        storage_gb=_at_most(reader, "prometheusStorageGb", DISK_MAX_GB, "pd-balanced volume size in GB", minimum=1),
    )


def _cidrs(reader: _Reader, key: str, public_allowed: bool = False) -> tuple[str, ...]:
    """CIDR ranges; unless public_allowed, their union lets in at most a /8 worth of public addresses.

    The same rule as the policy pack's web-ui-not-public (policy/address_space.py says why): judged on the
    union, so 256 x /8, 0.0.0.0/1 + 128.0.0.0/1 or ::ffff:0.0.0.0/96 are the internet too.
    """
    cidrs = reader.strings(key)
    networks = []
    for cidr in cidrs:
        try:
            networks.append(address_space.parse(cidr))
        except ValueError:
            raise reader.fail(key, cidr, "expected a CIDR such as 203.0.113.0/24") from None
    problem = None if public_allowed else address_space.internet_problem(networks)
    if problem:
        raise ConfigError(
            f"{reader.full(key)}: {address_space.show_union(cidrs)} is not valid; {problem}: "
            "a web UI is not opened to the internet; list your own ranges"
        )
    return cidrs


def load_stack_settings() -> StackSettings:
    """Read and validate the whole stack configuration; raises ConfigError on the first problem."""
    project_name, keys = config_schema()
    reader = _Reader(project_name, keys)
    _refuse_unknown_keys(reader)
    _check_stack_file(reader)
    project = _gcp_project()
    gpu_catalogue = _gpu_catalogue(reader)
    gpu_pool = _gpu_pool(reader, gpu_catalogue)
    regions = _regions(reader, gpu_catalogue, gpu_pool.accelerator_type)
    _check_provider_location(regions)
    model_repo = _model_repo(reader)
    cluster = _cluster(reader)
    cpu_pool = _cpu_pool(reader)
    _check_nodes_per_zone(reader, regions, cpu_pool, gpu_pool)
    _check_image_runs_on_driver(reader, model_repo, gpu_pool, cluster)
    return StackSettings(
        project=project,
        stack=pulumi.get_stack(),
        regions=regions,
        cluster=cluster,
        cpu_pool=cpu_pool,
        gpu_pool=gpu_pool,
        gpu_catalogue=gpu_catalogue,
        model_store=_model_store(reader, regions),
        model_repo=model_repo,
        serving=_serving(reader, model_repo),
        load_test=_load_test(reader, model_repo),
        web_ui_source_ranges=_cidrs(reader, "webUiSourceRanges"),
        load_balancer=_load_balancer(reader),
        monitoring=_monitoring(reader),
    )
