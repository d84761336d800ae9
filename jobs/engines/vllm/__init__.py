"""The vLLM engine (docs/contracts.md "vLLM engine"): `vllm serve MODEL` per configuration, `vllm
bench serve --save-result` per repetition, mappings passed as JSON, ready on `/health`, the accept
length from the result or the server's `vllm:spec_decode_*` counters, its flags checked against the
installed release's own parser, and vLLM's failure rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.core.stacks import StackSpec
    from jobs.engines.flag_types import TypeTable
    from jobs.engines.vllm.engine import VLLMEngine


def make_engine(stack: StackSpec | None = None) -> VLLMEngine:
    """The engine on the engine's own interpreter, or on one of the host's stacks."""
    from jobs.engines.vllm.engine import VLLMEngine

    return VLLMEngine(stack)


def type_table() -> TypeTable:
    from jobs.engines.vllm.types import vllm_table

    return vllm_table()


def flag_facts() -> None:
    """No renamed or bounded flags recorded for vLLM's releases yet: its own parser says."""
    return None
