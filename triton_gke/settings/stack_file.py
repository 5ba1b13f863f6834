"""Stack files (Pulumi.<stack>.yaml) read strictly, so that no value silently changes its meaning.

`pulumi up` reads a stack file with Go's yaml.v3 and hands the program each value as a string: a
string as written, a bool/number as its JSON text, a list or map as JSON, an empty value as "null"
(unmarshalObject/MarshalString in
https://github.com/pulumi/pulumi/blob/master/sdk/go/common/resource/config/object.go). PyYAML reads the
same file as YAML 1.1, and the two disagree on unquoted scalars: `NO`, `yes`, `12:30` are a bool and
sexagesimal 750 to YAML 1.1 but strings to yaml.v3; `1e3` and `0o10` are strings to YAML 1.1 but numbers
to yaml.v3; and both read `010` as 8 and `0x10` as 16 (yaml.v3 keeps YAML 1.1 octals "for compatibility":
https://github.com/go-yaml/yaml/blob/v3/resolve.go). So an unquoted scalar that either reader takes for
anything but text is accepted only in its plainest spelling (a decimal whole number, a decimal fraction,
true or false) and never for a setting whose type is string; everything else is refused with a hint to
quote it. Under both readers a quoted value is text.

What else is refused, in one line naming the file (and the key, where there is one):
- a key given twice: yaml.v3 refuses that too ("mapping key ... already defined",
  https://github.com/go-yaml/yaml/blob/v3/decode.go), PyYAML would silently keep the last;
- an empty value (`key:` or `~`): Pulumi passes the text "null", which no setting means;
- a config key without a namespace (Pulumi keys are `namespace:name`,
  https://www.pulumi.com/docs/iac/concepts/config/#configuration-keys);
- a path that is not a regular file once links are resolved (a folder, a FIFO, /dev/zero: read_regular_file),
- a file that is not UTF-8 text, holds NUL bytes, is larger than MAX_BYTES, is not one YAML mapping,
  nests deeper than MAX_DEPTH, holds a recursive alias (yaml.v3 refuses those too: "anchor 'a' value contains
  itself", https://github.com/go-yaml/yaml/blob/v3/decode_test.go) or
  expands (aliases included) to more than MAX_NODES values or MAX_CHARS characters. yaml.v3 also bounds
  alias expansion ("document contains excessive aliasing", decode.go above); these limits, checked while
  the file is composed and before any alias is expanded, keep the offline plan's time and memory bounded
  (a "billion laughs" file, or a long string aliased thousands of times, is refused in milliseconds).

The offline plan reads stack files only through here; under `pulumi up` the settings entry (settings/stack.py)
runs the same reading over the selected stack's file, so both refuse the same files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from triton_gke.bounded_files import NotRegularFileError, one_line, read_regular_file, read_text_file
from triton_gke.settings.errors import ConfigError

MAX_BYTES = 256 * 1024  # a stack file of this project is ~1 KiB; Pulumi's own are rarely above a few KiB
MAX_DEPTH = 32
MAX_NODES = 20_000  # scalars, lists and maps, counted with every alias expanded
# Characters of all scalars (keys included) with every alias expanded: four times the largest file, so aliases
# may repeat a file's text a few times over, never blow it up (a 120,000-character string aliased 19,000 times
# stands for 2.3 billion characters: gigabytes once expanded, and yaml.v3 would expand it too).
MAX_CHARS = 4 * MAX_BYTES
STR_TAG = "tag:yaml.org,2002:str"
SECRET_PLACEHOLDER = "[secret]"  # the offline plan cannot decrypt; the settings never read secure values

# The plainest spellings, read alike by YAML 1.1 (PyYAML) and yaml.v3.
PLAIN_INT = re.compile(r"-?(0|[1-9][0-9]*)")
PLAIN_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)\.[0-9]+")
PLAIN_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
# yaml.v3's resolver (resolve.go): what it takes for something other than a string.
V3_NULL = {"", "~", "null", "Null", "NULL"}
V3_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[0-9]+)")
V3_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
V3_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?")
# Booleans to the YAML 1.1 spec (y|Y|yes|...|n|N|no|..., https://yaml.org/type/bool.html) that PyYAML's resolver
# and yaml.v3 both leave as text: another YAML 1.1 reader (or a later PyYAML) may not, so they are refused too.
YAML11_ONLY_BOOL = {"y": True, "Y": True, "n": False, "N": False}


class StackFileError(ConfigError):
    """One line naming the stack file, the line and the key at fault (a ConfigError: one line, no traceback)."""

    def __init__(self, message: str) -> None:
        # Keys and values quoted in the message may hold line breaks or other control characters: shown escaped.
        super().__init__(CONTROL.sub(lambda m: repr(m.group())[1:-1], message))


class _Limit(Exception):
    pass


class _Loader(yaml.SafeLoader):
    """Composes the node graph only (nothing is constructed), refusing deep nesting and oversized expansions early.

    An alias is composed as a reference to its anchor's node, not a copy, so the graph stays as small as the text;
    what grows is what the file stands for once every alias is expanded (what yaml.v3 and _Values below build).
    Each node's expanded size (values, characters) is known when it is complete, so every alias adds its anchor's
    size to running totals and the file is refused the moment they pass MAX_NODES or MAX_CHARS: a few long
    strings aliased thousands of times are refused before a single copy exists.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.nodes = 0  # values the document expands to so far, aliases expanded
        self.chars = 0  # characters of its scalars (keys included) so far, aliases expanded
        self.sizes: dict[int, tuple[int, int]] = {}  # id(node) -> its expanded (values, characters), once complete

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            node = super().compose_node(parent, index)  # the anchored node itself (or the undefined-alias error)
            if id(node) not in self.sizes:
                raise _Limit("an alias refers to the value that contains it (a recursive alias)")
            self._grow(*self.sizes[id(node)])
            return node
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Limit(f"nested deeper than {MAX_DEPTH} levels")
        nodes, chars = self.nodes, self.chars
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(node, ScalarNode):
            self._grow(1, len(node.value))
        else:
            self._grow(1, 0)
        self.sizes[id(node)] = (self.nodes - nodes, self.chars - chars)
        return node

    def _grow(self, nodes: int, chars: int) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise _Limit(f"expands to more than {MAX_NODES} values (aliases included)")
        if self.chars > MAX_CHARS:
            raise _Limit(f"expands to more than {MAX_CHARS:,} characters (aliases included)")


