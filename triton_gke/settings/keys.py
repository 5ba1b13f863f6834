"""Which keys a stack may set: the project's (Pulumi.yaml), the providers' own, never key material in plain text.

Also the stack file re-read strictly (settings/stack_file.py) and gcp:project, the one provider key this program
reads itself.
"""

from __future__ import annotations

import ast
import base64
import difflib
import importlib.util
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from triton_gke.contracts.paths import project_dir
from triton_gke.settings.errors import ConfigError
from triton_gke.settings.reader import CONTROL, Reader, show
from triton_gke.settings.stack_file import SECRET_PLACEHOLDER, read_stack_file

GCP_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")

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


def _refuse_plain_secrets(config: Mapping[str, str], keys: list[str], secret_keys: frozenset[str]) -> None:
    """Key material in plain config is refused without echoing it; secret values arrive marked secret.

    Under `pulumi up` the engine lists the keys set with --secret (secret_keys: pulumi.runtime's secret keys, also
    exported as PULUMI_CONFIG_SECRET_KEYS, gathered by infra/config.py); the offline plan cannot decrypt and reads a
    `secure:` value as SECRET_PLACEHOLDER.
    """
    for full_key in keys:
        if full_key in secret_keys:
            continue
        value = config.get(full_key)
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


def _refuse_misspelt_namespace(reader: Reader, full_key: str) -> None:
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
    return frozenset(re.sub(r"_(\w)", lambda m: m.group(1).upper(), name) for name in _kubernetes_provider_args())


def _kubernetes_provider_args() -> list[str]:
    """ProviderArgs.__init__'s keyword names, read from pulumi_kubernetes/provider.py's source, not imported.

    Importing it would import pulumi into the settings layer; tests/unit/settings/test_layer.py checks the names
    against the imported class's signature.
    """
    spec = importlib.util.find_spec("pulumi_kubernetes")
    if spec is None or spec.origin is None:
        raise ConfigError(
            "kubernetes: the pulumi_kubernetes package is not installed; run make setup (requirements.txt)"
        )
    tree = ast.parse((Path(spec.origin).parent / "provider.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ProviderArgs":
            init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            arguments = [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]
            return [a.arg for a in arguments if a.arg != "__self__"]
    raise ConfigError("kubernetes: pulumi_kubernetes/provider.py defines no ProviderArgs; see requirements.txt")


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


def refuse_unknown_keys(reader: Reader, secret_keys: frozenset[str]) -> None:
    """Every key set (whatever its namespace) is known, spelt right and free of plain key material."""
    prefix = f"{reader.project}:"
    keys = sorted(reader.config)
    _refuse_plain_secrets(reader.config, keys, secret_keys)
    for full_key in keys:
        namespace, sep, name = full_key.partition(":")
        if not (namespace and sep and name) or CONTROL.search(full_key):
            raise ConfigError(f"{show(full_key)}: not a config key; expected namespace:name, e.g. {prefix}regions")
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


def check_stack_file(reader: Reader, stack: str) -> None:
    """The selected stack's file, read as strictly as the offline plan reads it (settings/stack_file.py).

    Under `pulumi up` the engine has already read the file with yaml.v3 and hands over only strings, so an
    unquoted `NO`, `010` or `1.30` would arrive as "NO", "8" or "1.3" with nothing to tell; reading the file
    again here refuses those (and duplicate keys, empty values) there too. A stack configured without a file
    (`--config-file` elsewhere, ESC only) has none to check. A StackFileError is a ConfigError.
    """
    path = project_dir() / f"Pulumi.{stack}.yaml"
    if path.is_file():
        types = {reader.full(key): spec.type for key, spec in reader.keys.items()}
        read_stack_file(path, reader.project, types)


def gcp_project(config: Mapping[str, str]) -> str:
    project = config.get("gcp:project")
    if not project:
        raise ConfigError(
            "gcp:project: missing; set the Google Cloud project with `pulumi config set gcp:project PROJECT_ID`"
        )
    # fullmatch: `$` also matches before a trailing line break ("Matches the end of the string or just before the
    # newline at the end of the string", https://docs.python.org/3/library/re.html#regular-expression-syntax), and
    # "my-project\n" then reached every resource name and the plan's lines (issue 44).
    if not GCP_PROJECT_ID.fullmatch(project):
        raise ConfigError(
            f"gcp:project: {project!r} is not a valid project ID; expected 6-30 lowercase letters, digits or hyphens"
        )
    return project
