"""`specbench run`'s wait when no end event ever comes: the store's word ends it, with the
usual outcome for each terminal state (a unit test of `bot.cli.waiting.run_and_wait`;
tests/bot/test_redis_away has the real processes)."""

from __future__ import annotations

import argparse
import io
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from bot.cli import waiting
from jobs.core.events import Event
from jobs.errors import InfraError, UserError


class Silent:
    """A subscription whose events never come (Redis went away)."""

    def get(self, timeout: float) -> Event | None:
        time.sleep(min(timeout, 0.05))
        return None

    def close(self) -> None:
        pass


@dataclass
class StoreSays:
    state: str
    report: dict[str, Any] | None = None
    error: str | None = None
    asked: list[float] = field(default_factory=list)

    def get_batch(self, batch_id: str) -> Any:
        self.asked.append(time.monotonic())
        return SimpleNamespace(id=batch_id, state=self.state, report=self.report,
                               error=self.error)


def wait(monkeypatch: pytest.MonkeyPatch, store: StoreSays) -> tuple[int, str, str]:
    from jobs.commands import run

    monkeypatch.setattr(waiting, "STORE_POLL_S", 0.2)
    monkeypatch.setattr(waiting, "END_GRACE_S", 0.2)
    row = SimpleNamespace(id="b-quiet", state="queued")
    monkeypatch.setattr(run, "submit", lambda ctx, plan: SimpleNamespace(
        submitted=SimpleNamespace(batch=row, live_workers=1)))
    monkeypatch.setattr("jobs.core.messages.render_report",
                        lambda report, fmt: f"REPORT {report['batch']} ({fmt})\n")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    dispatcher = SimpleNamespace(subscribe=lambda: Silent(), store=store,
                                 cancel=lambda batch_id: None)
    ctx = SimpleNamespace(dispatcher=dispatcher)
    args = argparse.Namespace(timeout=120.0, format="text")  # past it: InfraError
    from bot import interrupts

    with interrupts.Trap() as trap:
        code = waiting.run_and_wait(ctx, SimpleNamespace(queue="default"), args, trap=trap)
    return code, out.getvalue(), err.getvalue()


def test_a_done_batch_ends_the_wait_with_its_stored_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = wait(monkeypatch, StoreSays("done", report={"batch": "b-quiet"}))
    assert code == 0 and out == "REPORT b-quiet (text)\n"  # not the timeout's InfraError
    assert "from the store" in err


def test_a_refused_batch_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="refused: no such flag --nope"):
        wait(monkeypatch, StoreSays("refused", error="no such flag --nope"))


def test_a_failed_batch_without_a_report_is_an_infrastructure_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(InfraError, match="ended failed without a report: worker died"):
        wait(monkeypatch, StoreSays("failed", error="worker died"))


def test_an_unreachable_store_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.exc import OperationalError

    class Flaky(StoreSays):
        def get_batch(self, batch_id: str) -> Any:
            if len(self.asked) < 2:
                self.asked.append(time.monotonic())
                raise OperationalError("SELECT", {}, ConnectionRefusedError("refused"))
            return super().get_batch(batch_id)

    store = Flaky("done", report={"batch": "b-quiet"})
    code, out, _ = wait(monkeypatch, store)
    assert code == 0 and "REPORT" in out and len(store.asked) >= 3


def test_the_console_posts_the_end_from_the_store_when_its_thread_misses_it(
    monkeypatch: pytest.MonkeyPatch, slack_env: None
) -> None:
    """A thread that never sees its batch end (no end event, no poll) does not hold the console:
    once the store has said so for END_GRACE_S, the console ends the thread from the store."""
    import asyncio

    from bot import console as console_module
    from bot.chat.router import Access, Router
    from bot.thread.batch_thread import BatchThread
    from jobs.batches.dispatch import EmbeddedDispatcher
    from jobs.store import Store
    from tests.bot.conftest import FakeEngine

    async def deaf(self: BatchThread) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(BatchThread, "follow", deaf)
    monkeypatch.setattr(console_module, "STORE_POLL_S", 0.2)
    monkeypatch.setattr(console_module, "END_GRACE_S", 0.5)
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    out = io.StringIO()
    console = console_module.Console(dispatcher, out)
    console.router = Router(dispatcher, Access(), lambda name: FakeEngine())  # its preflight
    try:
        code = asyncio.run(console.run_line("run demo", timeout=120))  # past it: InfraError
    finally:
        dispatcher.close()
    assert code == 0
    assert "Key achievement: faster" in out.getvalue()
    assert out.getvalue().count("Key achievement") == 1