def read_stack_file(path: Path, project: str, types: dict[str, str]) -> dict[str, str]:
    """The file's `config:` as the engine passes it: 'namespace:key' -> string (lists and maps as JSON).

    types: full key -> schema type ("string", "integer", "boolean", "array" of strings) of the project's keys.
    """
    root = _compose(path)
    if root is None:  # an empty file: a stack without settings
        return {}
    if not isinstance(root, MappingNode):
        raise StackFileError(f"{path.name}: expected a YAML mapping with a `config:` section, not {_kind(root)}")
    top = _Values(path, types).mapping(root, "", 0)
    config, config_node = top.get("config"), _child(root, "config")
    if config is None or config_node is None:
        return {}
    if not isinstance(config, dict) or not isinstance(config_node, MappingNode):
        where = f"{path.name} line {_line(config_node)}"
        raise StackFileError(f"{where}: config: expected a mapping of namespace:key to value")
    keys = [key_node for key_node, _ in config_node.value]
    return {_full_key(path, project, key_node): _engine_string(config[key_node.value]) for key_node in keys}


def read_yaml_file(path: Path, what: str, error: Callable[[str], Exception], cap: int = MAX_BYTES) -> Any:
    """The YAML file at `path` as yaml.safe_load reads it, through the one bounded reader (triton_gke/bounded_files.py)
    and parse_yaml's guards; `error(line)` names the file (Pulumi.yaml, the replacement rules, a stack file read
    loosely by the offline runtime)."""
    return parse_yaml(read_text_file(path, cap, what, error), path, error)


def parse_yaml(text: str, where: Path | str, error: Callable[[str], Exception]) -> Any:
    """yaml.safe_load(text) under the stack file's guards (_Loader: nesting, recursive aliases, alias expansion),
    refusing in one line naming `where`."""
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses control characters
        return loader.get_single_data()
    except _Limit as err:
        raise error(f"{one_line(where)}: {err}") from None
    except yaml.YAMLError as err:
        raise error(f"{one_line(where)}: not valid YAML: {_yaml_problem(err)}") from None
    except ValueError as err:  # a value of a YAML type that does not convert (a timestamp of month 13)
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise error(f"{one_line(where)}: not valid YAML: {one_line(problem)}") from None
    finally:
        if loader is not None:
            loader.dispose()


