"""A preset file read as untrusted input (docs/contracts.md "Bounded work and any file").

Whatever the path holds (a binary, another encoding, a huge file, YAML nested thousands of levels
deep) is one PresetError line, exit 2, never an internal error: `read_preset_text` reads at most
MAX_PRESET_BYTES and decodes UTF-8; `yaml_depth` measures a composed document's nesting without
recursion (`jobs.core.plans` refuses one deeper than MAX_DEPTH).
"""

from __future__ import annotations

from pathlib import Path

import yaml

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
