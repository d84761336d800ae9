"""`Store.save_report` writes the report and the judged columns on the batch's runs in one
transaction (issue 19): when the second part fails, neither is written. On SQLite and on
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
    return "b-1"


def test_a_report_and_its_verdicts_are_written_together(store: Store, batch: str) -> None:  # noqa: F811
    store.save_report(batch, report_of(eagle3="faster"))
    row = store.get_batch(batch)
    assert row is not None and row.report == report_of(eagle3="faster")
    assert judged(store, batch)["eagle3"][0] == "faster"


def test_an_unwritable_verdict_leaves_neither_written(store: Store, batch: str) -> None:  # noqa: F811
    """A verdict the database driver cannot bind (a mapping) fails the verdicts' update, after
    the report's own update ran in the same transaction: both are rolled back."""
    store.save_report(batch, report_of(eagle3="faster"))
    with pytest.raises((SQLAlchemyError, TypeError)):
        store.save_report(batch, report_of(eagle3={"not": "a verdict"}))
    row = store.get_batch(batch)
    assert row is not None and row.report == report_of(eagle3="faster")  # the first one kept
    assert judged(store, batch)["eagle3"][0] == "faster"


def test_a_database_error_in_the_verdicts_leaves_no_report(store: Store, batch: str) -> None:  # noqa: F811
    """The verdicts' UPDATE refused by the database side (an error raised as it is sent):
    the report's UPDATE, sent first, is not kept."""
    sent: list[str] = []

    def refuse_verdicts(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement.split()[0])
        if statement.startswith("UPDATE runs SET verdict"):
            raise RuntimeError("injected: the verdicts' update failed")

    event.listen(store._engine, "before_cursor_execute", refuse_verdicts)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            store.save_report(batch, report_of(eagle3="faster"))
    finally:
        event.remove(store._engine, "before_cursor_execute", refuse_verdicts)
    assert "UPDATE" in sent  # the report's update ran before the failure
    row = store.get_batch(batch)
    assert row is not None and row.report is None
    assert judged(store, batch) == {"baseline": (None, None), "eagle3": (None, None)}
    store.save_report(batch, report_of(eagle3="faster"))  # and the store still writes
    assert judged(store, batch)["eagle3"][0] == "faster"