# The one bounded reader of files (regular files only, read up to a cap), re-exported here, where several readers
# import it from.
__all__ = [
    "NotRegularFileError",
    "StackFileError",
    "parse_yaml",
    "read_regular_file",
    "read_stack_file",
    "read_yaml_file",
]


def _compose(path: Path) -> Node | None:
    text = stack_file_text(path)
    loader = None
    try:
        loader = _Loader(text)  # its reader already refuses control characters
        return loader.get_single_node()
    except _Limit as err:
        raise StackFileError(f"{path.name}: {err}; not a stack file") from None
    except yaml.YAMLError as err:
        raise StackFileError(f"{path.name}: not valid YAML: {_yaml_problem(err)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def stack_file_text(path: Path) -> str:
    """The stack file's text: a regular UTF-8 file of at most MAX_BYTES without NUL bytes, else StackFileError
    naming it (the parse reads it so, and so does an edit of the file, bench/tuners/tune_candidates.py write_stack)."""
    try:
        data = read_regular_file(path, MAX_BYTES)
    except NotRegularFileError as err:
        if err.kind == "a folder":
            raise StackFileError(f"{_shown(path)}: {err}; not a stack file") from None
        real = os.path.realpath(path)  # the device or FIFO itself, where a name or link hides it (zero, Pulumi.x.yaml)
        raise StackFileError(f"{_shown(path)} ({real}): {err}; a stack file is a regular YAML file") from None
    except FileNotFoundError:
        raise StackFileError(f"{_shown(path)}: no such stack file") from None
    except OSError as err:
        raise StackFileError(f"{_shown(path)}: cannot read it ({err.strerror})") from None
    if len(data) > MAX_BYTES:
        raise StackFileError(f"{_shown(path)}: more than {MAX_BYTES} bytes; a stack file may hold at most that")
    if b"\0" in data:
        raise StackFileError(f"{path.name}: binary data (NUL bytes), not a YAML stack file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise StackFileError(f"{path.name}: not UTF-8 text (byte {err.start}); a stack file is YAML") from None


def _shown(path: Path) -> str:
    """The file's name for a message; the whole path where it has no name ('.', '/')."""
    return path.name or str(path)


def _yaml_problem(err: yaml.YAMLError) -> str:
    problem = getattr(err, "problem", None) or getattr(err, "reason", None) or type(err).__name__
    context = getattr(err, "context", None)
    problem = f"{context}, {problem}" if context else problem
    mark = getattr(err, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


class _Values:
    """Node -> value, with each scalar judged by the schema type of the key it belongs to."""

    def __init__(self, path: Path, types: dict[str, str]) -> None:
        self.path = path
        self.types = types
        self.count = 0

    def fail(self, node: Node, key: str, problem: str) -> StackFileError:
        where = f"{self.path.name} line {_line(node)}"
        # The key path holds the file's own keys: a line break among them (YAML's "\N" is U+0085, which
        # str.splitlines breaks at) is shown escaped, so the message stays one line.
        shown = one_line(key)
        return StackFileError(f"{where}: {shown}: {problem}" if key else f"{where}: {problem}")

    def value(self, node: Node, key: str, kind: str | None, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            limit = f"more than {MAX_NODES} values" if self.count > MAX_NODES else f"deeper than {MAX_DEPTH} levels"
            raise self.fail(node, key, f"expands to {limit} (aliases included); not a stack setting")
        if isinstance(node, MappingNode):
            return self.mapping(node, key, depth)
        if isinstance(node, SequenceNode):
            item = "string" if kind == "array" else None  # every list setting of Pulumi.yaml holds strings
            return [self.value(child, key, item, depth + 1) for child in node.value]
        return self.scalar(node, key, kind)

    def mapping(self, node: Node, key: str, depth: int) -> Any:
        if not isinstance(node, MappingNode):
            return self.value(node, key, None, depth)
        seen: dict[str, int] = {}
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                raise self.fail(key_node, key, "a key must be plain text (no lists, maps or << merges as keys)")
            name = key_node.value
            full = name if depth == 1 or not key else f"{key}.{name}"  # depth 1: the entries of `config:`
            if name in seen:
                raise self.fail(key_node, full, f"given twice (lines {seen[name]} and {_line(key_node)}); keep one")
            seen[name] = _line(key_node)
            if depth == 0 and name == "config" and _is_null(value_node):  # `config:` with nothing under it
                result[name] = None
                continue
            if _is_secure(value_node):
                result[name] = SECRET_PLACEHOLDER
                continue
            kind = self.types.get(name) if depth == 1 else None
            result[name] = self.value(value_node, full, kind, depth + 1)
        return result

    def scalar(self, node: ScalarNode, key: str, kind: str | None) -> Any:
        text = node.value
        if node.style is not None:  # quoted or a block scalar: text to every YAML reader
            return text
        implicit = _RESOLVER.resolve(ScalarNode, text, (True, False))
        if node.tag != implicit:  # an explicit tag such as !!str or !!binary
            if node.tag == STR_TAG:
                return text
            raise self.fail(node, key, f"the tag {node.tag} is not supported; write the value plainly or quote it")
        if implicit == STR_TAG and _v3_kind(text) is None and text not in YAML11_ONLY_BOOL:
            return text
        if text in V3_NULL or implicit == "tag:yaml.org,2002:null":
            raise self.fail(node, key, "empty value; remove the line to use the default, or write '' for empty text")
        return self.typed(node, key, kind, text)

    def typed(self, node: ScalarNode, key: str, kind: str | None, text: str) -> Any:
        quoted = json.dumps(text, ensure_ascii=False)
        if kind == "string":
            raise self.fail(node, key, f"{text} unquoted is {_readings(text)}, not text; quote it: {quoted}")
        if PLAIN_INT.fullmatch(text):
            return int(text)
        if PLAIN_FLOAT.fullmatch(text):
            return float(text)
        if text in PLAIN_BOOL:
            return PLAIN_BOOL[text]
        raise self.fail(
            node,
            key,
            f"{text} unquoted is {_readings(text)}; write a number in plain decimal, a boolean as true or false, "
            f"or quote the text: {quoted}",
        )


_RESOLVER = _Loader("")  # only its implicit resolvers are used (YAML 1.1, as PyYAML reads)


def _v3_kind(text: str) -> str | None:
    """What yaml.v3 takes an unquoted scalar for, None for a string (resolve.go: null, bool, int, float, timestamp)."""
    if text in V3_NULL:
        return "null"
    if text in PLAIN_BOOL:
        return "boolean"
    if V3_INT.fullmatch(text.replace("_", "")):
        return "whole number"
    if V3_FLOAT.fullmatch(text):
        return "number"
    return "timestamp" if V3_TIMESTAMP.fullmatch(text) else None


def _readings(text: str) -> str:
    """What the two YAML readers make of an unquoted scalar, for the error message."""
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError):
        value = text
    parts = [] if isinstance(value, str) else [f"{value!r} to YAML 1.1 (PyYAML)"]
    if text in YAML11_ONLY_BOOL:
        parts.append(f"{YAML11_ONLY_BOOL[text]!r} to the YAML 1.1 spec")
    v3 = _v3_kind(text)
    if v3:
        parts.append(f"a {v3} to yaml.v3 (Pulumi)")
    return " and ".join(parts) or "not text"


def _full_key(path: Path, project: str, key_node: Node) -> str:
    name = key_node.value
    namespace, sep, key = name.partition(":")
    if not sep or not namespace or not key:
        hint = f"did you mean {project}:{name}?" if not sep else f"expected namespace:name, e.g. {project}:regions"
        raise StackFileError(f"{path.name} line {_line(key_node)}: {name!r}: a config key needs a namespace; {hint}")
    return name


def _engine_string(value: Any) -> str:
    """What the engine hands the program for a value (object.go MarshalString): text as is, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _child(node: Node, name: str) -> Node | None:
    return next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == name), None)


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.style is None and node.value in V3_NULL


def _is_secure(node: Node) -> bool:
    """`{secure: CIPHERTEXT}`, Pulumi's encrypted value (object.go isSecureValue)."""
    return (
        isinstance(node, MappingNode)
        and len(node.value) == 1
        and isinstance(node.value[0][0], ScalarNode)
        and node.value[0][0].value == "secure"
        and isinstance(node.value[0][1], ScalarNode)
    )


def _kind(node: Node | None) -> str:
    return {ScalarNode: "a single value", SequenceNode: "a list"}.get(type(node), "that")


def _line(node: Node) -> int:
    return node.start_mark.line + 1
