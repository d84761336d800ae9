"""The host's stacks file (docs/contracts.md "Stacks"): the engine environments one GPU host keeps
side by side, read as untrusted input.

```yaml
NAME: {engine: ENGINE, python: /opt/ENGINE-VERSION/bin/python, env: {CUDA_HOME: ...}}
```

Each entry is a name (letters, digits, `.`, `_`, `-`, `+`) and its `engine` (a registered engine
that runs in an interpreter of its own), its `python` and optionally its `env`: what the engine's
interpreter setting (its engine.yaml's `python_env`) and the worker's environment are for the
host's one stack. Every problem is one StackError naming the file and the line; whether the
interpreter runs is the engines' to check (jobs.engines.stack_check), where the batch runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobs import settings
from jobs.core.config_files import read_text
from jobs.core.engine_info import describe, engine_names
from jobs.errors import StackError, UserError, did_you_mean

VARIABLE = "SPECBENCH_STACKS"
MAX_BYTES = 256 * 1024
KEYS = ("engine", "python", "env")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class StackSpec:
    """One stack of the host: its engine, its interpreter and its environment, and where the
    file names it (for messages)."""

    name: str
    engine: str
    python: str
    env: dict[str, str] = field(default_factory=dict)
    source: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "engine": self.engine, "python": self.python,
                "env": dict(self.env), "source": self.source, "line": self.line}


def to_stack_spec(data: Mapping[str, Any]) -> StackSpec:
    """The inverse of `StackSpec.to_dict` (a stack travels with its batch to the worker)."""
    return StackSpec(name=str(data["name"]), engine=str(data["engine"]),
                     python=str(data["python"]), env=dict(data.get("env") or {}),
                     source=str(data.get("source") or ""), line=int(data.get("line") or 0))


@dataclass(frozen=True)
class StackFile:
    """The stacks a host has, in the file's order."""

    source: str
    stacks: tuple[StackSpec, ...] = ()

    def names(self) -> list[str]:
        return [s.name for s in self.stacks]

    def get(self, name: str, *, engine: str | None = None) -> StackSpec:
        """The stack named `name` (for `engine`, when given); a StackError otherwise."""
        found = next((s for s in self.stacks if s.name == name), None)
        if found is None:
            known = self.names()
            listed = ", ".join(known) if known else "none"
            raise StackError(f"unknown stack {name!r}{did_you_mean(name, known)}; {self.source} "
                             f"names: {listed}")
        if engine is not None and found.engine != engine:
            raise StackError(f"stack {name!r} ({found.where}) runs {found.engine}, not {engine}")
        return found

    def of_engine(self, engine: str) -> list[StackSpec]:
        return [s for s in self.stacks if s.engine == engine]


def load_stacks(path: Path | None = None) -> StackFile | None:
    """The host's stacks file (`path`, else SPECBENCH_STACKS), or None when the host has none."""
    path = path or settings.stacks_file()
    if path is None:
        return None
    return parse_stacks(_read(path), source=str(path))


def need_stacks(what: str) -> StackFile:
    """The host's stacks file, for `what` (`--stack X`); without one, a StackError."""
    found = load_stacks()
    if found is None:
        raise StackError(f"{what}: this host has no stacks file ({VARIABLE} is not set), only "
                         "its engines' own interpreters")
    return found


def _read(path: Path) -> str:
    return read_text(path, limit=MAX_BYTES, noun="stacks file", rule="a stacks file is UTF-8 text",
                     error=StackError, where=f"{VARIABLE}={path}")


def parse_stacks(text: str, *, source: str = VARIABLE) -> StackFile:
    """The stacks of a file's text, each checked (see the module)."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise StackError(f"{source}{line}: not valid YAML ({problem})") from None
    except RecursionError:
        raise StackError(f"{source}: nested too deeply for a stacks file") from None
    finally:
        loader.dispose()
    if root is None:
        raise StackError(f"{source}: empty; a stacks file names at least one stack "
                         "(NAME: {engine: ..., python: ...})")
    if not isinstance(root, yaml.MappingNode):
        raise StackError(f"{source}:{_line(root)}: a stacks file is a mapping of stack names "
                         "to {engine, python, env}")
    stacks: list[StackSpec] = []
    seen: dict[str, int] = {}
    for key, value in root.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        where = f"{source}:{_line(key)}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise StackError(f"{where}: stack name {_shown(name)} is not a name (letters, digits, "
                             "'.', '_', '-' or '+', at most 64)")
        if name in seen:
            raise StackError(f"{where}: stack {name!r} is named twice (first at line "
                             f"{seen[name]})")
        seen[name] = _line(key)
        stacks.append(_stack(name, value, source=source, line=_line(key)))
    return StackFile(source=source, stacks=tuple(stacks))


def _stack(name: str, node: yaml.Node, *, source: str, line: int) -> StackSpec:
    where = f"{source}:{line}"
    if not isinstance(node, yaml.MappingNode):
        raise StackError(f"{where}: stack {name!r} must be a mapping with engine, python and "
                         "optionally env")
    fields: dict[str, yaml.Node] = {}
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value not in KEYS:
            shown = key.value if isinstance(key, yaml.ScalarNode) else "?"
            raise StackError(f"{source}:{_line(key)}: stack {name!r} has an unknown key "
                             f"{_shown(shown)}{did_you_mean(str(shown), list(KEYS))}; its keys "
                             f"are {', '.join(KEYS)}")
        fields[key.value] = value
    for needed in ("engine", "python"):
        if needed not in fields:
            raise StackError(f"{where}: stack {name!r} has no {needed}")
    engine = _text(fields["engine"], name=name, key="engine", source=source)
    try:
        info = describe(engine)
    except UserError:
        raise StackError(f"{source}:{_line(fields['engine'])}: stack {name!r}: unknown engine "
                         f"{engine!r}; known engines: {', '.join(sorted(engine_names()))}"
                         ) from None
    if not info.python_env:
        raise StackError(f"{source}:{_line(fields['engine'])}: stack {name!r}: the {engine} "
                         "engine runs inside specbench's own process, with no interpreter of "
                         "its own to choose")
    python = _text(fields["python"], name=name, key="python", source=source)
    env = _env(fields.get("env"), name=name, source=source)
    return StackSpec(name=name, engine=engine, python=python, env=env, source=source, line=line)


def _text(node: yaml.Node, *, name: str, key: str, source: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str" \
            or not node.value.strip():
        raise StackError(f"{source}:{_line(node)}: stack {name!r}: {key} must be a non-empty "
                         "text")
    return str(node.value).strip()


def _env(node: yaml.Node | None, *, name: str, source: str) -> dict[str, str]:
    if node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")):
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise StackError(f"{source}:{_line(node)}: stack {name!r}: env must be a mapping of "
                         "variable names to values")
    env: dict[str, str] = {}
    for key, value in node.value:
        variable = key.value if isinstance(key, yaml.ScalarNode) else None
        if not isinstance(variable, str) or not _ENV_NAME.match(variable):
            raise StackError(f"{source}:{_line(key)}: stack {name!r}: {_shown(variable)} is no "
                             "environment variable's name")
        if not isinstance(value, yaml.ScalarNode) or value.tag.endswith(":null"):
            raise StackError(f"{source}:{_line(value)}: stack {name!r}: env {variable} must be "
                             "a text, a number or a boolean")
        env[variable] = str(value.value)
    return env


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
