"""A preset file read as untrusted input (docs/contracts.md "Bounded work and any file").

Whatever the path holds (a binary, another encoding, a huge file, YAML nested thousands of levels
deep) is one PresetError line, exit 2, never an internal error: `read_preset_text` reads at most
MAX_PRESET_BYTES and decodes UTF-8; `yaml_depth` measures a composed document's nesting without
recursion (`jobs.core.plans` refuses one deeper than MAX_DEPTH).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from jobs.core.limits import MAX_PRESET_BYTES
from jobs.errors import PresetError


def read_preset_text(path: Path) -> str:
    """A preset file's text; one PresetError line for a file that is no UTF-8 text (binary,
    another encoding), larger than MAX_PRESET_BYTES, or unreadable (docs/contracts.md "Any file is
    input"). A UTF-8 byte-order mark is dropped."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PRESET_BYTES + 1)
    except OSError as exc:
        raise PresetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_PRESET_BYTES:
        raise PresetError(f"{path}: larger than {MAX_PRESET_BYTES // 1024} KiB; a preset is a "
                          "short YAML file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise PresetError(f"{path}: UTF-16 text (a byte-order mark); presets are UTF-8 text")
    if b"\x00" in data:
        raise PresetError(f"{path}: a binary file (NUL bytes), not a YAML preset; presets are "
                          "UTF-8 text")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PresetError(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); presets "
                          "are UTF-8 text") from None


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
