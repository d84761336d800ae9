"""The value each engine flag takes, and the check of a plan's values before anything is stored.

Each engine package supplies its table: a served engine's comes from config/engines/<name>/
flag_types.yaml, read from the real releases' parsers by a script under scripts/, so the check
needs no engine on this host (the bot's has none; the worker's preflight checks again against
the installed release); the local engine's from its child's own argparse declaration. A value
is refused the
way the engine's argparse would refuse it (`int("abc")`, a float where an int is needed, a
value outside the choices, a value given to a switch), before a GPU is touched.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobs.core.config_files import load_yaml, parsed_once
from jobs.engines.flags import to_flag
from jobs.engines.shipped import locate
from jobs.errors import PresetError

KINDS = ("int", "positive_int", "float", "human_readable_int", "json", "str", "opaque", "switch")
_WANTS = {
    "int": "an integer",
    "positive_int": "an integer of 1 or more",
    "float": "a number",
    "human_readable_int": "an integer (or 4k, 1M, 1Ki...)",
    "json": "JSON",
    "str": "a value",
    "opaque": "a value",
}
# A served engine's human_readable_int (4k, 1Mi; SI suffixes take decimals).
_HUMAN_INT = re.compile(r"\d+(?:\.\d+)?(?:k|M|G|T)|\d+(?:Ki|Mi|Gi|Ti)")


@dataclass(frozen=True)
class FlagType:
    """What one flag takes: `kind` (KINDS), a list when `nargs` is '+' or '*' (the bare flag
    too when it is '?'), and `choices`."""

    flag: str  # no leading dashes
    kind: str
    nargs: str | None = None
    choices: tuple[Any, ...] | None = None
    source: str = ""
    mapping: bool = False  # it takes a JSON mapping (a preset gives it as a mapping)
    keys: frozenset[str] | None = None  # the keys such a mapping may have, when known
    low: int | None = None  # an integer's bounds, where the engine declares them
    high: int | None = None

    def problem(self, value: Any) -> tuple[str, str] | None:
        """(what the flag takes, what it got) when the engine would refuse `value`, else None:
        ("takes an integer", "'abc'")."""
        if isinstance(value, dict):
            return self._mapping_problem(value)
        if self.kind == "switch":
            if value is None or isinstance(value, bool):
                return None
            return "is a switch, true or false", shown(value)
        if self.nargs == "?" and value is True:
            return None  # the bare flag: argparse takes its const
        if isinstance(value, list | tuple):
            if self.nargs not in ("+", "*"):
                return "takes one value", f"a list {shown(value)}"
            if not value and self.nargs == "+":
                return "takes one value or more", "an empty list"
            items: list[Any] = list(value)
        else:
            items = [value]
        for item in items:
            blank = isinstance(item, bool) or item is None or item == "" and self.kind != "str"
            if blank or not _fits(self.kind, item):
                return f"takes {_WANTS[self.kind]}", shown(item)
            if self.choices is not None and str(item) not in {str(c) for c in self.choices}:
                return f"takes one of {', '.join(str(c) for c in self.choices)}", shown(item)
            if (bounds := self._bounds_problem(item)) is not None:
                return bounds, shown(item)
        return None

    def _bounds_problem(self, item: Any) -> str | None:
        """What an integer takes when `item` is outside the bounds the engine declares."""
        if self.high is None or self.kind not in ("int", "positive_int"):
            return None
        value = int(item)
        if (self.low is None or value >= self.low) and value <= self.high:
            return None
        if self.low is None:
            return f"takes an integer of at most {self.high:,}"
        return f"takes an integer from {self.low:,} to {self.high:,}"

    def _mapping_problem(self, value: dict[Any, Any]) -> tuple[str, str] | None:
        if not self.mapping:
            return "takes no mapping (no JSON)", shown(value)
        unknown = sorted(str(k) for k in value if self.keys is not None and str(k) not in self.keys)
        if not unknown:
            return None
        close = difflib.get_close_matches(unknown[0], sorted(self.keys or ()), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return "has no key " + repr(unknown[0]), hint

    def refusal(self, key: str, value: Any, *, engine: str) -> str | None:
        """`threads takes an integer (local engine), got 'abc'`, or None when it fits."""
        found = self.problem(value)
        if found is None:
            return None
        what, got = found
        if what.startswith("has no key"):  # the release's own words for it (pydantic's)
            return f"{to_flag(key)[2:]} {what} ({engine}: Unexpected keyword argument){got}"
        return f"{to_flag(key)[2:]} {what} ({engine}), got {got}"


def _fits(kind: str, item: Any) -> bool:
    """Whether argparse's `type=` of that kind takes `str(item)`, as the engine's argv has it."""
    if kind in ("str", "opaque"):
        return True
    if kind == "int":
        return isinstance(item, int) or isinstance(item, str) and _parses(int, item)
    if kind == "positive_int":
        return _fits("int", item) and int(item) >= 1
    if kind == "float":
        if isinstance(item, int | float):
            return math.isfinite(item)
        return isinstance(item, str) and _parses(float, item)
    if kind == "human_readable_int":
        if isinstance(item, int):
            return True
        text = str(item).strip() if isinstance(item, str) else ""
        return bool(_HUMAN_INT.fullmatch(text)) or _parses(int, text)
    if kind == "json":
        return isinstance(item, int | float) or isinstance(item, str) and _parses(json.loads, item)
    return False


def _parses(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def shown(value: Any) -> str:
    """A value as the user wrote it: 'abc', 2.5, true, nothing."""
    if value is None or value == "":
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


# ------------------------------------------------------------------ the engines' tables


@dataclass(frozen=True)
class TypeTable:
    """One engine's flag types by name (aliases too), and how messages name the engine."""

    engine: str  # how messages name the engine (its title)
    server: Mapping[str, FlagType]
    bench: Mapping[str, FlagType]

    def lookup(self, key: str, *, bench: bool = False) -> FlagType | None:
        return (self.bench if bench else self.server).get(to_flag(key)[2:])


