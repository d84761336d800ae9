"""The thread against an in-memory poster: coalescing, the end, uploads, redaction, resume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.thread.messages import Message, Upload
from bot.thread.thread_hub import ThreadHub
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import plan_batch
from jobs.charts.summary import to_chart_png
from jobs.core.advice import analyze, load_remedies
from jobs.core.events import make_event
from jobs.core.plans import BatchPlan
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.store import Store
from tests.bot.conftest import PLANTED, FakeEngine
from tests.conftest import make_plan, make_record


class MemoryPoster:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, dict[str, Any]]] = []
        self._ts = 0

    def _add(self, kind: str, **fields: Any) -> None:
        self.calls.append((kind, time.monotonic(), fields))

    async def post(self, *, channel: str, thread_ts: str | None, message: Message) -> str:
        self._ts += 1
        self._add("post", ts=str(self._ts), thread_ts=thread_ts, message=message)
        return str(self._ts)

    async def update(self, *, channel: str, ts: str, message: Message) -> None:
        self._add("update", ts=ts, message=message)

    async def upload(self, *, channel: str, thread_ts: str, files: list[Upload]) -> None:
        self._add("upload", thread_ts=thread_ts, files=files)

    async def ephemeral(self, *, channel: str, user: str, message: Message,
                        thread_ts: str | None = None) -> None:
        self._add("ephemeral", message=message)

    async def find_reply(self, *, channel: str, thread_ts: str,
                         metadata: dict[str, Any] | None = None,
                         filename: str | None = None) -> str | None:
        for kind, _, f in self.calls:
            message = f.get("message")
            if kind == "post" and metadata and message is not None \
                    and message.metadata == metadata:
                return str(f["ts"])
            if kind == "upload" and any(u.filename == filename for u in f["files"]):
                return str(f["thread_ts"])
        return None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, _, f in self.calls if k == kind]


@pytest.fixture
def dispatcher(slack_env: None) -> Iterator[EmbeddedDispatcher]:
    d = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield d
    d.close()


def test_progress_updates_coalesce_to_one_per_interval(dispatcher: EmbeddedDispatcher) -> None:
    """Forty intermediate states in 0.4 s make at most a few updates, the last state shown."""
    poster = MemoryPoster()
    plan = plan_batch("demo")
    row, _ = dispatcher.store.create_batch(
        batch_id="b-coal", preset="demo", engine="local", queue="default",
        requested_by="U_ALICE", plan=plan)

    async def scenario() -> None:
        from jobs.batches.dispatch import Submitted

        hub = ThreadHub(dispatcher, poster, interval=0.3)
        hub.start()
        task = hub.open(Submitted(row, True, 1, 1), channel="C_LAB")
        await asyncio.sleep(0.05)
        for i in range(40):
            dispatcher.channel.emit(make_event(
                "approach.phase", row.id, approach="faster", index=2, of=4,
                phase="repetition", rep=i + 1, reps=40))
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        task.cancel()
        await hub.close()

    asyncio.run(scenario())
    updates = [f for f in poster.of("update") if f["ts"] == "2"]
    stamps = [t for k, t, f in poster.calls if k == "update" and f["ts"] == "2"]
    assert 1 <= len(updates) <= 3
    assert all(b - a >= 0.28 for a, b in zip(stamps, stamps[1:], strict=False))
    assert "rep 40/40" in updates[-1]["message"].text


def test_a_finished_batch_posts_summary_uploads_and_headline_once(
    dispatcher: EmbeddedDispatcher,
) -> None:
    poster = MemoryPoster()

    async def scenario() -> None:
        hub = ThreadHub(dispatcher, poster, interval=0.1)
        hub.start()
        submitted = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE",
                                      channel="C_LAB")
        task = hub.open(submitted, channel="C_LAB")
        await asyncio.wait_for(task, 10)
        again = await hub.catch_up()  # nothing left to post
        assert again == []
        await hub.close()

    asyncio.run(scenario())
    posts = poster.of("post")
    assert [p["thread_ts"] for p in posts] == [None, "1", "1"]
    summary = posts[2]["message"]
    assert "Key achievement: faster" in summary.text and summary.fallback
    uploads = poster.of("upload")  # one file each: each upload is a part of its own
    files = [f for u in uploads for f in u["files"]]
    assert [len(u["files"]) for u in uploads] == [1, 1]
    names = [f.filename for f in files]
    assert names[0].endswith("-chart.png") and names[1].endswith("-runs.jsonl")
    assert "1 improved" in poster.of("update")[-1]["message"].text
    everything = repr(poster.calls) + "".join(
        f.content.decode(errors="replace") for f in files)
    assert PLANTED not in everything


class RefusingEngine(FakeEngine):
    """The host's engine refuses the baseline's flags when the batch starts."""

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {"baseline": "main.py: error: unrecognized arguments: --no-such-flag"}


@pytest.mark.parametrize(("preset", "named"), [("eagle3-vllm", "this vLLM"),
                                               ("demo", "this local engine")])
def test_a_batch_its_host_refuses_says_so_naming_its_engine(
    slack_env: None, preset: str, named: str,
) -> None:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: RefusingEngine())
    poster = MemoryPoster()

    async def scenario() -> None:
        hub = ThreadHub(dispatcher, poster, interval=0.1)
        hub.start()
        submitted = dispatcher.submit(plan_batch(preset), requested_by="U_ALICE",
                                      channel="C_LAB")
        await asyncio.wait_for(hub.open(submitted, channel="C_LAB"), 10)
        await hub.close()

    try:
        asyncio.run(scenario())
    finally:
        dispatcher.close()
    ending = poster.of("post")[-1]["message"].text
    assert "refused by the worker's preflight" in ending and "--no-such-flag" in ending
    assert f"`--set` a value {named} accepts" in ending, ending
    assert "SGLang" not in ending


def test_catch_up_resumes_from_the_store(dispatcher: EmbeddedDispatcher) -> None:
    """A batch whose thread was opened by a bot that died is finished by the next one."""
    submitted = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE", channel="C_LAB")
    store = dispatcher.store
    store.set_thread(submitted.batch.id, "C_LAB", "100.1")
    store.set_progress_ts(submitted.batch.id, "100.2")
    deadline = time.monotonic() + 60
    while store.get_batch(submitted.batch.id).state != "done":  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    poster = MemoryPoster()

    async def scenario() -> list[str]:
        hub = ThreadHub(dispatcher, poster, interval=0.1)
        hub.start()
        resumed = await hub.catch_up()
        await hub.wait(submitted.batch.id)
        await hub.close()
        return resumed

    assert asyncio.run(scenario()) == [submitted.batch.id]
    (summary,) = poster.of("post")
    assert summary["thread_ts"] == "100.1"
    assert {u["ts"] for u in poster.of("update")} == {"100.1", "100.2"}
    assert not store.claim_summary(submitted.batch.id)  # posted: nobody may post it again


def test_the_summary_claim_is_exclusive_until_it_expires(slack_env: None) -> None:
    store = Store()
    store.create_batch(batch_id="b-1", preset="p", engine="local", queue="q",
                       requested_by="u", plan=make_plan())
    assert store.claim_summary("b-1", ttl_s=0.2)
    assert not store.claim_summary("b-1")
    time.sleep(0.25)
    assert store.claim_summary("b-1")
    store.mark_summary_posted("b-1")
    time.sleep(0.01)
    assert not store.claim_summary("b-1", ttl_s=0.0)


def test_the_chart_is_a_png_and_none_without_data() -> None:
    records = [make_record("baseline", samples=[80, 82]), make_record("a", samples=[90, 91]),
               make_record("b", samples=None, status="failed")]
    report = analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies())
    png = to_chart_png(report, records)
    assert png is not None and png.startswith(b"\x89PNG")
    unmeasured = [make_record("baseline", samples=None, status="failed"), records[2]]
    report = analyze(unmeasured, metric=Metric(), rules=load_rules(), remedies=load_remedies())
    assert to_chart_png(report, unmeasured) is None


class MemoryFeed:
    """A durable feed over the embedded channel: entries get IDs, acks are recorded with the
    time they were made."""

    def __init__(self, dispatcher: EmbeddedDispatcher) -> None:
        self._sub = dispatcher.subscribe()
        self._n = 0
        self.given: dict[str, Any] = {}
        self.acked: dict[str, float] = {}

    def read(self, timeout: float) -> list[Any]:
        from jobs.broker.streams import StreamEntry

        event = self._sub.get(timeout=timeout)
        if event is None:
            return []
        self._n += 1
        entry = StreamEntry(f"{self._n}-0", event)
        self.given[entry.id] = event
        return [entry]

    def ack(self, *entry_ids: str) -> None:
        for entry_id in entry_ids:
            assert entry_id in self.given and entry_id not in self.acked, entry_id
            self.acked[entry_id] = time.monotonic()

    def close(self) -> None:
        self._sub.close()

    def acked_types(self) -> list[str]:
        return [self.given[i]["type"] for i in self.acked]


def test_a_durable_feed_is_acked_only_once_each_event_is_handled(
    dispatcher: EmbeddedDispatcher,
) -> None:
    """Progress events are acked once applied; the end only once the summary is posted; a
    batch no chat thread follows (launched from the command line) is acked at once."""
    poster = MemoryPoster()
    feed = MemoryFeed(dispatcher)

    async def scenario() -> None:
        hub = ThreadHub(dispatcher, poster, interval=0.1, feed=feed)
        hub.start()
        cli = dispatcher.submit(plan_batch("demo"), requested_by="alice")  # no channel
        submitted = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE",
                                      channel="C_LAB")
        task = hub.open(submitted, channel="C_LAB")
        await asyncio.wait_for(task, 20)
        deadline = time.monotonic() + 60
        while len(feed.acked) < len(feed.given) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await hub.close()
        ends = {i: e for i, e in feed.given.items() if e["type"] == "batch.finished"}
        by_batch = {e["batch"]: i for i, e in ends.items()}
        summary_at = next(t for k, t, f in poster.calls
                          if k == "post" and f["message"].fallback)
        assert feed.acked[by_batch[submitted.batch.id]] >= summary_at
        assert feed.acked[by_batch[cli.batch.id]] < summary_at  # nobody's thread: acked at once

    asyncio.run(scenario())
    assert set(feed.acked) == set(feed.given)
    assert len(poster.of("upload")) == 2  # the chart and the run records, once each


def test_a_hub_closed_mid_batch_leaves_the_rest_unacked(dispatcher: EmbeddedDispatcher) -> None:
    poster = MemoryPoster()
    feed = MemoryFeed(dispatcher)
    FakeEngine.delay = 0.3

    async def scenario() -> str:
        hub = ThreadHub(dispatcher, poster, interval=0.1, feed=feed)
        hub.start()
        submitted = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE",
                                      channel="C_LAB")
        hub.open(submitted, channel="C_LAB")
        deadline = time.monotonic() + 60
        while "approach.phase" not in feed.acked_types():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await hub.close()
        return submitted.batch.id

    try:
        batch = asyncio.run(scenario())
        deadline = time.monotonic() + 60
        while dispatcher.store.get_batch(batch).state != "done":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        FakeEngine.delay = 0.02
    assert "batch.finished" not in feed.acked_types()
    assert not poster.of("upload")
