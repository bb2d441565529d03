"""Reading a config's YAML by the YAML 1.2 core schema, refusing repeated keys, aliases beyond ``MAX_VALUES``
values, nesting beyond ``MAX_DEPTH`` and files that are not small UTF-8 text; and ``dump_yaml``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Union

import yaml


class ConfigError(ValueError):
    """An invalid config; the message names the offending key's full path."""


ConfigError.__module__ = "vijax.run"  # its public home (tracebacks and doctests print it)

MAX_CONFIG_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_VALUES = 1_000_000  # values after expanding aliases (a "billion laughs" file expands to 10**9)

_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$"
)


def _too_deep(source: str, line: int, aliases: str = "") -> ConfigError:
    return ConfigError(
        f"{source}: nested more than {MAX_DEPTH} levels deep (line {line}{aliases}); a config is a few levels of mappings"
    )


class _Loader(yaml.SafeLoader):
    """A SafeLoader resolving plain scalars by the YAML 1.2 core schema (YAML 1.2.2, §10.3: no octal ``010``,
    ``1:30``, ``yes``, timestamps or merge keys), refusing nesting deeper than ``MAX_DEPTH``."""

    yaml_implicit_resolvers: dict = {}  # replaces YAML 1.1's; filled below
    source, depth = "<string>", 0

    def compose_node(self, parent, index):
        nested = self.check_event(yaml.CollectionStartEvent)
        self.depth += nested
        if self.depth > MAX_DEPTH:
            raise _too_deep(self.source, self.peek_event().start_mark.line + 1)
        node = super().compose_node(parent, index)
        self.depth -= nested
        return node


for _tag, _pattern, _first in (  # the int before the float, which also matches it
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", _INT_RE, list("-+0123456789")),
    ("float", _FLOAT_RE, list("-+.0123456789")),
):
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)


def _construct_number(loader: _Loader, node: yaml.ScalarNode):
    """An int, or a float (``!!float`` included), by the YAML 1.2 core schema."""
    text, want_float = loader.construct_scalar(node), node.tag.endswith(":float")
    try:
        if _INT_RE.match(text):
            value = int(text[2:], 8 if text[1] == "o" else 16) if text[:2] in ("0o", "0x") else int(text)
            return float(value) if want_float else value
    except ValueError as e:  # more digits than Python converts
        raise yaml.constructor.ConstructorError(None, None, f"cannot read the integer: {e}", node.start_mark) from None
    if want_float and _FLOAT_RE.match(text):
        return float(text.lower().replace(".inf", "inf").replace(".nan", "nan"))
    what = "number" if want_float else "integer"
    raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not a YAML 1.2 {what}", node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_number)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_number)


class _Dumper(yaml.SafeDumper):
    """A SafeDumper that quotes every string that YAML 1.1 or 1.2 would read as something else."""

    yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeDumper.yaml_implicit_resolvers.items()}


for _first_char, _resolvers in _Loader.yaml_implicit_resolvers.items():
    _Dumper.yaml_implicit_resolvers.setdefault(_first_char, []).extend(_resolvers)


def dump_yaml(value: Any) -> str:
    """``value`` (plain data) as YAML that YAML 1.2 and 1.1 readers both read back as ``value``."""
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False)


def _check_nodes(loader: _Loader, root: yaml.Node, source: str, prefix: str) -> None:
    """Refuses a key given twice or not a plain value, an alias that refers to itself, and aliases that expand
    beyond ``MAX_VALUES`` values or ``MAX_DEPTH`` levels."""
    size: dict[int, int] = {}  # id(node) -> values under it, aliases expanded
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [(root, prefix, False)]
    while stack:
        node, path, done = stack.pop()
        line = node.start_mark.line + 1
        if done:
            children = [v for _, v in node.value] if isinstance(node, yaml.MappingNode) else node.value
            open_nodes.discard(id(node))
            size[id(node)] = 1 + sum(1 + size[id(c)] for c in children)  # each item and its key or index
            depth[id(node)] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[id(node)] > MAX_VALUES:
                raise ConfigError(
                    f"{source}: its aliases expand to more than {MAX_VALUES:,} values (line {line}); a config needs far fewer"
                )
            if depth[id(node)] > MAX_DEPTH:
                raise _too_deep(source, line, ", aliases expanded")
        elif id(node) in open_nodes:
            raise ConfigError(f"{path or source}: refers to itself through an alias (line {line} of {source})")
        elif isinstance(node, yaml.ScalarNode):
            size[id(node)] = depth[id(node)] = 1
        elif id(node) not in size:
            open_nodes.add(id(node))
            stack.append((node, path, True))
            if isinstance(node, yaml.SequenceNode):
                stack.extend((item, f"{path}[{i}]", False) for i, item in enumerate(node.value))
                continue
            seen: dict = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    kind = "mapping" if isinstance(key_node, yaml.MappingNode) else "list"
                    raise ConfigError(
                        f"{path or source}: a key must be a plain value, got a {kind} "
                        f"(line {key_node.start_mark.line + 1} of {source})"
                    )
                key = loader.construct_object(key_node)
                key_path = f"{path}.{key}" if path else str(key)
                if key in seen:
                    raise ConfigError(
                        f"{key_path}: given twice in {source} (lines {seen[key]} and {key_node.start_mark.line + 1}); "
                        "each key may appear once"
                    )
                seen[key] = key_node.start_mark.line + 1
                stack.append((value_node, key_path, False))


# the brackets of flow collections, outside quoted scalars and comments (a rough scan, enough to bound the depth)
_FLOW_TOKENS = re.compile(r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\n]|'')*'|#[^\n]*|[\[\]{}]""")


def parse_yaml(text: str, source: str = "<string>", prefix: str = "") -> Any:
    """Parses YAML text safely (plain data only) by the YAML 1.2 core schema, with the module docstring's limits.

    Args:
      text: the YAML text.
      source: what the text is, for the messages (a file's path, ``--set KEY=VALUE``).
      prefix: the dotted config key the text is the value of (``--set model={...}``), for the messages.

    Raises:
      ConfigError: naming the key (``model.num_components: given twice ...``) or the source.

    Examples:
      >>> parse_yaml("a: 010\\nb: 1:30\\nc: 1e-3")
      {'a': 10, 'b': '1:30', 'c': 0.001}
      >>> parse_yaml("a: 1\\na: 2")
      Traceback (most recent call last):
      ...
      vijax.run.ConfigError: a: given twice in <string> (lines 1 and 2); each key may appear once
    """
    level = 0
    for match in _FLOW_TOKENS.finditer(text):  # PyYAML's scanner is quadratic in the depth of [ and {
        level += 1 if match.group() in "[{" else -1 if match.group() in "]}" else 0
        if level > MAX_DEPTH:
            raise _too_deep(source, text.count("\n", 0, match.start()) + 1)
    loader = _Loader(text)
    loader.source = source
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_nodes(loader, root, source, prefix)
        return loader.construct_document(root)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from None
    finally:
        loader.dispose()


def read_config_text(path: Union[str, os.PathLike]) -> str:
    """The text of the config file ``path``; ConfigError naming it when unreadable, too large or not UTF-8."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except IsADirectoryError:
        raise ConfigError(f"{name}: is a folder, not a YAML config file") from None
    except FileNotFoundError:
        raise ConfigError(f"{name}: no such config file") from None
    except OSError as e:
        raise ConfigError(f"{name}: cannot read the config file: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{name}: larger than {MAX_CONFIG_BYTES >> 20} MiB, not a config (a config is a short YAML file; "
            "data belong in the data files it names)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}); save the config as UTF-8"
        ) from None
