"""Engines: run one configuration of a batch and return its run record.

Each engine is a package here (`jobs/engines/<name>/`, whose `__init__` defines `make_engine`,
`type_table` and `flag_facts`) with its facts in config/engines/<name>/engine.yaml, which also
registers it (jobs.core.engine_info): nothing outside the package names the engine.
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


def get_engine(name: str, *, stack: StackSpec | None = None) -> Engine:
    """The engine by name, on its own interpreter or on one of the host's stacks
    (docs/contracts.md "Stacks"); heavy imports (torch, transformers) stay inside its run."""
    package = _package(name)
    engine: Engine = package.make_engine() if stack is None else package.make_engine(stack)
    return engine


def type_table(name: str) -> TypeTable | None:
    """The engine's flag types (what a preset's values are checked against before storing)."""
    table: TypeTable | None = _package(name).type_table()
    return table


def flag_facts(name: str) -> Any:
    """What is known of the engine's flags across its releases (renamed, bounded), or None."""
    return _package(name).flag_facts()
