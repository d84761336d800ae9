"""The command router: parsing, access, replies as data (nothing is sent)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.router import Access, Caller, Router, parse_options, split_line
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.errors import UserError
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import PLANTED, FakeEngine

ALICE = Caller(user="U_ALICE", channel="C_LAB")


@pytest.fixture
def router(slack_env: None) -> Iterator[Router]:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Router(dispatcher, Access(users=frozenset({"U_ALICE", "U_BOB"}),
                                    admins=frozenset({"U_ADMIN"})),
                 engine_for=lambda name: FakeEngine())
    dispatcher.close()


def wait_ended(router: Router, batch_id: str) -> None:
    deadline = time.monotonic() + 60
    while router.dispatcher.store.get_batch(batch_id).state not in TERMINAL_STATES:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize(
    "line", ["/specbench run demo", "run demo", "RUN demo", "specbench run demo"])
def test_the_prefix_is_optional(line: str) -> None:
    assert split_line(line) == ["run", "demo"]


def test_options_parse_sets_and_reps() -> None:
    first, sets, reps, rest = parse_options(
        ["demo", "--set", "a=1", "--set=b=0.80", "--reps", "3"], usage="u")
    assert (first, sets, reps, rest) == ("demo", ["a=1", "b=0.80"], 3, ["demo"])
    with pytest.raises(UserError, match="whole number"):
        parse_options(["demo", "--reps", "x"], usage="u")
    with pytest.raises(UserError, match="unknown option"):
        parse_options(["demo", "--nope"], usage="u")


def test_unknown_input_gets_usage_and_a_did_you_mean(router: Router) -> None:
    reply = router.handle("/specbench stauts", caller=ALICE)
    assert reply.ephemeral and reply.exit_code == 2 and reply.started is None
    assert "Did you mean `status`?" in reply.text and "Usage:" in reply.text
    assert "did you mean 'demo'" in router.handle("run dmeo", caller=ALICE).text


def test_run_submits_with_the_callers_identity_and_key(router: Router) -> None:
    reply = router.handle("run demo --set mem-fraction-static=0.7 --reps 1", caller=ALICE,
                          idempotency_key="k-1")
    assert reply.started is not None and reply.started.created
    row = reply.started.batch
    assert (row.requested_by, row.channel, row.idempotency_key) == ("U_ALICE", "C_LAB", "k-1")
    assert row.plan.reps == 1 and row.plan.overrides == {"mem-fraction-static": 0.7}
    again = router.handle("run demo", caller=ALICE, idempotency_key="k-1")
    assert again.started is not None and not again.started.created
    wait_ended(router, row.id)


def test_a_refused_user_starts_nothing(router: Router) -> None:
    reply = router.handle("run demo", caller=Caller(user="U_EVE", channel="C_LAB"))
    assert reply.started is None and reply.ephemeral and "refused" in reply.text
    assert router.dispatcher.store.list_batches() == []
    console = router.handle("help", caller=Caller(user="U_EVE", surface="console"))
    assert console.exit_code == 0


def test_bad_knobs_are_refused_and_nothing_is_stored(router: Router) -> None:
    reply = router.handle("run demo --set tp-size=2", caller=ALICE)
    assert reply.exit_code == 2 and "tp-size" in reply.text
    assert router.dispatcher.store.list_batches() == []


def test_cancel_is_for_the_launcher_or_an_admin(router: Router) -> None:
    FakeEngine.delay = 0.3
    try:
        row = router.handle("run demo", caller=ALICE).started.batch  # type: ignore[union-attr]
        bob = router.handle(f"cancel {row.id}", caller=Caller(user="U_BOB", channel="C_LAB"))
        assert "refused" in bob.text and not router.dispatcher.store.is_cancel_requested(row.id)
        mine = router.handle("cancel", caller=ALICE)  # the caller's latest batch
        assert "cancel requested" in mine.text and not mine.ephemeral
        wait_ended(router, row.id)
    finally:
        FakeEngine.delay = 0.02
    assert "already ended" in router.handle(
        f"cancel {row.id}", caller=Caller(user="U_ADMIN")).text


def test_retry_runs_the_named_approaches_with_the_baseline(router: Router) -> None:
    first = router.handle("run demo", caller=ALICE).started.batch  # type: ignore[union-attr]
    wait_ended(router, first.id)
    reply = router.handle(f"retry {first.id} noisy,faster --reps 3", caller=ALICE)
    assert reply.started is not None
    plan = reply.started.batch.plan
    assert [c.approach for c in plan.configs] == ["baseline", "faster", "noisy"]
    assert plan.reps == 3
    assert "no approach 'nosy'" in router.handle(f"retry {first.id} nosy", caller=ALICE).text
    wait_ended(router, reply.started.batch.id)


def test_show_status_history_presets_digest_and_help(router: Router) -> None:
    assert "No batch is running" in router.handle("status", caller=ALICE).text
    assert "no batch stored yet" in router.handle("show", caller=ALICE).text
    row = router.handle("run demo", caller=ALICE).started.batch  # type: ignore[union-attr]
    wait_ended(router, row.id)
    shown = router.handle("show", caller=ALICE)
    assert "Key achievement: faster" in shown.text and shown.blocks
    assert PLANTED not in shown.text and PLANTED not in str(shown.blocks)
    assert row.id in router.handle("history", caller=ALICE).text
    assert "demo" in router.handle("presets", caller=ALICE).text
    digest = router.handle("digest", caller=ALICE)
    assert "1 done" in digest.text and "faster" in digest.text and not digest.ephemeral
    assert digest.blocks
    assert "retry BATCH" in router.handle("help", caller=ALICE).text


def test_a_command_that_meets_a_database_outage_is_answered_not_dropped(
    slack_env: None, tmp_path: Path
) -> None:
    (tmp_path / "a-folder.db").mkdir()  # SQLite cannot open a folder: the database is away
    dispatcher = EmbeddedDispatcher(Store(f"sqlite:///{tmp_path / 'a-folder.db'}"))
    try:
        reply = Router(dispatcher).handle("status", caller=ALICE)
        assert reply.exit_code == 1 and reply.ephemeral
        assert "cannot reach the database right now" in reply.text
        assert Router(dispatcher).handle("help", caller=ALICE).exit_code == 0
    finally:
        dispatcher.close()
