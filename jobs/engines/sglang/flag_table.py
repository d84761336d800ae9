"""SGLang's renamed and version-bound flags (config/engines/sglang/flags.yaml), and the translation.

A preset names a knob once; the installed release decides the spelling: `cuda-graph-max-bs` on
0.5.2, `cuda-graph-max-bs-decode` from 0.5.14 on (the old name is gone from 0.5.20). `to_release`
turns a configuration's server args (and its declared change, so that a renamed knob is never a
confound) into the names of one release. Flags that exist only from some release on are not
translated; `hint` says why such a flag is unknown, for preflight's refusal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from jobs.core.config_files import load_yaml, parsed_once, top_level
from jobs.core.plans import RunConfig
from jobs.engines.flags import to_flag
from jobs.engines.shipped import locate
from jobs.errors import PresetError

FILE = "engines/sglang/flags.yaml"
_VERSION = re.compile(r"^\d+\.\d+\.\d+")
_KEYS = {
    "renamed": ({"old", "new", "new_since", "old_until"}, {"old", "new", "new_since"}),
    "bounded": ({"flag", "value", "since", "never", "instead"}, {"flag"}),
}


def version_tuple(version: str) -> tuple[int, int, int]:
    """`0.5.15.post1` -> (0, 5, 15): post and pre releases count as their base release."""
    found = _VERSION.match(version.strip())
    if found is None:
        raise ValueError(f"not an SGLang version: {version!r}")
    major, minor, patch = (int(p) for p in found.group(0).split("."))
    return major, minor, patch


@dataclass(frozen=True)
class Rename:
    old: str
    new: str
    new_since: tuple[int, int, int]
    old_until: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Bound:
    flag: str
    value: str | None = None
    since: tuple[int, int, int] | None = None
    never: bool = False
    instead: str | None = None


@dataclass(frozen=True)
class FlagTable:
    renames: tuple[Rename, ...] = ()
    bounds: tuple[Bound, ...] = ()

    def name_for(self, key: str, version: str) -> str:
        """The flag name (no dashes) that release `version` has for the knob `key`."""
        name = to_flag(key)[2:]
        at = version_tuple(version)
        for rename in self.renames:
            if name == rename.old and at >= rename.new_since:
                return rename.new
            if name == rename.new and at < rename.new_since:
                return rename.old
        return name

    def respell(self, config: RunConfig, version: str) -> RunConfig:
        """`config` in the names `version` has (`to_release`)."""
        return to_release(config, version, self)

    def hint(self, flag: str, version: str, *, value: Any = None) -> str | None:
        """Why `--flag` (or its `value`) is unknown to `version`, when the table knows."""
        name = to_flag(flag)[2:]
        at = version_tuple(version)
        for bound in self.bounds:
            if bound.flag != name or (bound.value is not None and str(value) != bound.value):
                continue
            what = f"--{name}" if bound.value is None else f"--{name} {bound.value}"
            if bound.never:
                tail = f": {bound.instead}" if bound.instead else ""
                return f"no SGLang release has {what}{tail}"
            if bound.since is not None and at < bound.since:
                since = ".".join(map(str, bound.since))
                return f"{what} is in SGLang {since} and later; this is {version}"
        return None


def to_release(config: RunConfig, version: str, table: FlagTable) -> RunConfig:
    """`config` with every renamed knob spelled as release `version` has it."""
    args = _renamed(config.server_args, version, table)
    change = dict(config.change)
    change["server_args"] = _renamed(config.change.get("server_args") or {}, version, table)
    if args == config.server_args and change == config.change:
        return config
    return replace(config, server_args=args, change=change)


def _renamed(args: Mapping[str, Any], version: str, table: FlagTable) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in args.items():
        name = table.name_for(key, version)
        out[name if name != to_flag(key)[2:] else key] = value
    return out


def load_table(path: Path | None = None) -> FlagTable:
    """The table in the config folder, else the shipped one (it holds facts about SGLang)."""
    return _load_cached(*locate(FILE, path, what="the SGLang flag table"))


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, mtime_ns: int, size: int) -> FlagTable:
    return parsed_once(path, "SGLang flag table",
                       lambda text, source: parse_table(text, source=source))


def parse_table(text: str, *, source: str = FILE) -> FlagTable:
    """Validate a flag table; any problem is a one-line PresetError naming the entry."""
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError as exc:
        raise PresetError(f"{source}: invalid YAML: {exc}") from None
    data = top_level(data, source=source, keys=tuple(_KEYS))
    entries: dict[str, list[dict[str, Any]]] = {}
    for section, (allowed, required) in _KEYS.items():
        items = data.get(section)
        items = [] if items is None else items
        if not isinstance(items, list):
            raise PresetError(f"{source}: key {section!r} must be a list")
        for n, item in enumerate(items, 1):
            where = f"{source}: {section} #{n}"
            if not isinstance(item, dict):
                raise PresetError(f"{where}: must be a mapping")
            extra = sorted(str(k) for k in item if k not in allowed)
            if extra:
                raise PresetError(f"{where}: unknown key {extra[0]!r}")
            missing = sorted(required - set(item))
            if missing:
                raise PresetError(f"{where}: missing key {missing[0]!r}")
        entries[section] = items
    renames = tuple(
        Rename(
            old=_name(item["old"], where=f"{source}: renamed #{n}"),
            new=_name(item["new"], where=f"{source}: renamed #{n}"),
            new_since=_version(item["new_since"], where=f"{source}: renamed #{n}"),
            old_until=_version(item["old_until"], where=f"{source}: renamed #{n}")
            if item.get("old_until") is not None else None,
        )
        for n, item in enumerate(entries["renamed"], 1)
    )
    bounds = []
    for n, item in enumerate(entries["bounded"], 1):
        where = f"{source}: bounded #{n}"
        never = item.get("never", False)
        if not isinstance(never, bool) or never == ("since" in item):
            raise PresetError(f"{where}: give exactly one of 'since' and 'never: true'")
        bounds.append(Bound(
            flag=_name(item["flag"], where=where),
            value=None if item.get("value") is None else str(item["value"]),
            since=_version(item["since"], where=where) if "since" in item else None,
            never=never,
            instead=None if item.get("instead") is None else str(item["instead"]).strip(),
        ))
    return FlagTable(renames=renames, bounds=tuple(bounds))


def _name(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", value):
        raise PresetError(f"{where}: {value!r} is not a flag name (lower case, no leading --)")
    return value


def _version(value: Any, *, where: str) -> tuple[int, int, int]:
    try:
        return version_tuple(str(value))
    except ValueError:
        raise PresetError(f"{where}: {value!r} is not a version like \"0.5.14\"") from None
