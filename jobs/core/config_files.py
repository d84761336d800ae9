"""The top level of a config file of ours, checked alike in every one (the failure rules, an
engine's flag tables): a mapping of known keys only. A problem is one PresetError line that
names the file and the keys it may hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.errors import PresetError


def top_level(data: Any, *, source: str, keys: Sequence[str]) -> dict[str, Any]:
    """`data` (a parsed document) when it is a mapping of `keys` only."""
    if not isinstance(data, dict):
        raise PresetError(f"{source}: expected a mapping with {_listed(keys)}")
    unknown = sorted(str(key) for key in data if key not in keys)
    if unknown:
        expected = ", ".join(repr(key) for key in keys)
        raise PresetError(f"{source}: unknown key {unknown[0]!r} (expected {expected})")
    return data


def _listed(keys: Sequence[str]) -> str:
    """'a', 'b' and 'c'."""
    named = [repr(key) for key in keys]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
