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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobs import settings
from jobs.core.config_files import load_yaml
from jobs.errors import PresetError, UserError

_KEYS = frozenset({"name", "title", "called", "module", "version_key", "python_env", "gpu",
                   "default", "parallel_args", "speculative_args", "protected_args", "metrics",
                   "required_args", "slo_keys", "evidence", "server_metrics", "bench_prompts",
                   "log_gauges", "result_keys", "result_key_patterns", "bench_bounds", "extra",
                   "workload", "datasets"})


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
    # server args that choose the model, a file or the code the server runs: never `--set`
    protected_args: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()
    required_args: tuple[str, ...] = ()  # server args every configuration must set
    slo_keys: tuple[str, ...] = ()  # the benchmark's result keys a preset's `slo` may limit
    # The bench setting of how many requests one benchmark run sends, and its default: what a
    # tail percentile rests on (docs/contracts.md "Noise, measured")
    bench_prompts: dict[str, Any] = field(default_factory=dict)
    # Gauges read off the server's own log lines (name -> {pattern, scale}): what a run's log
    # tail says of its load where the record has no server metrics (jobs.core.verdicts)
    log_gauges: dict[str, Any] = field(default_factory=dict)
    # every measured key of the benchmark's result (exact, or a pattern's full match): what a
    # preset's `metric` may name
    result_keys: tuple[str, ...] = ()
    result_key_patterns: tuple[str, ...] = ()
    # the bench flags a typo could make endless, each with its kind of bound (jobs.core.
    # bench_checks.BOUNDS: requests, tokens, concurrency, rate...)
    bench_bounds: dict[str, str] = field(default_factory=dict)
    # How a configuration's evidence is found (jobs.evidence.plan_evidence reads it): the model
    # folder's arg, the tensor-parallel args, the tokens of one verify step...
    evidence: dict[str, Any] = field(default_factory=dict)
    # Its Prometheus page (jobs.engines.server_metrics reads it): the path, the arg that turns it
    # on, the names of its gauges and counters; empty: the engine serves none
    server_metrics: dict[str, Any] = field(default_factory=dict)
    # The specbench extra (pyproject's optional dependencies) the engine needs in the worker's
    # own interpreter, checked before a batch runs (jobs.extras); none: it runs elsewhere
    extra: str | None = None
    # How its benchmark reads a workload offline (docs/contracts.md "Workloads that represent
    # the traffic"): the file's `format` and `suffix`, the `bench` settings that make it read
    # one, the args that take the file, the output length and the category; empty: it reads
    # none (jobs.core.workloads)
    workload: dict[str, Any] = field(default_factory=dict)
    # Its benchmark's datasets: the `default` one (no dataset-name given), the `synthetic` ones
    # (random token ids) and the `synthetic_prefixes` of their settings
    datasets: dict[str, Any] = field(default_factory=dict)

    @property
    def in_text(self) -> str:
        return self.called or self.title

    def requests_of(self, bench: Mapping[str, Any]) -> int | None:
        """How many requests a benchmark run with these `bench` settings sends (None: the
        engine does not say)."""
        arg, default = self.bench_prompts.get("arg"), self.bench_prompts.get("default")
        value = bench.get(arg, default) if arg else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def reports(self, key: str) -> bool:
        """Whether the engine's benchmark reports `key` (a preset's `metric` must be one)."""
        return key in self.result_keys or any(
            re.fullmatch(pattern, key) for pattern in self.result_key_patterns)

    def python(self) -> str:
        """The interpreter whose `-m` runs the engine (the worker's setting), else python3."""
        return (os.environ.get(self.python_env) if self.python_env else None) or "python3"


def engines_dir() -> Path:
    return settings.shipped_config() / "engines"


@functools.cache
def registered() -> dict[str, EngineInfo]:
    """The shipped engines' facts, read once per process (they belong to the code, which does not
    move while it runs; every configuration's every verdict looks an engine up)."""
    folder = engines_dir()
    found: dict[str, EngineInfo] = {}
    for path in sorted(folder.glob("*/engine.yaml")):
        try:
            data: Any = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise PresetError(f"{path}: cannot read the engine's facts: {exc}") from None
        if not isinstance(data, dict) or set(data) - _KEYS or not {"name", "title",
                                                                    "module"} <= set(data):
            raise PresetError(f"{path}: expected name, title, module and only {sorted(_KEYS)}")
        info = EngineInfo(**{
            **data,
            "parallel_args": frozenset(data.get("parallel_args") or ()),
            "speculative_args": frozenset(data.get("speculative_args") or ()),
            "protected_args": frozenset(data.get("protected_args") or ()),
            "metrics": tuple(data.get("metrics") or ()),
            "required_args": tuple(data.get("required_args") or ()),
            "slo_keys": tuple(data.get("slo_keys") or ()),
            "result_keys": tuple(data.get("result_keys") or ()),
            "result_key_patterns": tuple(data.get("result_key_patterns") or ()),
            "bench_bounds": dict(data.get("bench_bounds") or {}),
            "evidence": dict(data.get("evidence") or {}),
            "server_metrics": dict(data.get("server_metrics") or {}),
            "bench_prompts": dict(data.get("bench_prompts") or {}),
            "log_gauges": dict(data.get("log_gauges") or {}),
            "workload": dict(data.get("workload") or {}),
            "datasets": dict(data.get("datasets") or {}),
        })
        found[info.name] = info
    if sum(i.default for i in found.values()) != 1:
        raise PresetError(f"{folder}: exactly one engine must be the default")
    return found


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


def engine_title(name: str) -> str | None:
    """How messages name a registered engine; None for a name no engine has (a probe's)."""
    info = registered().get(name)
    return None if info is None else info.title


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
