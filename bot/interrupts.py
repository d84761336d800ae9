"""SIGINT, SIGTERM and SIGHUP for the commands that own a batch's run (`run`, `console`).

The first of them raises KeyboardInterrupt in the main thread, as Python's own SIGINT does, so
that the command unwinds through its `finally` blocks: the batch is cancelled, and in embedded
mode the dispatcher's `close` stops its servers before the process exits (docs/contracts.md "Every
batch ends"); a closed terminal (SIGHUP) or `timeout`/systemd (SIGTERM) end the same way as Ctrl-C.
A later signal never raises (that could abandon the clean-up half way); it calls the `hurry`
callbacks instead, which SIGKILL the servers at once rather than wait for a clean stop.

A command that waits on its batch in a loop of its own (bot/cli/waiting.py) takes the first
signal in that loop instead (`Trap.deferred`): raised, it could land between reading an event and
acting on it, or inside a read of the store, and the command would end without its report.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Trap:
    """Installs the handlers on entry (main thread only; elsewhere it does nothing), restores
    the previous ones on exit. `signal` names the first signal received."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.count = 0
        self._hurry: list[Callable[[], None]] = []
        self._previous: dict[int, Any] = {}
        self._deferred = False

    def on_again(self, callback: Callable[[], None]) -> None:
        """Call `callback` on every signal after the first (it must only set a flag)."""
        self._hurry.append(callback)

    def __enter__(self) -> Trap:
        if threading.current_thread() is threading.main_thread():
            for signum in STOPPING:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Within it the first signal raises nothing: it is counted and named, for a loop that
        wakes at least every half second to read `count` and stop its batch itself."""
        self._deferred = True
        try:
            yield
        finally:
            self._deferred = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            self.signal = signal.Signals(signum).name
            if not self._deferred:
                raise KeyboardInterrupt(self.signal)
            return
        for callback in self._hurry:
            callback()

    @property
    def reason(self) -> str:
        """Why the command is stopping, for the batch's record."""
        return f"stopped by {self.signal}" if self.signal else "exited"


STOP_WAIT_S = 20.0  # how long `run` waits for its cancelled batch to end before it kills


def close_context(ctx: Any, *, trap: Trap, command: str) -> None:
    """Close a command's context; its embedded dispatcher first ends the batches it has not
    finished, `cancelled` with the reason ("specbench run stopped by SIGTERM"), their servers
    stopped, and a later signal makes it SIGKILL them at once."""
    from jobs.batches.dispatch import EmbeddedDispatcher

    made = vars(ctx).get("dispatcher")  # made (and so maybe running something) by this command
    if isinstance(made, EmbeddedDispatcher):
        close_dispatcher(made, trap=trap, command=command)
    ctx.close()  # a second close of the dispatcher has nothing left to do


def close_dispatcher(dispatcher: Any, *, trap: Trap, command: str) -> None:
    from jobs.batches.dispatch import EmbeddedDispatcher

    if isinstance(dispatcher, EmbeddedDispatcher):
        trap.on_again(dispatcher.hurry)
        dispatcher.close(reason=f"specbench {command} {trap.reason}")
    else:
        dispatcher.close()