def load_types(name: str, path: Path | None = None, *, engine: str) -> TypeTable:
    """A shipped type table (config/engines/<engine>/flag_types.yaml), or the config folder's own
    copy; `engine` is how its messages name the engine."""
    return _load_cached(*locate(name, path, what=f"the {engine} flag types"), engine)


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int, size: int, engine: str) -> TypeTable:
    return parsed_once(path, f"{engine} flag types",
                       lambda text, source: parse_types(text, source=source, engine=engine))


def parse_types(text: str, *, source: str = "flag_types.yaml", engine: str = "the engine",
                ) -> TypeTable:
    """Validate a flag type table; any problem is a one-line PresetError naming the flag."""
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError as exc:
        raise PresetError(f"{source}: invalid YAML: {exc}") from None
    flags = data.get("flags") if isinstance(data, dict) else None
    bench = data.get("bench", {}) if isinstance(data, dict) else None
    if not isinstance(flags, dict) or not isinstance(bench, dict):
        raise PresetError(f"{source}: expected a mapping with 'releases', 'flags' and 'bench'")
    keys = {str(k).removesuffix("_keys").replace("_", "-"): frozenset(map(str, v))
            for k, v in data.items() if str(k).endswith("_keys") and isinstance(v, list)}
    return TypeTable(engine=engine, server=_flag_types(flags, source=source, keys=keys),
                     bench=_flag_types(bench, source=f"{source}: bench"))


def _flag_types(flags: dict[Any, Any], *, source: str,
                keys: Mapping[str, frozenset[str]] | None = None) -> dict[str, FlagType]:
    """Each flag's type by every name it has; `keys`: flag -> the keys its mapping takes (a
    table's top-level `<flag>_keys`, e.g. the keys of a speculative config)."""
    out: dict[str, FlagType] = {}
    for name, item in flags.items():
        where = f"{source}: flag {name!r}"
        if not isinstance(item, dict) or item.get("type") not in KINDS:
            raise PresetError(f"{where}: needs a type, one of {', '.join(KINDS)}")
        nargs = item.get("nargs")
        if nargs not in (None, "?", "+", "*"):
            raise PresetError(f"{where}: nargs must be '?', '+' or '*', got {nargs!r}")
        choices = item.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise PresetError(f"{where}: choices must be a list")
        flag_type = FlagType(
            flag=str(name), kind=item["type"], nargs=nargs,
            choices=None if choices is None else tuple(choices), source=str(item.get("source", "")),
            mapping=bool(item.get("mapping")), keys=(keys or {}).get(str(name)),
        )
        for alias in [name, *(item.get("aliases") or [])]:
            out[str(alias)] = flag_type
        for negated in item.get("negated") or []:  # `--no-X`: the switch set false
            out[str(negated)] = FlagType(flag=str(negated), kind="switch",
                                         source=flag_type.source)
    return out
