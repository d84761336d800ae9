"""What the house may know about each engine without importing it: config/engines/*/engine.yaml.

The core judges, remembers and compares runs of every engine alike; where an engine's own facts
matter (how messages name it, the fingerprint key of its version, which server args make a
configuration parallel or speculative, where its interpreter comes from) it reads them here,
never from the engine's code. An engine is registered by its folder: adding one is adding its
package under jobs/engines/ and its engine.yaml.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobs import settings
from jobs.core.errors import PresetError, UserError

_KEYS = frozenset({"name", "title", "called", "module", "version_key", "python_env", "gpu",
                   "default", "parallel_args", "speculative_args", "metrics", "required_args",
                   "slo_keys", "evidence", "server_metrics", "extra"})


@dataclass(frozen=True)
class EngineInfo:
    """One engine's facts (the keys of engine.yaml)."""

    name: str
    title: str
    module: str
    called: str = ""
    version_key: str | None = None
    python_env: str | None = None
    gpu: bool = True
    default: bool = False
    parallel_args: frozenset[str] = frozenset()
    speculative_args: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()
    required_args: tuple[str, ...] = ()  # server args every configuration must set
    slo_keys: tuple[str, ...] = ()  # the benchmark's result keys a preset's `slo` may limit
    # How a configuration's evidence is found (jobs.evidence.plan_evidence reads it): the model
    # folder's arg, the tensor-parallel args, the tokens of one verify step...
    evidence: dict[str, Any] = field(default_factory=dict)
    # Its Prometheus page (jobs.engines.server_metrics reads it): the path, the arg that turns it
    # on, the names of its gauges and counters; empty: the engine serves none
    server_metrics: dict[str, Any] = field(default_factory=dict)
    # The specbench extra (pyproject's optional dependencies) the engine needs in the worker's
    # own interpreter, checked before a batch runs (jobs.extras); none: it runs elsewhere
    extra: str | None = None

    @property
    def in_text(self) -> str:
        return self.called or self.title

    def python(self) -> str:
        """The interpreter whose `-m` runs the engine (the worker's setting), else python3."""
        return (os.environ.get(self.python_env) if self.python_env else None) or "python3"


def engines_dir() -> Path:
    return settings.shipped_config() / "engines"


@functools.cache
def _registered(folder: Path) -> dict[str, EngineInfo]:
    found: dict[str, EngineInfo] = {}
    for path in sorted(folder.glob("*/engine.yaml")):
        try:
            data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise PresetError(f"{path}: cannot read the engine's facts: {exc}") from None
        if not isinstance(data, dict) or set(data) - _KEYS or not {"name", "title",
                                                                    "module"} <= set(data):
            raise PresetError(f"{path}: expected name, title, module and only {sorted(_KEYS)}")
        info = EngineInfo(**{
            **data,
            "parallel_args": frozenset(data.get("parallel_args") or ()),
            "speculative_args": frozenset(data.get("speculative_args") or ()),
            "metrics": tuple(data.get("metrics") or ()),
            "required_args": tuple(data.get("required_args") or ()),
            "slo_keys": tuple(data.get("slo_keys") or ()),
            "evidence": dict(data.get("evidence") or {}),
            "server_metrics": dict(data.get("server_metrics") or {}),
        })
        found[info.name] = info
    if sum(i.default for i in found.values()) != 1:
        raise PresetError(f"{folder}: exactly one engine must be the default")
    return found


def registered() -> dict[str, EngineInfo]:
    return _registered(engines_dir())


def engine_names() -> tuple[str, ...]:
    return tuple(registered())


def default_engine() -> str:
    return next(i.name for i in registered().values() if i.default)


def describe(name: str) -> EngineInfo:
    """The engine's facts; an unknown name is a UserError listing the registered ones."""
    found = registered()
    if name not in found:
        raise UserError(f"unknown engine {name!r}; known engines: {', '.join(sorted(found))}")
    return found[name]


def all_info() -> tuple[EngineInfo, ...]:
    return tuple(registered().values())


def engine_of(fingerprint: dict[str, Any], *, named: str | None = None) -> str:
    """The engine that ran a record: `named` (the record's own `engine`), else the engine whose
    version the fingerprint holds, else the CPU engine on a host without a GPU, else the default
    (records written before records named their engine)."""
    if named is not None and named in registered():
        return named
    for info in all_info():
        if info.version_key and fingerprint.get(info.version_key):
            return info.name
    gpu = str(fingerprint.get("gpu") or "")
    if fingerprint.get("gpu_count") == 0 or gpu.startswith("none") or "cpu" in fingerprint:
        return next((i.name for i in all_info() if not i.gpu), default_engine())
    return default_engine()
