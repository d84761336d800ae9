"""The worker's event sink against a Redis of the test's own that is killed and started again:
an emit never waits, progress is coalesced while Redis is away, every other event is kept in
order and arrives once Redis answers again (issue 20, item 4)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.broker.sink import StreamSink
from jobs.broker.streams import STREAM, connect
from jobs.core.events import make_event
from tests.standin.redis_server import RedisServer

pytestmark = pytest.mark.redis


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    made = RedisServer(tmp_path)
    yield made
    made.kill()


def sent(server: RedisServer) -> list[tuple[str, str, object]]:
    entries = server.client().xrange(STREAM)
    events = [json.loads(fields[b"event"]) for _, fields in entries]
    return [(e["type"], e["batch"], e.get("n")) for e in events]


def wait_sent(server: RedisServer, count: int, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(sent(server)) < count:
        assert time.monotonic() < deadline, f"only {sent(server)} arrived"
        time.sleep(0.05)


def test_while_redis_is_away_progress_is_coalesced_and_the_rest_arrives_later(
    server: RedisServer,
) -> None:
    sink = StreamSink(connect(server.url, timeout_s=0.5))
    sink.emit(make_event("batch.started", "b-1"))
    assert sink.flush(timeout=5)
    server.kill()  # (that an emit never waits on Redis: test_streams, a frozen Redis)
    for n in range(20):
        sink.emit(make_event("approach.phase", "b-1", n=n))
        sink.emit(make_event("approach.phase", "b-2", n=n))
        if n == 9:
            sink.emit(make_event("approach.finished", "b-1", n=n))
    sink.emit(make_event("batch.finished", "b-1"))
    deadline = time.monotonic() + 60
    while not sink.is_away:  # the publisher has tried, failed and coalesced
        assert time.monotonic() < deadline
        time.sleep(0.02)
    sink.emit(make_event("approach.phase", "b-2", n=99))
    assert sink.queued <= 5
    server.start()  # empty: no persistence
    wait_sent(server, 4)
    assert sink.flush(timeout=10)
    got = sent(server)
    assert ("approach.finished", "b-1", 9) in got and got.index(
        ("approach.finished", "b-1", 9)) < got.index(("batch.finished", "b-1", None))
    assert [g for g in got if g[1] == "b-2"] == [("approach.phase", "b-2", 99)]
    assert len([g for g in got if g[0] == "approach.phase"]) <= 3
    sink.emit(make_event("approach.phase", "b-3", n=1))  # healthy again: nothing coalesced
    sink.emit(make_event("approach.phase", "b-3", n=2))
    assert sink.flush(timeout=5)
    assert [g for g in sent(server) if g[1] == "b-3"] == [("approach.phase", "b-3", 1),
                                                         ("approach.phase", "b-3", 2)]
    sink.close()


def test_a_long_outage_keeps_the_queue_bounded_dropping_progress_first(
    server: RedisServer,
) -> None:
    sink = StreamSink(connect(server.url, timeout_s=0.5), max_queued=10)
    server.kill()
    for n in range(8):
        sink.emit(make_event("approach.finished", "b-1", n=n))
    for n in range(8):
        sink.emit(make_event("approach.phase", f"b-{n}", n=n))  # one per batch: not coalesced
    assert sink.queued == 10 and sink.dropped == 6
    sink.emit(make_event("batch.finished", "b-1"))
    assert sink.queued == 10
    server.start()
    assert sink.flush(timeout=15)
    got = sent(server)
    assert [g[0] for g in got].count("approach.finished") == 8
    assert got[-1] == ("batch.finished", "b-1", None)
    sink.close()


def test_close_gives_up_within_its_timeout(server: RedisServer) -> None:
    sink = StreamSink(connect(server.url, timeout_s=0.5))
    server.kill()
    sink.emit(make_event("batch.finished", "b-1"))
    closed = threading.Event()
    threading.Thread(target=lambda: (sink.close(timeout=0.5), closed.set()),
                     daemon=True).start()
    assert closed.wait(timeout=120), "close waited on the dead Redis past its timeout"
    assert sink.dropped == 1
