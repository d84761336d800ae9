"""The stacks a batch runs on (docs/contracts.md "Stacks"): `--stack NAME` and `--against NAME`
checked against the host's stacks file, and the engines made on them.

Names are checked wherever the host's file is (the command's process in embedded mode, and any
process with SPECBENCH_STACKS set); interpreters only where the batch runs (`here`), since the
bot's host may have none of them. The worker checks both again when it takes the batch: what it
refuses ends the batch `refused` (exit 2 for `run`), nothing started.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from jobs.core.engine_info import describe
from jobs.core.plans import BatchPlan
from jobs.core.stacks import StackSpec, load_stacks, need_stacks
from jobs.engines import get_engine
from jobs.engines.base import Engine
from jobs.engines.stack_check import check_stack
from jobs.errors import StackError

CURRENT = "the current stack"  # how messages name a batch's stack when it names none


@dataclass(frozen=True)
class Stacks:
    """A plan's stacks as the host's file has them: its own (None: the engine's interpreter
    setting) and the one an upgrade check runs against (None: not an upgrade check)."""

    current: StackSpec | None = None
    against: StackSpec | None = None


def current_label(plan: BatchPlan) -> str:
    return plan.stack or CURRENT


def resolve(plan: BatchPlan, *, here: bool = True) -> Stacks:
    """The plan's stacks from this host's file (StackError: exit 2); `here`: this process runs
    the batch, so the interpreters must run here too."""
    if plan.stack is None and plan.against is None:
        return Stacks()
    if plan.against is not None and plan.sweep is not None:
        raise StackError("--against runs every configuration on two stacks; a sweep's points "
                         "are chosen as it runs: run the sweep on each stack with --stack")
    flag = "--stack" if plan.stack is not None else "--against"
    found = need_stacks(f"{flag} {plan.stack or plan.against}")
    current = None if plan.stack is None else found.get(plan.stack, engine=plan.engine)
    against = None if plan.against is None else found.get(plan.against, engine=plan.engine)
    if against is not None and _same(current, against, engine=plan.engine):
        shown = current.name if current is not None else (
            f"{describe(plan.engine).python_env}={describe(plan.engine).python()}")
        raise StackError(f"--against {against.name} is the current stack ({shown}): an upgrade "
                         "check needs another stack")
    if here:
        for spec in (current, against):
            if spec is not None:
                check_stack(spec)
    return Stacks(current=current, against=against)


def check_names(plan: BatchPlan, *, embedded: bool) -> None:
    """Plan time: the stack names against the host's file where this process has it (always in
    embedded mode, where it is the worker's), the interpreters only in embedded mode."""
    if plan.stack is None and plan.against is None:
        return
    if embedded or load_stacks() is not None:
        resolve(plan, here=embedded)


def _same(current: StackSpec | None, against: StackSpec, *, engine: str) -> bool:
    if current is not None:
        return current.name == against.name or (
            _where(current.python) == _where(against.python) and current.env == against.env)
    return not against.env and _where(describe(engine).python()) == _where(against.python)


def _where(python: str) -> str:
    """An interpreter's path, links not followed: two venvs' pythons link to one base python."""
    found = shutil.which(python) if os.sep not in python else python
    return os.path.abspath(found or python)


def engine_on(engine: str, spec: StackSpec | None, *, default: Engine | None = None) -> Engine:
    """The engine on a stack, or `default` (the caller's) on the engine's own interpreter."""
    if spec is None and default is not None:
        return default
    return get_engine(engine, stack=spec)


@dataclass
class Engines:
    """A batch's engines: on its current stack (the stack's, else `given`, else the caller's
    `engine_for`, else one made here) and, for an upgrade check, on the stack it checks. Those
    made here are closed here, when the batch ends (a warm helper process goes)."""

    plan: BatchPlan
    found: Stacks
    given: Engine | None = None
    engine_for: Callable[[str], Engine] | None = None
    made: list[Engine] = field(default_factory=list)

    def __enter__(self) -> Engines:
        engine = self.plan.engine
        if self.found.current is not None:
            self.current = self._made(engine_on(engine, self.found.current))
        elif self.given is not None:
            self.current = self.given
        elif self.engine_for is not None:
            self.current = self.engine_for(engine)
        else:
            self.current = self._made(get_engine(engine))
        self.against = None if self.found.against is None else self._made(
            engine_on(engine, self.found.against))
        return self

    def _made(self, engine: Engine) -> Engine:
        self.made.append(engine)
        return engine

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for each in self.made:
            close = getattr(each, "close", None)
            if callable(close):
                close()
