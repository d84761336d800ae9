"""The SGLang engine: `python -m sglang.launch_server` per configuration, `sglang.bench_serving`
per repetition (docs/contracts.md "SGLang engine contract"), its flags checked against the installed
release, renamed knobs spelled for it, and its failure rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.core.stacks import StackSpec
    from jobs.engines.flag_types import TypeTable
    from jobs.engines.sglang.engine import SGLangEngine
    from jobs.engines.sglang.flag_table import FlagTable


def make_engine(stack: StackSpec | None = None) -> SGLangEngine:
    """The engine on the engine's own interpreter, or on one of the host's stacks."""
    from jobs.engines.sglang.engine import SGLangEngine

    return SGLangEngine(stack)


def type_table() -> TypeTable:
    from jobs.engines.sglang.types import sglang_table

    return sglang_table()


def flag_facts() -> FlagTable:
    from jobs.engines.sglang.flag_table import load_table

    return load_table()
