"""The store: batches and their run records, in SQLite by default and PostgreSQL in production.

Every public write is its own transaction, so a crash mid-batch loses at most the run in flight.
The schema belongs to Alembic (`jobs/store/migrations`): a `Store` migrates lazily, once, on its first
use, or when `migrate()` is called. Datetimes are tz-aware UTC on both backends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    CursorResult,
    Result,
    and_,
    create_engine,
    delete,
    event,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from jobs import settings
from jobs.core.records import RunRecord, to_record
from jobs.store.schema import Batch, Run, UTCDateTime, to_batch_row
from jobs.store.schema import BatchRow as BatchRow  # the snapshot type the store hands out

BATCH_STATES = ("queued", "running", "done", "failed", "cancelled")
TERMINAL_STATES = frozenset({"done", "failed", "cancelled"})
# Run statuses that leave an approach to run again when an interrupted batch resumes.
RERUN_STATUSES = frozenset({"cancelled", "skipped"})

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_MIGRATION_LOCK = 0x5BE7C4  # PostgreSQL advisory lock key held while migrating
_IMMEDIATE = "specbench_immediate"  # execution option: open SQLite write transactions eagerly


class UnknownBatch(LookupError):
    """A write named a batch the store does not hold (a bug in the caller, not user input)."""




class Store:
    """Batches and run records behind one SQLAlchemy URL (default: `settings.database_url()`)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or settings.database_url()
        self._engine = _create_engine(self.url)
        self._writer = self._engine.execution_options(**{_IMMEDIATE: True})
        self._migrated = False
        self._lock = threading.Lock()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    def migrate(self) -> None:
        """`alembic upgrade head`, idempotent; concurrent callers queue on a lock, then no-op."""
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        for attempt in (1, 2):
            try:
                with self._writer.begin() as connection:
                    _lock_for_migration(connection)
                    config.attributes["connection"] = connection
                    command.upgrade(config, "head")
                break
            except (OperationalError, ProgrammingError, IntegrityError):
                if attempt == 2:  # a lost "already exists" race succeeds on the retry
                    raise
        self._migrated = True

    def create_batch(
        self, *, batch_id: str, preset: str, engine: str, queue: str, requested_by: str,
        plan: dict[str, Any], channel: str | None = None, thread_ts: str | None = None,
        idempotency_key: str | None = None, created_at: datetime | None = None,
    ) -> tuple[BatchRow, bool]:
        """A new queued batch and True; or, when the idempotency key is taken, that batch and
        False (race-safe: the UNIQUE constraint decides)."""
        if idempotency_key is not None and (existing := self._by_key(idempotency_key)):
            return existing, False
        batch = Batch(
            id=batch_id, preset=preset, engine=engine, queue=queue, state="queued",
            requested_by=requested_by, channel=channel, thread_ts=thread_ts,
            plan=json.dumps(plan), idempotency_key=idempotency_key, cancel_requested=False,
            created_at=created_at or _now(),
        )
        try:
            with self._write() as session:
                session.add(batch)
                session.flush()
                row = to_batch_row(batch)
        except IntegrityError:
            if idempotency_key is None or not (existing := self._by_key(idempotency_key)):
                raise
            return existing, False
        return row, True

    def get_batch(self, batch_id: str) -> BatchRow | None:
        with self._read() as session:
            batch = session.get(Batch, batch_id)
            return None if batch is None else to_batch_row(batch)

    def latest_batch(self) -> BatchRow | None:
        query = select(Batch).order_by(Batch.created_at.desc(), Batch.id.desc()).limit(1)
        with self._read() as session:
            batch = session.scalars(query).first()
            return None if batch is None else to_batch_row(batch)

    def list_batches(
        self, *, since: datetime | None = None, states: Sequence[str] | None = None,
        queue: str | None = None, limit: int | None = None,
    ) -> list[BatchRow]:
        """Matching batches, oldest first (with `limit`: the oldest N)."""
        query = select(Batch).order_by(Batch.created_at, Batch.id)
        if since is not None:
            query = query.where(Batch.created_at >= since)
        if states is not None:
            query = query.where(Batch.state.in_(list(states)))
        if queue is not None:
            query = query.where(Batch.queue == queue)
        if limit is not None:
            query = query.limit(limit)
        with self._read() as session:
            return [to_batch_row(batch) for batch in session.scalars(query)]

    def set_state(
        self, batch_id: str, state: str, *, error: str | None = None, host: str | None = None,
        only_from: Sequence[str] | None = None,
    ) -> bool:
        """Move a batch to `state` (stamping started_at/finished_at); with `only_from`, only
        from those states: False when it was elsewhere. Raises UnknownBatch."""
        if state not in BATCH_STATES:
            raise ValueError(f"unknown batch state {state!r}")
        now = _now()
        values: dict[str, Any] = {"state": state}
        if state == "running":
            values["started_at"] = func.coalesce(Batch.started_at, literal(now, UTCDateTime()))
        values["finished_at"] = now if state in TERMINAL_STATES else None
        if error is not None:
            values["error"] = error
        if host is not None:
            values["host"] = host
        query = update(Batch).where(Batch.id == batch_id).values(values)
        if only_from is not None:
            query = query.where(Batch.state.in_(list(only_from)))
        with self._write() as session:
            if _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1:
                return True
            if session.get(Batch, batch_id) is None:
                raise UnknownBatch(batch_id)
            return False

    def request_cancel(self, batch_id: str) -> bool:
        """Flag the batch for cancelling; False when there is no such batch."""
        return self._update(batch_id, cancel_requested=True)

    def is_cancel_requested(self, batch_id: str) -> bool:
        with self._read() as session:
            query = select(Batch.cancel_requested).where(Batch.id == batch_id)
            return bool(session.scalar(query))

    def set_thread(self, batch_id: str, channel: str, thread_ts: str) -> None:
        if not self._update(batch_id, channel=channel, thread_ts=thread_ts):
            raise UnknownBatch(batch_id)

    def save_report(self, batch_id: str, report: dict[str, Any]) -> None:
        if not self._update(batch_id, report=json.dumps(report)):
            raise UnknownBatch(batch_id)

    def delete_batch(self, batch_id: str) -> bool:
        """Delete a batch and its runs; False when there was none."""
        query = delete(Batch).where(Batch.id == batch_id)
        with self._write() as session:
            return _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1

    def count_ahead(self, row: BatchRow) -> int:
        """Running batches and older queued ones on the row's queue, counted in SQL."""
        query = (
            select(func.count())
            .select_from(Batch)
            .where(
                Batch.queue == row.queue,
                Batch.id != row.id,
                or_(Batch.state == "running",
                    and_(Batch.state == "queued", Batch.created_at <= row.created_at)),
            )
        )
        with self._read() as session:
            return int(session.scalar(query) or 0)

    def put_record(self, record: RunRecord, *, position: int) -> None:
        """Store one run; a record for the same (batch, approach) replaces the earlier one."""
        self.put_records([(position, record)])

    def put_records(self, records: Sequence[tuple[int, RunRecord]]) -> None:
        """Store (position, record) pairs in one transaction: all of them or none."""
        rows = {(r.batch, r.approach): _run_values(position, r) for position, r in records}
        if not rows:
            return
        with self._write() as session:
            session.execute(_upsert_runs(self._engine.dialect.name), list(rows.values()))

    def records(self, batch_id: str) -> list[RunRecord]:
        """The batch's run records in preset order."""
        query = (
            select(Run.approach, Run.record)
            .where(Run.batch_id == batch_id)
            .order_by(Run.position, Run.id)
        )
        with self._read() as session:
            rows = session.execute(query).all()
        return [to_record(json.loads(data), where=f"{batch_id}/{name}") for name, data in rows]

    def finished_approaches(self, batch_id: str) -> set[str]:
        """Approaches with a record that need not run again (see RERUN_STATUSES)."""
        query = select(Run.approach).where(
            Run.batch_id == batch_id, Run.status.not_in(list(RERUN_STATUSES))
        )
        with self._read() as session:
            return set(session.scalars(query))

    def try_acquire_lease(self, batch_id: str, owner: str, ttl_s: float) -> bool:
        """Take the batch's lease if it is free, ours, or expired (one atomic UPDATE)."""
        now = _now()
        query = (
            update(Batch)
            .where(
                Batch.id == batch_id,
                or_(
                    Batch.lease_owner.is_(None),
                    Batch.lease_owner == owner,
                    Batch.lease_expires_at.is_(None),
                    Batch.lease_expires_at <= now,
                ),
            )
            .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1

    def renew_lease(self, batch_id: str, owner: str, ttl_s: float) -> bool:
        """Extend a lease we still hold; False when another owner has taken it."""
        query = (
            update(Batch)
            .where(Batch.id == batch_id, Batch.lease_owner == owner)
            .values(lease_expires_at=_now() + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1

    def release_lease(self, batch_id: str, owner: str) -> None:
        """Give the lease up, if we still hold it."""
        query = (
            update(Batch)
            .where(Batch.id == batch_id, Batch.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None)
        )
        with self._write() as session:
            session.execute(query, execution_options=_NO_SYNC)

    # --- the chat thread's posting state (bot.thread.batch_thread) ---

    def set_progress_ts(self, batch_id: str, progress_ts: str) -> None:
        if not self._update(batch_id, progress_ts=progress_ts):
            raise UnknownBatch(batch_id)

    def slack_posts(self, batch_id: str) -> SlackPosts | None:
        query = select(Batch.progress_ts, Batch.summary_posted_at).where(Batch.id == batch_id)
        with self._read() as session:
            row = session.execute(query).first()
        return None if row is None else SlackPosts(row[0], row[1])

    def claim_summary(self, batch_id: str, ttl_s: float = 300.0) -> bool:
        """Take the right to post the batch's summary: True for one caller at a time, until it
        is posted (a claim left by a poster that died expires after `ttl_s`)."""
        now = _now()
        query = (
            update(Batch)
            .where(
                Batch.id == batch_id,
                Batch.summary_posted_at.is_(None),
                or_(Batch.summary_claim_until.is_(None), Batch.summary_claim_until <= now),
            )
            .values(summary_claim_until=now + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1

    def release_summary_claim(self, batch_id: str) -> None:
        self._update(batch_id, summary_claim_until=None)

    def mark_summary_posted(self, batch_id: str) -> None:
        if not self._update(batch_id, summary_posted_at=_now()):
            raise UnknownBatch(batch_id)

    def unposted_threads(self) -> list[BatchRow]:
        """Batches with a chat thread whose summary is not posted yet, oldest first."""
        query = (
            select(Batch)
            .where(Batch.thread_ts.is_not(None), Batch.summary_posted_at.is_(None))
            .order_by(Batch.created_at, Batch.id)
        )
        with self._read() as session:
            return [to_batch_row(batch) for batch in session.scalars(query)]

    def _by_key(self, idempotency_key: str) -> BatchRow | None:
        with self._read() as session:
            query = select(Batch).where(Batch.idempotency_key == idempotency_key)
            batch = session.scalars(query).first()
            return None if batch is None else to_batch_row(batch)

    def _update(self, batch_id: str, **values: Any) -> bool:
        query = update(Batch).where(Batch.id == batch_id).values(values)
        with self._write() as session:
            return _rowcount(session.execute(query, execution_options=_NO_SYNC)) == 1

    def _ensure_migrated(self) -> None:
        if self._migrated:
            return
        with self._lock:
            if not self._migrated:
                self.migrate()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        self._ensure_migrated()
        with Session(self._engine) as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        self._ensure_migrated()
        with Session(self._writer) as session, session.begin():
            yield session


_NO_SYNC = {"synchronize_session": False}


def _now() -> datetime:
    return datetime.now(UTC)


def _create_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    memory = parsed.database in (None, "", ":memory:")
    if not memory:
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False},
        poolclass=StaticPool if memory else None,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling skips BEGIN for DDL and SELECT; we emit it ourselves.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 30000")  # the worker thread and the CLI share the file
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    # Writers take the lock up front: a deferred transaction upgraded later can fail at once.
    immediate = connection.get_execution_options().get(_IMMEDIATE)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _lock_for_migration(connection: Connection) -> None:
    """Serialise concurrent migrators; on SQLite, BEGIN IMMEDIATE already has."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})


def _run_values(position: int, record: RunRecord) -> dict[str, Any]:
    return {
        "batch_id": record.batch, "position": position, "approach": record.approach,
        "role": record.role, "status": record.status, "record": record.to_json(),
        "started_at": _parse_time(record.started_at),
        "finished_at": _parse_time(record.finished_at),
    }


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None  # the record keeps the original text; the column is only an index aid
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _upsert_runs(dialect: str) -> Any:
    if dialect == "postgresql":
        pg = postgresql.insert(Run)
        return pg.on_conflict_do_update(
            index_elements=[Run.batch_id, Run.approach],
            set_={name: pg.excluded[name] for name in _RUN_UPDATES},
        )
    if dialect == "sqlite":
        lite = sqlite.insert(Run)
        return lite.on_conflict_do_update(
            index_elements=[Run.batch_id, Run.approach],
            set_={name: lite.excluded[name] for name in _RUN_UPDATES},
        )
    raise NotImplementedError(f"the store supports SQLite and PostgreSQL, not {dialect}")


_RUN_UPDATES = ("position", "role", "status", "record", "started_at", "finished_at")


def _rowcount(result: Result[Any]) -> int:
    return cast(CursorResult[Any], result).rowcount


@dataclass(frozen=True)
class SlackPosts:
    """What the chat thread of a batch has posted so far."""

    progress_ts: str | None
    summary_posted_at: datetime | None
