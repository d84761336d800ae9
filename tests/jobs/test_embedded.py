"""Embedded mode: batches on the in-process worker thread, with the stand-in SGLang."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher, Subscription
from jobs.batches.planning import plan_batch
from jobs.core.events import Event
from jobs.store import Store
from tests.jobs.test_distributed import pipeline_preset
from tests.standin.harness import Standin, make_standin


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    for name, second in (("standin", "0.2"), ("standin-slow", "3600")):
        (config_copy / "presets" / f"{name}.yaml").write_text(
            pipeline_preset(name, reps=1, tag=setup.tag, second_startup=second))
    return setup


@pytest.fixture
def dispatcher(tmp_path: Path, standin: Standin) -> Iterator[EmbeddedDispatcher]:
    d = EmbeddedDispatcher(Store(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    yield d
    d.close()


def until(sub: Subscription, done: Callable[[Event], bool], timeout: float = 30) -> list[Event]:
    events: list[Event] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = sub.get(timeout=0.2)
        if event is not None:
            events.append(event)
            if done(event):
                return events
    raise AssertionError(f"timed out; got {[e['type'] for e in events]}")


def ended(batch: str) -> Callable[[Event], bool]:
    return lambda e: e["batch"] == batch and e["type"] in ("batch.finished", "batch.cancelled")


@pytest.mark.timeout(180)
def test_a_batch_runs_with_its_events_in_order(
    dispatcher: EmbeddedDispatcher, standin: Standin
) -> None:
    sub = dispatcher.subscribe()
    submitted = dispatcher.submit(plan_batch("standin"), requested_by="U1",
                                  idempotency_key="evt-1")
    again = dispatcher.submit(plan_batch("standin"), requested_by="U1", idempotency_key="evt-1")
    events = until(sub, ended(submitted.batch.id))
    assert not again.created and again.batch.id == submitted.batch.id
    assert len(dispatcher.store.list_batches()) == 1
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["batch.queued", "batch.started"] and kinds[-1] == "batch.finished"
    finished = [e["approach"] for e in events if e["type"] == "approach.finished"]
    assert finished == ["baseline", "second", "third", "baseline (last)"]  # bracketed
    phases = [e["phase"] for e in events if e["type"] == "approach.phase" and e["index"] == 1]
    assert phases == ["preflight", "launching", "ready", "warmup", "result", "repetition",
                      "result", "stopping"]
    assert events[-1]["report"]["results"][0]["verdict"] == "improved"
    standin.assert_clean()


@pytest.mark.timeout(180)
def test_cancel_ends_the_batch_while_its_server_still_loads(
    dispatcher: EmbeddedDispatcher, standin: Standin
) -> None:
    sub = dispatcher.subscribe()
    batch = dispatcher.submit(plan_batch("standin-slow"), requested_by="U1").batch.id
    until(sub, lambda e: e["type"] == "approach.phase" and e["index"] == 2
          and e["phase"] == "launching")
    dispatcher.cancel(batch)
    # the second's server takes an hour to load: only the cancel ends the batch in time
    events = until(sub, ended(batch), timeout=120)
    assert events[-1]["type"] == "batch.cancelled"
    assert not [e for e in events if e["type"] == "approach.phase" and e["index"] == 2
                and e["phase"] == "ready"]
    statuses = [(r.approach, r.status) for r in dispatcher.store.records(batch)]
    assert statuses == [("baseline", "ok"), ("second", "cancelled"), ("third", "skipped")]
    standin.assert_clean()


@pytest.mark.timeout(180)
def test_two_batches_run_one_after_the_other(
    dispatcher: EmbeddedDispatcher, standin: Standin
) -> None:
    sub = dispatcher.subscribe()
    one = dispatcher.submit(plan_batch("standin"), requested_by="U1")
    two = dispatcher.submit(plan_batch("standin"), requested_by="U2")
    assert (one.position, two.position) == (1, 2)
    until(sub, ended(two.batch.id), timeout=40)
    first = dispatcher.store.get_batch(one.batch.id)
    second = dispatcher.store.get_batch(two.batch.id)
    assert first is not None and second is not None and first.finished_at is not None
    assert second.started_at is not None and second.started_at >= first.finished_at


def test_a_queued_batch_cancelled_before_it_starts_never_runs(
    dispatcher: EmbeddedDispatcher, standin: Standin
) -> None:
    sub = dispatcher.subscribe()
    one = dispatcher.submit(plan_batch("standin-slow"), requested_by="U1").batch.id
    two = dispatcher.submit(plan_batch("standin"), requested_by="U1").batch.id
    assert dispatcher.cancel(two).state == "cancelled"
    dispatcher.cancel(one)
    until(sub, ended(one), timeout=60)
    assert dispatcher.store.records(two) == []
