"""A batch ends once (docs/contracts.md "Every batch ends"): `Store.end` writes the terminal state
and the report in one transaction, only from an active state, so whoever ends a batch second (a
worker that took a probe cancelled while it was queued, a runner whose batch its canceller or a
recovery already ended) writes nothing and says nothing; and a call repeated after a commit whose
answer was lost finds its own ending."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobs.batches.dispatch_api import request_cancel
from jobs.batches.planning import submit
from jobs.batches.probing import execute_probe, probe_plan
from jobs.batches.runners import end_batch
from jobs.broker.tasks import _record_failure
from jobs.evidence.probe_input import asked
from jobs.store import BatchRow, Store, UnknownBatch


class Sink:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.sent.append(event)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'end.db'}")


def _queued(store: Store, **request: Any) -> BatchRow:
    plan = probe_plan(dataclasses.replace(asked(sizes=(4096,), iters=1), **request),
                      queue="default")
    row, _ = submit(plan, store=store, requested_by="U_ALICE")
    return row


def test_the_first_ending_stands_and_a_repeated_one_finds_itself(store: Store) -> None:
    row = _queued(store)
    assert store.start(row.id, host="h")
    ended = {"batch": row.id, "state": "done", "value": 1}
    assert store.end(row.id, "done", report=ended)
    assert store.end(row.id, "done", report=ended)  # the same call again: a lost answer's retry
    late = {"batch": row.id, "state": "cancelled"}
    assert not store.end(row.id, "cancelled", report=late, error="too late")
    assert not store.end(row.id, "done", report={**ended, "value": 2})  # another ending
    found = store.get_batch(row.id)
    assert found is not None
    assert (found.state, found.report, found.error) == ("done", ended, None)
    with pytest.raises(ValueError, match="not a terminal batch state"):
        store.end(row.id, "running")
    with pytest.raises(UnknownBatch):
        store.end("b-none", "done", report={})


def test_a_probe_cancelled_while_queued_stays_cancelled_when_its_worker_refuses_it(
        store: Store) -> None:
    """The worker read the probe while it was queued; it was cancelled before the worker's
    check of its env refused it: the cancel stands, and the worker says nothing."""
    row = _queued(store, env=(("PYTHONPATH", "/tmp/planted"),))  # a variable never passed
    assert request_cancel(store, row.id).state == "cancelled"
    sink = Sink()
    assert execute_probe(row, store=store, sink=sink, should_stop=lambda: False) == {}
    found = store.get_batch(row.id)
    assert found is not None and found.state == "cancelled" and found.report is None
    assert sink.sent == []


def test_a_batch_ended_meanwhile_keeps_its_report_when_ended_again_from_outside(
        store: Store) -> None:
    """A recovery or a cancel that read the batch running ends it after its runner did: the
    runner's report and state stand, together."""
    stale = _queued(store)
    assert store.start(stale.id, host="h")
    report = {"batch": stale.id, "state": "done", "probe": {"sizes": []}}
    assert store.end(stale.id, "done", report=report)
    assert end_batch(store, stale, state="cancelled", reason="its runner is gone") == []
    found = store.get_batch(stale.id)
    assert found is not None and (found.state, found.report) == ("done", report)


def test_a_worker_whose_batch_raised_after_its_cancel_keeps_the_cancel(store: Store) -> None:
    """The batch raised in a worker after a cancel had ended it: not failed, not posted again."""
    row = _queued(store)
    assert request_cancel(store, row.id).state == "cancelled"
    sink = Sink()
    runtime = SimpleNamespace(store=store, sink=sink)
    assert _record_failure(runtime, row.id, RuntimeError("boom")) == "ended"  # type: ignore[arg-type]
    found = store.get_batch(row.id)
    assert found is not None and found.state == "cancelled" and sink.sent == []
    other = _queued(store)
    assert _record_failure(runtime, other.id, RuntimeError("boom")) == "failed"  # type: ignore[arg-type]
    ended = store.get_batch(other.id)
    assert ended is not None and (ended.state, ended.error) == ("failed", "boom")
    assert [(e["type"], e["batch"]) for e in sink.sent] == [("batch.finished", other.id)]
