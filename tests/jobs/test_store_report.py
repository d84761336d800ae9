"""`Store.end` writes the batch's terminal state, its report and the judged columns on its runs
in one transaction (issue 19; docs/contracts.md "Every batch ends"): when the judged columns
fail, none of it is written and the batch is still running, to be ended again. On SQLite and on
PostgreSQL (the `url` fixture of test_store)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import SQLAlchemyError

from jobs.store import Store
from jobs.store.schema import Run
from tests.jobs.test_store import make_record, new_batch
from tests.jobs.test_store import postgres_url as postgres_url  # noqa: F401 - fixture
from tests.jobs.test_store import store as store  # noqa: F401 - fixture
from tests.jobs.test_store import url as url  # noqa: F401 - fixture


def judged(store: Store, batch_id: str) -> dict[str, tuple[Any, Any]]:
    """Each run's (verdict, judged_delta) columns."""
    with store._read() as session:
        rows = session.execute(select(Run.approach, Run.verdict, Run.judged_delta)
                               .where(Run.batch_id == batch_id)).all()
    return {name: (verdict, delta) for name, verdict, delta in rows}


def report_of(**verdicts: Any) -> dict[str, Any]:
    return {"batch": "b-1", "preset": "eagle3",
            "results": [{"approach": name, "verdict": verdict, "delta_pct": 12.5,
                         "median": 91.0, "baseline": 81.0}
                        for name, verdict in verdicts.items()]}


@pytest.fixture
def batch(store: Store) -> str:  # noqa: F811 - the imported fixture
    new_batch(store, "b-1")
    store.put_records([(0, make_record("b-1", "baseline")), (1, make_record("b-1", "eagle3"))])
    assert store.start("b-1", host="gpu-1")
    return "b-1"


def unended(store: Store, batch: str) -> None:  # noqa: F811
    """Nothing of an ending written: still running, no report, no judged column."""
    row = store.get_batch(batch)
    assert row is not None and (row.state, row.report, row.finished_at) == ("running", None, None)
    assert judged(store, batch) == {"baseline": (None, None), "eagle3": (None, None)}


def test_a_report_and_its_verdicts_are_written_together(store: Store, batch: str) -> None:  # noqa: F811
    assert store.end(batch, "done", report=report_of(eagle3="faster"))
    row = store.get_batch(batch)
    assert row is not None and (row.state, row.report) == ("done", report_of(eagle3="faster"))
    assert judged(store, batch)["eagle3"][0] == "faster"


def test_an_unwritable_verdict_leaves_neither_written(store: Store, batch: str) -> None:  # noqa: F811
    """A verdict the database driver cannot bind (a mapping) fails the verdicts' update, after
    the batch's own update (state and report) ran in the same transaction: both are rolled
    back, and the batch can still be ended."""
    with pytest.raises((SQLAlchemyError, TypeError)):
        store.end(batch, "done", report=report_of(eagle3={"not": "a verdict"}))
    unended(store, batch)
    assert store.end(batch, "done", report=report_of(eagle3="faster"))
    assert judged(store, batch)["eagle3"][0] == "faster"


def test_a_database_error_in_the_verdicts_leaves_no_report(store: Store, batch: str) -> None:  # noqa: F811
    """The verdicts' UPDATE refused by the database side (an error raised as it is sent):
    the batch's UPDATE (state and report), sent first, is not kept."""
    sent: list[str] = []

    def refuse_verdicts(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement.split()[0])
        if statement.startswith("UPDATE runs SET verdict"):
            raise RuntimeError("injected: the verdicts' update failed")

    event.listen(store._engine, "before_cursor_execute", refuse_verdicts)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            store.end(batch, "done", report=report_of(eagle3="faster"))
    finally:
        event.remove(store._engine, "before_cursor_execute", refuse_verdicts)
    assert "UPDATE" in sent  # the batch's update ran before the failure
    unended(store, batch)
    assert store.end(batch, "done", report=report_of(eagle3="faster"))  # the store still writes
    assert judged(store, batch)["eagle3"][0] == "faster"
