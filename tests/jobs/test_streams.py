"""The Redis Stream sink and its readers, against a real Redis (a stream of each test's own)."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from jobs.broker.sink import StreamSink
from jobs.broker.streams import StreamReader, StreamSubscription, connect
from jobs.core.events import make_event
from jobs.engines.procs import free_port
from tests.standin.tcp_proxy import TcpProxy

URL = "redis://127.0.0.1:6379/0"
pytestmark = pytest.mark.redis


@pytest.fixture
def stream() -> Iterator[str]:
    client = connect(URL, timeout_s=1)
    try:
        client.ping()
    except redis.RedisError:
        if os.environ.get("SPECBENCH_REQUIRE_REDIS") == "1":
            pytest.fail("no Redis at 127.0.0.1:6379")
        pytest.skip("no Redis at 127.0.0.1:6379")
    name = f"specbench:test-events:{secrets.token_hex(6)}"
    yield name
    client.delete(name)


def test_a_subscription_sees_only_later_events_of_its_batch(stream: str) -> None:
    sink = StreamSink(connect(URL), stream=stream)
    sink.emit(make_event("batch.started", "b-old"))
    assert sink.flush(timeout=5)  # emit returns at once; the sink's thread sends it
    sub = StreamSubscription(connect(URL), batch="b-1", stream=stream)
    for n in range(3):
        sink.emit(make_event("approach.phase", "b-2", n=n))
        sink.emit(make_event("approach.phase", "b-1", n=n))
    got = [sub.get(timeout=1) for _ in range(3)]
    assert [(e["batch"], e["n"]) for e in got if e] == [("b-1", 0), ("b-1", 1), ("b-1", 2)]
    assert sub.get(timeout=0.1) is None
    sub.close()


def test_a_restarted_reader_gets_what_it_did_not_acknowledge(stream: str) -> None:
    sink = StreamSink(connect(URL), stream=stream)
    reader = StreamReader(connect(URL), group="bot", consumer="bot-1", stream=stream)
    for n in range(3):
        sink.emit(make_event("batch.finished", f"b-{n}"))
    assert sink.flush(timeout=5)
    first = reader.read(timeout=1)
    assert [e.event["batch"] for e in first] == ["b-0", "b-1", "b-2"]
    reader.ack(first[0].id)  # b-0 handled; the bot "crashes" before handling the others
    reborn = StreamReader(connect(URL), group="bot", consumer="bot-1", stream=stream)
    assert [e.event["batch"] for e in reborn.read(timeout=1)] == ["b-1", "b-2"]
    seen: list[str] = []
    assert reborn.process(lambda event: seen.append(event["batch"]), timeout=1) == 2
    assert seen == ["b-1", "b-2"]
    assert reborn.read(timeout=0.2) == []
    sink.emit(make_event("batch.finished", "b-3"))
    assert sink.flush(timeout=5)
    assert [e.event["batch"] for e in reborn.read(timeout=1)] == ["b-3"]


def test_a_failing_handler_leaves_the_event_pending(stream: str) -> None:
    sink = StreamSink(connect(URL), stream=stream)
    reader = StreamReader(connect(URL), group="bot", consumer="c", stream=stream)
    sink.emit(make_event("batch.finished", "b-1"))
    assert sink.flush(timeout=5)

    def boom(event: dict[str, object]) -> None:
        raise RuntimeError("slack is down")

    with pytest.raises(RuntimeError):
        reader.process(boom, timeout=1)
    again = StreamReader(connect(URL), group="bot", consumer="c", stream=stream)
    assert [e.event["batch"] for e in again.read(timeout=1)] == ["b-1"]


def test_entries_of_a_dead_consumer_are_claimed_by_another(stream: str) -> None:
    sink = StreamSink(connect(URL), stream=stream)
    dead = StreamReader(connect(URL), group="bot", consumer="dead", stream=stream)
    sink.emit(make_event("batch.finished", "b-1"))
    assert sink.flush(timeout=5)
    assert len(dead.read(timeout=1)) == 1
    time.sleep(0.2)
    other = StreamReader(connect(URL), group="bot", consumer="other", stream=stream,
                         claim_idle_s=0.1)
    assert [e.event["batch"] for e in other.read(timeout=1)] == ["b-1"]


def test_a_reader_survives_its_stream_vanishing(stream: str) -> None:
    reader = StreamReader(connect(URL), group="bot", consumer="c", stream=stream)
    connect(URL).delete(stream)  # what a Redis without persistence looks like after a restart
    assert reader.read(timeout=0.1) == []
    sink = StreamSink(connect(URL), stream=stream)
    sink.emit(make_event("batch.finished", "b-9"))
    assert sink.flush(timeout=5)
    assert [e.event["batch"] for e in reader.read(timeout=1)] == ["b-9"]


def test_an_unreachable_redis_never_blocks_an_emit() -> None:
    sink = StreamSink(connect(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.2))
    for n in range(50):
        sink.emit(make_event("approach.phase", "b-1", n=n))  # must not raise, nor wait
    sink.emit(make_event("batch.finished", "b-1"))
    assert not sink.flush(timeout=0.5) and sink.is_away
    assert sink.queued == 2  # the latest phase and the end, in order
    sink.close(timeout=0.1)
    assert sink.dropped == 2
    sub = StreamSubscription(connect(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.2))
    assert sub.get(timeout=0.3) is None


def test_a_frozen_redis_never_blocks_an_emit() -> None:
    """An emit never waits on Redis: with Redis frozen (connections accepted, nothing answered)
    and a socket timeout of ten minutes, 51 emits return while it is still frozen; an emit that
    did the network round trip itself would hang until the test's timeout."""
    with TcpProxy("127.0.0.1", 6379) as proxy:
        proxy.hang()
        sink = StreamSink(connect(f"redis://127.0.0.1:{proxy.port}/0", timeout_s=600))
        emitted = threading.Event()

        def emit_all() -> None:
            for n in range(50):
                sink.emit(make_event("approach.phase", "b-1", n=n))
            sink.emit(make_event("batch.finished", "b-1"))
            emitted.set()

        threading.Thread(target=emit_all, daemon=True).start()
        assert emitted.wait(timeout=120), "an emit waited on the frozen Redis"
        assert not sink.flush(timeout=0.2)  # nothing got through: Redis is still frozen
        proxy.restore()
        assert sink.flush(timeout=60)  # once it answers, the coalesced events go out
        sink.close(timeout=5)
