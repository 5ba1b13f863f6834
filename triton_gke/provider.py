"""The Pulumi component provider: the public components, for TypeScript, Go, YAML and every other Pulumi language.

Pulumi's Python component provider host infers the package schema from the components' type annotations and
serves them over the ResourceProvider gRPC interface (Construct, GetSchema); `pulumi package add` runs it from the
plugin folder `triton_gke/plugin/` (PulumiPlugin.yaml, __main__.py, requirements.txt) and generates an SDK from
the schema. Docs: "Build a Component" https://www.pulumi.com/docs/iac/using-pulumi/extending-pulumi/build-a-component/,
"Authoring a Source-Based Plugin Package"
https://www.pulumi.com/docs/iac/guides/building-extending/packages/source-based-plugin/, and the host itself,
pulumi/provider/experimental/host.py (component_provider_host) in the pinned SDK.

Run by the language host as `python triton_gke/plugin ENGINE_ADDRESS`; `triton-gke provider --schema` prints the
inferred schema (tests/unit/triton_gke/test_provider.py compares it with the committed triton_gke/schema.json).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from packaging.version import Version

import triton_gke
from triton_gke.contracts.paths import SCHEMA_FILE
from triton_gke.one_line import OneLineParser

# The package name: the first part of every type token (triton-gke:index:TritonOnCluster). The host puts every
# component in the `index` module (pulumi/provider/experimental/analyzer.py, Analyzer docstring).
PROVIDER_NAME = "triton-gke"
# THE list of hosted components (public name -> module): main(), the schema and the tests all read it.
# TritonGkeRegion and TritonGkeSystem are public in Python only: their Args carry Python-only values the schema
# cannot describe (the analyzer refuses `tuple[str, ...]` in GkeClusterArgs.zones, and StackSettings' tuples of
# dataclasses; ClusterWiring holds pulumi.Resource objects), and a provider's Construct receives plain values only.
COMPONENTS: dict[str, str] = {"TritonOnCluster": "triton_gke.k8s.on_cluster"}
# Properties whose values the schema marks secret (schema name, per component): a generated SDK then wraps them as
# secrets and the engine keeps them encrypted in state and out of logs. The package schema's property has
# `"secret": true` for this (https://www.pulumi.com/docs/iac/using-pulumi/pulumi-packages/schema/#property); the
# pinned SDK's analyzer has no marker for it (pulumi/provider/experimental/analyzer.py PropertyDefinition: optional,
# type, ref, description, items, additional_properties, plain; schema.py Property.to_json writes no "secret"),
# so the inferred schema is amended here, for both the committed file and what the host serves (_provider_class).
SECRET_INPUTS: dict[str, tuple[str, ...]] = {
    "TritonOnCluster": ("kubeconfig", "adminKey", "grafanaAdminPassword", "inferenceKeyA", "inferenceKeyB")
}
SECRET_OUTPUTS: dict[str, tuple[str, ...]] = {"TritonOnCluster": ("adminKey", "inferenceKey", "inferenceNextKey")}


def component_classes(components: Mapping[str, str] = COMPONENTS) -> list[type[pulumi.ComponentResource]]:
    """The hosted component classes, imported on demand (the CLI does not pay for Pulumi's SDKs), analyzable."""
    return [evaluate_annotations(getattr(importlib.import_module(module), name)) for name, module in components.items()]


def evaluate_annotations(component: type[pulumi.ComponentResource]) -> type[pulumi.ComponentResource]:
    """Give `component`, its __init__ and its Args type the annotations Python makes without postponed evaluation.

    Why: the analyzer reads annotations as stored (inspect.get_annotations without eval_str, analyzer.py
    analyze_component/analyze_type), so under `from __future__ import annotations` (PEP 563) it gets the text
    'TritonOnClusterArgs' and fails ("'str' object has no attribute '__mro__'"); a TypedDict keeps each as a
    ForwardRef. Each text is evaluated once in its own module, as the interpreter would have at definition time;
    typing.get_type_hints cannot stand in: pulumi.Input's own forward reference ('Output[T]') would not resolve.
    Idempotent; a component written without the future import passes through unchanged.
    """
    _evaluate_own(component, component)
    _evaluate_own(component.__init__, component)
    args = component.__init__.__annotations__.get("args")
    if isinstance(args, type):
        _evaluate_own(args, args)
        for nested in _typed_dicts_in(args):  # an Args field typed by a TypedDict of its own (e.g. Toleration)
            _evaluate_own(nested, nested)
    return component


def _typed_dicts_in(args: type) -> list[type]:
    """The TypedDicts an (evaluated) Args type names in its fields, at any depth of Sequence, Mapping or Input."""
    found: list[type] = []
    pending = list(args.__dict__.get("__annotations__", {}).values())
    while pending:
        hint = pending.pop()
        if isinstance(hint, type) and typing.is_typeddict(hint) and hint not in found:
            found.append(hint)
            _evaluate_own(hint, hint)
            pending.extend(hint.__dict__.get("__annotations__", {}).values())
        pending.extend(typing.get_args(hint))
    return found


def _evaluate_own(owner: typing.Any, home: type) -> None:
    namespace = vars(sys.modules[home.__module__])
    # A class's own annotations only (its bases' are theirs); a function keeps them on the function object.
    annotations = owner.__dict__.get("__annotations__", {}) if isinstance(owner, type) else owner.__annotations__
    for key, value in annotations.items():
        text = value.__forward_arg__ if isinstance(value, typing.ForwardRef) else value
        if isinstance(text, str):
            annotations[key] = eval(text, namespace)  # noqa: S307 - the component's own annotation text


def infer_schema(components: Sequence[type[pulumi.ComponentResource]] | None = None) -> dict[str, Any]:
    """The package schema as the host infers it: the same analyzer and generator ComponentProvider.__init__ calls.

    Raises the analyzer's own error (e.g. a component whose `args` annotation is a string, as under
    `from __future__ import annotations`: the analyzer reads annotations without evaluating them).
    """
    # Imported here: the experimental modules pull in the provider server (grpc), which the CLI does not need.
    from pulumi.provider.experimental.analyzer import Analyzer
    from pulumi.provider.experimental.schema import generate_schema

    classes = list(components) if components is not None else component_classes()
    result = Analyzer(PROVIDER_NAME).analyze(classes)
    dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
    spec = generate_schema(
        PROVIDER_NAME,
        pulumi_version(triton_gke.__version__),
        None,
        result["component_definitions"],
        result["type_definitions"],
        dependencies,
    )
    return amend_schema(spec.to_json())


def pulumi_version(version: str) -> str:
    """The package's PEP 440 version as the semantic version Pulumi parses.

    Pulumi reads a schema's version with blang/semver ParseTolerant and refuses what it cannot parse ("failed to
    parse semver", pulumi/pulumi pkg/codegen/schema/bind.go newBinder), and PEP 440 versions such as 0.3.1.dev2+gHASH
    (a development build) are not all semver. So: X.Y.Z (missing parts 0, a fourth and
    the epoch dropped), a pre-release as -alpha.N / -beta.N / -rc.N, a development release as -dev.N after it, a
    post-release and the local label as build metadata (+post.N.LOCAL). The versions this package is built with
    (X.Y.Z in pyproject.toml; X.Y.Z.devN if ever used) keep their PEP 440 order in semver; the rarer forms
    stay valid semver but may order differently (1.0.dev1 sorts after 1.0a1 there, a post-release equals its
    release).
    """
    parsed = Version(version)
    release = ".".join(str(part) for part in (*parsed.release, 0, 0)[:3])
    pre = []
    if parsed.pre is not None:
        label, number = parsed.pre
        pre += [{"a": "alpha", "b": "beta"}.get(label, label), str(number)]
    if parsed.dev is not None:
        pre += ["dev", str(parsed.dev)]
    build = ([f"post.{parsed.post}"] if parsed.post is not None else []) + ([parsed.local] if parsed.local else [])
    return release + ("-" + ".".join(pre) if pre else "") + ("+" + ".".join(build) if build else "")


def amend_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the secret properties marked and every description dedented.

    The analyzer copies an attribute docstring as written, so a second line kept the source's indentation
    ("...\n    Default false."); inspect.cleandoc removes it as Python does for docstrings (PEP 257).
    """
    for token, resource in schema.get("resources", {}).items():
        component = token.rsplit(":", 1)[-1]
        for section, secret in (("inputProperties", SECRET_INPUTS), ("properties", SECRET_OUTPUTS)):
            properties = resource.get(section, {})
            for name in secret.get(component, ()):
                properties[name]["secret"] = True
            for prop in properties.values():
                if isinstance(prop.get("description"), str):
                    prop["description"] = inspect.cleandoc(prop["description"])
    return schema


def schema_text(components: Sequence[type[pulumi.ComponentResource]] | None = None) -> str:
    """The schema as committed in triton_gke/schema.json: sorted keys, two-space indent, final newline. Its version
    is the installed package's (pyproject.toml's static version) as semver, the one the provider serves (GetSchema,
    GetPluginInfo); tests/unit/triton_gke/test_release.py checks it is pyproject.toml's."""
    return json.dumps(infer_schema(components), indent=2, sort_keys=True) + "\n"


