"""`--rerun-known` from the command line and from chat reaches the plan the worker runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.chat.router import Access, Caller, Router
from bot.cli.main import build_parser
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import Store
from tests.bot.conftest import FakeEngine


@pytest.fixture
def router(slack_env: None) -> Iterator[Router]:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Router(dispatcher, Access(), engine_for=lambda name: FakeEngine())
    dispatcher.close()


def test_the_cli_takes_rerun_known() -> None:
    assert build_parser().parse_args(["run", "demo", "--rerun-known"]).rerun_known is True
    assert build_parser().parse_args(["run", "demo"]).rerun_known is False


@pytest.mark.parametrize(("line", "expected"), [
    ("run demo --rerun-known", True), ("run demo", False), ("run --rerun-known demo", True),
])
def test_chat_run_takes_rerun_known(router: Router, line: str, expected: bool) -> None:
    reply = router.handle(line, caller=Caller(user="U_ALICE", channel="C_LAB"))
    assert reply.started is not None, reply.text
    row = router.dispatcher.store.get_batch(reply.started.batch.id)
    assert row is not None and row.plan.rerun_known is expected


def test_chat_retry_takes_rerun_known(router: Router) -> None:
    first = router.handle("run demo", caller=Caller(user="U_ALICE", channel="C_LAB"))
    assert first.started is not None
    reply = router.handle(f"retry {first.started.batch.id} broken --rerun-known",
                          caller=Caller(user="U_ALICE", channel="C_LAB"))
    assert reply.started is not None, reply.text
    row = router.dispatcher.store.get_batch(reply.started.batch.id)
    assert row is not None and row.plan.rerun_known is True
    assert [c.approach for c in row.plan.configs] == ["baseline", "broken"]
