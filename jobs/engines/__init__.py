"""Engines: run one configuration of a batch and return its run record."""

from __future__ import annotations

from jobs.core.errors import UserError
from jobs.engines.base import Engine


def get_engine(name: str) -> Engine:
    """The engine by name; heavy imports (torch, transformers) stay inside the engine's run."""
    if name == "sglang":
        from jobs.engines.sglang import SGLangEngine

        return SGLangEngine()
    if name == "local":
        from jobs.engines.local import LocalEngine

        return LocalEngine()
    raise UserError(f"unknown engine {name!r}; known engines: local, sglang")
