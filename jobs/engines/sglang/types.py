"""SGLang's flag types (config/engines/sglang/flag_types.yaml, read from the real releases'
parsers by scripts/sglang_flag_types.py)."""

from __future__ import annotations

from pathlib import Path

from jobs.engines.flag_types import TypeTable, load_types

FILE = "engines/sglang/flag_types.yaml"


def sglang_table(path: Path | None = None) -> TypeTable:
    """The shipped table, or the config folder's own copy (as with the flag table)."""
    return load_types(FILE, path, engine="SGLang")
