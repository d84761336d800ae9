"""The local engine: a tiny seeded Llama on the CPU, one child process per configuration
(`python -m jobs.engines.local.child`), for the demo and the tests: no GPU, no download."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.engines.flag_types import TypeTable
    from jobs.engines.local.engine import LocalEngine


def make_engine() -> LocalEngine:
    from jobs.engines.local.engine import LocalEngine

    return LocalEngine()


def type_table() -> TypeTable:
    from jobs.engines.local.types import local_table

    return local_table()


def flag_facts() -> None:
    """The local engine has one release: nothing renamed, nothing bounded."""
    return None
