"""Engines: run one configuration of a batch and return its run record.

Each engine is a package here (`jobs/engines/<name>/`) with its facts in
config/engines/<name>/engine.yaml, which also registers it (jobs.core.engine_info): nothing
outside the package names the engine. The package's `__init__` names its parts as import paths
(`module:attribute`), imported only when asked for: `ENGINE` (the engine's class), `TYPES` (what
makes its flag type table) and `FLAG_FACTS` (what loads what is known of its flags across its
releases; None: nothing).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobs.core.engine_info import describe

if TYPE_CHECKING:
    from jobs.core.stacks import StackSpec
    from jobs.engines.base import Engine
    from jobs.engines.flag_types import TypeTable


def _package(name: str) -> Any:
    return importlib.import_module(describe(name).module)


def _part(name: str, part: str) -> Any:
    """The engine's `part` (its package's `module:attribute` path), imported now; None when the
    package names none."""
    path: str | None = getattr(_package(name), part)
    if path is None:
        return None
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def get_engine(name: str, *, stack: StackSpec | None = None) -> Engine:
    """The engine by name, on its own interpreter or on one of the host's stacks
    (docs/contracts.md "Stacks"); heavy imports (torch, transformers) stay inside its run."""
    make = _part(name, "ENGINE")
    engine: Engine = make() if stack is None else make(stack)
    return engine


def type_table(name: str) -> TypeTable | None:
    """The engine's flag types (what a preset's values are checked against before storing)."""
    make = _part(name, "TYPES")
    table: TypeTable | None = None if make is None else make()
    return table


def flag_facts(name: str) -> Any:
    """What is known of the engine's flags across its releases (renamed, bounded), or None."""
    load = _part(name, "FLAG_FACTS")
    return None if load is None else load()
