"""A preset file read as untrusted input (docs/contracts.md "Bounded work and any file").

Whatever the path holds (a binary, another encoding, a huge file, YAML nested thousands of levels
deep) is one PresetError line, exit 2, never an internal error: `read_preset_text` reads at most
MAX_PRESET_BYTES and decodes UTF-8; `yaml_depth` measures a composed document's nesting without
recursion (`jobs.core.plans` refuses one deeper than MAX_DEPTH); `describe_error` and `line_of`
name a problem's file, line and key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from jobs.core.config_files import read_text
from jobs.core.limits import MAX_PRESET_BYTES


def read_preset_text(path: Path) -> str:
    """A preset file's text; one PresetError line for a file that is no UTF-8 text (binary,
    another encoding), larger than MAX_PRESET_BYTES, or unreadable (docs/contracts.md "Any file is
    input"). A UTF-8 byte-order mark is dropped."""
    return read_text(path, limit=MAX_PRESET_BYTES, noun="preset", rule="presets are UTF-8 text")


def yaml_depth(node: yaml.Node | None) -> int:
    """How deeply a composed YAML document nests, each node counted once (an alias is the
    node it names, so neither a shared nor a recursive anchor is walked again)."""
    deepest, seen = 0, set[int]()
    stack: list[tuple[yaml.Node, int]] = [(node, 1)] if node is not None else []
    while stack:
        current, depth = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        deepest = max(deepest, depth)
        if isinstance(current, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in current.value for child in pair)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
    return deepest


def describe_error(exc: ValidationError, *, node: yaml.Node | None, source: str,
                   data: Any) -> str:
    """A preset's first validation error as one line: its file, line and key path."""
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    key = _dotted(loc, data)
    line = line_of(node, loc)
    if error["type"] == "extra_forbidden":
        return f"{source}{line}: unknown key {key!r}"
    if error["type"] == "missing":
        return f"{source}{line}: missing key {key!r}"
    return f"{source}{line}: key {key!r}: {error['msg'].removeprefix('Value error, ')}"


def _dotted(loc: tuple[Any, ...], data: Any) -> str:
    parts: list[str] = []
    current = data
    for item in loc:
        if isinstance(item, int):
            name = None
            if isinstance(current, list) and item < len(current):
                current = current[item]
                name = current.get("name") if isinstance(current, dict) else None
                if not isinstance(name, str) or len(name) > SHOWN_NAME_CHARS:
                    name = None  # a list's index is shown instead of a name that is no name
            parts[-1:] = [f"{parts[-1] if parts else ''}[{name or item}]"]
        else:
            parts.append(str(item))
            current = current.get(item) if isinstance(current, dict) else None
    return ".".join(parts)


SHOWN_NAME_CHARS = 40
"""The longest approach name a message shows in a key's path (`approaches[eagle3].name`)."""


def line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> str:
    """':LINE' of the deepest YAML node on the path `loc`, or '' when unknown."""
    found = node
    for item in loc:
        child = None
        if isinstance(found, yaml.MappingNode):
            for key_node, value_node in found.value:
                if key_node.value == item:
                    child = value_node if item != loc[-1] else key_node
                    break
        elif isinstance(found, yaml.SequenceNode) and isinstance(item, int):
            if item < len(found.value):
                child = found.value[item]
        if child is None:
            break
        found = child
    if found is None:
        return ""
    return f":{found.start_mark.line + 1}"