def host(components: Sequence[type[pulumi.ComponentResource]] | None = None) -> None:
    """Serve `components` (default: COMPONENTS) until the engine stops the process.

    What component_provider_host does (pulumi/provider/experimental/host.py), with WholeNumbers for its
    ComponentProvider: pulumi.provider.main reads the engine address from sys.argv, prints the port it listens on,
    as every provider plugin does, and blocks.
    """
    from pulumi.provider import main as serve

    classes = list(components) if components is not None else component_classes()
    serve(_provider_class()(classes, PROVIDER_NAME, None, pulumi_version(triton_gke.__version__)), sys.argv[1:])


def _provider_class() -> type:
    """ComponentProvider, handing integer inputs to the components as int (imported here: grpc, see above)."""
    from pulumi.provider.experimental.analyzer import PropertyType
    from pulumi.provider.experimental.component import ComponentProvider

    class WholeNumbers(ComponentProvider):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            # Serve the schema as committed: secrets marked, descriptions dedented (amend_schema).
            self.schema = json.dumps(amend_schema(json.loads(self.schema or "{}")))

        # Why: numbers cross the wire as protobuf doubles, and ComponentProvider.map_input_properties of pulumi
        # 3.272.0 computes int(value) for an `integer` property but then stores the original float (no `continue`
        # after the conversion, pulumi/provider/experimental/component.py), so `max_replicas: 2` reached the
        # component as 2.0 and its whole-number check refused it. Only integral floats are converted: 2.5 still
        # reaches the component, which refuses it with its own message.
        def map_inputs(self, inputs: Any, component_def: Any) -> Any:
            mapped = super().map_inputs(inputs, component_def)
            for schema_name, prop in component_def.inputs.items():
                key = component_def.inputs_mapping[schema_name]
                value = mapped.get(key)
                if prop.type == PropertyType.INTEGER and isinstance(value, float) and value.is_integer():
                    mapped[key] = int(value)
                if prop.ref and schema_name in inputs:
                    mapped[key] = self._object_as_given(inputs[schema_name], prop, mapped.get(key))
            return mapped

        # Why: map_input_properties (pulumi 3.272.0) keeps only the keys an object type declares and makes a
        # non-object {}, so `namespaces: {tritn: x}` or `namespaces: x` reached the component as {} and it deployed
        # into the default namespaces without a word (red team of issue 33). An object with an unknown key, or a value
        # that is no object, goes to the component as given (known keys under their Python names): it refuses it.
        def _object_as_given(self, given: Any, prop: Any, mapped: Any) -> Any:
            definition = self.get_type_definition(prop)
            if definition is None:
                return mapped
            if not isinstance(given, dict):
                return given
            names = definition.properties_mapping
            if set(given) <= set(names):
                return mapped
            return {names.get(k, k): (mapped or {}).get(names[k], v) if k in names else v for k, v in given.items()}

    return WholeNumbers


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m triton_gke.provider",
        description="The triton-gke component provider: print or rewrite its schema, or serve the components to the "
        "Pulumi engine (as the language host runs the plugin: python triton_gke/plugin ENGINE_ADDRESS).",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--schema",
        action="store_true",
        help="print the schema the SDK's analyzer infers, as committed (with the installed version)",
    )
    mode.add_argument("--write-schema", action="store_true", help=f"rewrite {SCHEMA_FILE.name} with that schema")
    parser.add_argument(
        "engine", nargs="?", help="the engine's address: serve the components (the engine's own flags pass through)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`--schema`: print the inferred schema; `--write-schema`: rewrite schema.json; ENGINE: host the components.

    A bad option is one line on stderr and exit 2 (triton_gke/one_line.py). With an engine address the words the engine
    adds (--logtostderr, -v=N, ...) are left to pulumi.provider.main, which reads them itself (provider/server.py).
    """
    parser = _parser()
    args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if args.schema or args.write_schema:
        if args.engine or extra:
            parser.error(f"unrecognized arguments: {' '.join([*([args.engine] if args.engine else []), *extra])}")
        return _schema(write=args.write_schema)
    if args.engine is None:
        parser.error(
            f"unrecognized arguments: {' '.join(extra)}"
            if extra
            else "expected --schema, --write-schema or the engine's address"
        )
    host()
    return 0


def _schema(*, write: bool) -> int:
    if write:
        SCHEMA_FILE.write_text(schema_text())
        print(f"wrote {SCHEMA_FILE}")
    else:
        sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
