"""Command-line flags from a plan's knobs, one spelling for every engine and its preflight."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def to_flag(key: str) -> str:
    """A preset's server-arg key as a command-line flag: `tp_size` and `tp-size` -> `--tp-size`."""
    return "--" + key.lstrip("-").replace("_", "-")


def to_cli_args(
    args: Mapping[str, Any], *, json_separators: tuple[str, str] = (", ", ": "),
) -> list[str]:
    """Server args or bench settings as a served engine's flags: `true` is a bare flag,
    false/None are dropped, a list is one flag and its values, a mapping one JSON value (written
    with `json_separators`, as the engine's own examples write it)."""
    argv: list[str] = []
    for key, value in args.items():
        if value is None or value is False:
            continue
        flag = to_flag(key)
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value, separators=json_separators)]
        else:
            argv += [flag, str(value)]
    return argv
