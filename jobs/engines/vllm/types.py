"""vLLM's flag types (config/engines/vllm/flag_types.yaml, read from the real release by
scripts/vllm_flags.py)."""

from __future__ import annotations

from pathlib import Path

from jobs.engines.flag_types import TypeTable, load_types

FILE = "engines/vllm/flag_types.yaml"


def vllm_table(path: Path | None = None) -> TypeTable:
    return load_types(FILE, path, engine="vLLM")
