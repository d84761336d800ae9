"""What an engine that runs in an interpreter of its own shares (each served engine's): the
interpreter and environment it runs with, its engine.yaml's interpreter setting or one of the
host's stacks (docs/contracts.md "Stacks"), and the release its preflight found."""

from __future__ import annotations

from jobs.core.engine_info import EngineInfo
from jobs.core.stacks import StackSpec


class OnStack:
    """The base of an engine run by `python` with `env`: a stack's, else its own."""

    info: EngineInfo  # the engine's facts (its engine.yaml), set by each engine

    def __init__(self, stack: StackSpec | None = None) -> None:
        # The release this engine's preflight checked the batch against: its runs are spelled
        # for it without asking again.
        self._version: str | None = None
        self.stack = stack

    @property
    def python(self) -> str:
        return self.stack.python if self.stack is not None else self.info.python()

    @property
    def env(self) -> dict[str, str]:
        return dict(self.stack.env) if self.stack is not None else {}
