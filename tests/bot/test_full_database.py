"""A full PostgreSQL volume leaves the chat answered (issue 32, item 9).

A real `specbench bot --http` in distributed mode (a real Redis), its store a PostgreSQL database
whose every file lies on a small tmpfs (a tablespace of its own: tests/standin/postgres.py), the
Slack stand-in. Once the volume is full every write fails with DiskFull (SQLSTATE 53100) while
reads go on: `help`, `status` and `show` are answered all the same, and their bookkeeping (each
answer's record, bot.slack.replies) is written once space is freed, without a second answer.

Skipped where a tmpfs cannot be mounted for the server (not root), without PostgreSQL or Redis;
the same holds without privileges on SQLite, the embedded bot's store, made full by its own
page limit (`PRAGMA max_page_count`: "database or disk is full").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from bot.thread.messages import Message
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.execution import build_report
from jobs.store import Store
from jobs.store.posts import PartState
from tests.bot.conftest import BotServer
from tests.bot.test_distributed_bot import Bot
from tests.conftest import make_plan, make_record
from tests.jobs.test_distributed import Site, make_site, redis_db, wait_until
from tests.standin.postgres import SmallVolume, small_volume
from tests.standin.slack_api import Call, SlackStandin

ANSWER_S = 60.0  # only the test's patience: the answers are awaited before space is freed
LINES = ("help", "status", "show")
ANSWERS = ("chat.postEphemeral", "chat.postMessage")


@pytest.fixture
def volume() -> Iterator[SmallVolume]:
    with small_volume() as made:
        yield made


@pytest.fixture
def site(tmp_path: Path, volume: SmallVolume) -> Iterator[Site]:
    gen = redis_db()
    made = make_site(tmp_path, next(gen), {})
    made.env["SPECBENCH_DATABASE_URL"] = volume.url
    yield made
    next(gen, None)


def _a_finished_batch(url: str) -> str:
    """A batch `show` finds: stored with its records and report, ended done."""
    plan = make_plan()
    records = [make_record("baseline", batch="b-full", preset="eagle3"),
               make_record("eagle3", batch="b-full", preset="eagle3",
                           samples=(120.0, 121.0, 122.0),
                           change={"server_args": {"speculative-algorithm": "EAGLE3"}})]
    with Store(url) as store:
        store.migrate()
        store.create_batch(batch_id="b-full", preset="eagle3", engine="local", queue="default",
                           requested_by="U_ALICE", plan=plan)
        store.put_records(list(enumerate(records)))
        store.end("b-full", "done", report={**build_report(records, plan), "state": "done"})
    return "b-full"


def _answers(standin: SlackStandin, since: int) -> list[Call]:
    return [c for c in standin.recorded()[since:] if c.method in ANSWERS]


def _request_parts(volume: SmallVolume) -> list[tuple[str, str, str]]:
    with volume.admin.connect() as connection:
        return [tuple(row) for row in connection.execute(text(
            "SELECT scope, part, state FROM slack_parts WHERE scope LIKE 'request:%'"))]


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_full_database_volume_leaves_help_status_and_show_answered(
    site: Site, volume: SmallVolume,
) -> None:
    batch = _a_finished_batch(volume.url)
    standin = SlackStandin().start()
    bot = Bot(site, standin)
    try:
        volume.fill()
        with pytest.raises(Exception, match="No space left on device"):  # full, as a disk is
            with volume.admin.connect() as connection:
                connection.execute(text("CREATE TABLE specbench_probe (i int); "
                                        "INSERT INTO specbench_probe VALUES (1)"))
        before = len(standin.recorded())
        for line in LINES:
            assert bot.command(line).status_code == 200
        answers = wait_until(lambda: len(got := _answers(standin, before)) >= 3 and got,
                             timeout=ANSWER_S, what="an answer to each command")
        texts = " ".join(Message(text=c.body.get("text") or "").text for c in answers)
        assert "run PRESET" in texts  # help
        assert batch in texts  # show: the latest batch
        assert _request_parts(volume) == [], "nothing could be recorded on a full volume"
        volume.free()
        # the bookkeeping, retried in the background, is written once space is back
        wait_until(lambda: sorted(p for _, p, s in _request_parts(volume) if s == "done")
                   == ["reply"] * 3, timeout=30, what="the answers' records")
        assert len(_answers(standin, before)) == 3, "each command answered once"
        assert "not recorded" not in bot.output()
    finally:
        bot.stop()
        standin.stop()


def _fill_sqlite(store: Store) -> Callable[[], None]:
    """Make the store's SQLite database full (no page may be added: SQLITE_FULL, "database or
    disk is full"), its pages filled to the brim; the function that frees it."""
    store.migrate()  # the schema first: a full database could not hold it
    engine = store._engine
    with engine.connect() as connection:
        pages = connection.execute(text("PRAGMA page_count")).scalar()

    def limit(dbapi: Any, _: Any) -> None:
        cursor = dbapi.cursor()
        cursor.execute(f"PRAGMA max_page_count = {pages}")
        cursor.close()

    event.listen(engine, "connect", limit)
    engine.dispose()  # every connection from now on has the limit
    with pytest.raises(OperationalError, match="database or disk is full"):
        for n in range(10_000):
            store.begin_part(f"filler:{n:05d}", "x" * 40)
    assert len(store.slack_parts("filler:00000")) == 1, "filled with parts, not refused at once"

    def free() -> None:
        event.remove(engine, "connect", limit)
        engine.dispose()

    return free


@pytest.mark.timeout(180)
def test_a_full_sqlite_store_leaves_the_embedded_bot_answering(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher,
) -> None:
    store = dispatcher.store
    free = _fill_sqlite(store)
    before = len(standin.recorded())
    for line in LINES:
        assert bot.command(line).status_code == 200
    answers = wait_until(lambda: len(got := _answers(standin, before)) >= 3 and got,
                         timeout=ANSWER_S, what="an answer to each command")
    assert "run PRESET" in " ".join(c.body.get("text") or "" for c in answers)  # help
    free()
    wait_until(lambda: len([p for scope, p in _sqlite_parts(store) if p.is_done
                            and scope.startswith("request:")]) == 3,
               timeout=30, what="the answers' records")
    assert len(_answers(standin, before)) == 3, "each command answered once"


def _sqlite_parts(store: Store) -> list[tuple[str, PartState]]:
    with store._engine.connect() as connection:
        scopes = [row[0] for row in connection.execute(text(
            "SELECT DISTINCT scope FROM slack_parts WHERE scope LIKE 'request:%'"))]
    return [(scope, part) for scope in scopes for part in store.slack_parts(scope).values()]
