"""The store's schema: the tables Alembic migrates (`jobs/store/migrations`) and row snapshots.

`Batch` and `Run` are SQLAlchemy 2 models; `to_batch_row` fills the frozen snapshot the store
hands out (jobs.core.plans.BatchRow, plain data of the core), so that no ORM object (and no
session) leaks past `jobs.store`; its plan is a `BatchPlan`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column
from sqlalchemy.types import TypeDecorator

from jobs.core.plans import BatchRow, to_plan

# BatchRow is the core's; named here too, where the store's modules have always found it.
__all__ = ["Base", "Batch", "BatchRow", "Run", "SlackPart", "UTCDateTime", "Watch", "WatchAck",
           "WatchChange", "WatchPoint", "to_batch_row"]


class UTCDateTime(TypeDecorator[datetime]):
    """A tz-aware UTC datetime on every backend (SQLite keeps it naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value} given to the store; use UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class Batch(Base):
    __tablename__ = "batches"
    __table_args__ = (
        UniqueConstraint("idempotency_key", name="uq_batches_idempotency_key"),
        Index("ix_batches_state_queue", "state", "queue"),
        Index("ix_batches_preset_created_at", "preset", "created_at", "id"),
        Index("ix_batches_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    preset: Mapped[str] = mapped_column(String(255))
    engine: Mapped[str] = mapped_column(String(64))
    queue: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(32))
    requested_by: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str | None] = mapped_column(String(255))
    thread_ts: Mapped[str | None] = mapped_column(String(64))
    host: Mapped[str | None] = mapped_column(String(255))
    plan: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, server_default=false())
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    report: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # The chat thread's posting state (0002_slack_posts): a restarted bot resumes from it.
    progress_ts: Mapped[str | None] = mapped_column(String(64), nullable=True)
    summary_claim_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    summary_posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Who holds the summary's claim (0007_slack_parts): a dead holder's claim is taken at once.
    summary_claim_owner: Mapped[str | None] = mapped_column(String(255), nullable=True)


class SlackPart(Base):
    """One part of a chat post done exactly once (0007_slack_parts): `pending` while an attempt
    is under way, `done` with Slack's reference once it succeeded."""

    __tablename__ = "slack_parts"

    scope: Mapped[str] = mapped_column(String(255), primary_key=True)
    part: Mapped[str] = mapped_column(String(255), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    ref: Mapped[str | None] = mapped_column(String(255), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("batch_id", "stack", "approach", name="uq_runs_batch_stack_approach"),
        Index("ix_runs_config_key_status", "config_key", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("batches.id", ondelete="CASCADE", name="fk_runs_batch_id_batches")
    )
    position: Mapped[int] = mapped_column(Integer)
    # The stack it ran on (0011_run_stacks): '' for the batch's own, else the stack an upgrade
    # check (`--against NAME`) runs every configuration on again (docs/contracts.md "Stacks").
    stack: Mapped[str] = mapped_column(String(255), server_default="")
    approach: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))
    record: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Known dead ends (0003_run_keys): jobs.core.memory's keys of the run's configuration and
    # stack; null for a record the store could not read when it was migrated.
    config_key: Mapped[str | None] = mapped_column(String(32))
    stack_key: Mapped[str | None] = mapped_column(String(32))
    # A run whose benchmark failed on a server that was up (0009_bench_keys): the key of the
    # bench settings it ran with, which its dead end holds too; null for every other run.
    bench_key: Mapped[str | None] = mapped_column(String(32))
    # The digest's measurements (0005_run_values), so that its history never reads a record:
    # the median on the batch's metric (null without a sample) and the host's hardware.
    value: Mapped[float | None] = mapped_column(Float)
    hardware: Mapped[str | None] = mapped_column(String(255))
    # The report's judgement of the run (0006_run_verdicts), written with the report: its
    # verdict, and its delta_pct when the digest counts it as judged (else null).
    verdict: Mapped[str | None] = mapped_column(String(32))
    judged_delta: Mapped[float | None] = mapped_column(Float)


class Watch(Base):
    """A regression watch (0010_watches): a preset re-run on a schedule, its thread, and the
    last slot the scheduler started (or skipped) and the last batch it started."""

    __tablename__ = "watches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    preset: Mapped[str] = mapped_column(String(255))
    every: Mapped[str] = mapped_column(String(32))
    at: Mapped[str] = mapped_column(String(8))
    queue: Mapped[str] = mapped_column(String(255))
    sets: Mapped[str] = mapped_column(Text)  # JSON list of the `--set` strings
    state: Mapped[str] = mapped_column(String(16))  # active, paused, stopped
    owner: Mapped[str] = mapped_column(String(255))
    channel: Mapped[str | None] = mapped_column(String(255), nullable=True)
    thread_ts: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_slot: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_batch: Mapped[str | None] = mapped_column(String(64), nullable=True)


class _SeriesKey:
    """The columns a watch's point and change share: their id, the watch (its foreign key named
    after the table, as 0010_watches names it), the batch, and the series (a configuration, a
    judged key and a load level)."""

    __tablename__: str

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(String(64))
    approach: Mapped[str] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    load: Mapped[str] = mapped_column(String(255))

    @declared_attr
    def watch_id(cls) -> Mapped[int]:
        return mapped_column(Integer, ForeignKey(
            "watches.id", ondelete="CASCADE", name=f"fk_{cls.__tablename__}_watch_id"))


class WatchPoint(_SeriesKey, Base):
    """One batch's point of one series (0010_watches): a configuration, a judged key and a load
    level ('' without one), its median and range, the time and the stack (JSON)."""

    __tablename__ = "watch_points"
    __table_args__ = (
        UniqueConstraint("watch_id", "batch_id", "approach", "key", "load",
                         name="uq_watch_points_batch_key"),
        Index("ix_watch_points_series", "watch_id", "approach", "key", "load", "at"),
    )

    value: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    high: Mapped[float] = mapped_column(Float)
    lower_is_better: Mapped[bool] = mapped_column(Boolean, server_default=false())
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    stack: Mapped[str] = mapped_column(Text)


class WatchChange(_SeriesKey, Base):
    """A candidate and what became of it (0010_watches): `candidate` while its confirmation
    runs, then `confirmed` or `blip`, then `acknowledged` or `dismissed` by a person; `data` is
    the change's figures and stacks (JSON), `posted_at` when its thread was told."""

    __tablename__ = "watch_changes"
    __table_args__ = (
        UniqueConstraint("watch_id", "batch_id", "approach", "key", "load",
                         name="uq_watch_changes_batch_key"),
        Index("ix_watch_changes_created_at", "created_at"),
    )

    state: Mapped[str] = mapped_column(String(16))
    confirmation: Mapped[str | None] = mapped_column(String(64), nullable=True)
    data: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class WatchAck(Base):
    """Who acknowledged or dismissed a change, and when (0010_watches): one row per change, so
    the first click decides and a second is answered with it."""

    __tablename__ = "watch_acks"

    change_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("watch_changes.id", ondelete="CASCADE",
                            name="fk_watch_acks_change_id"), primary_key=True)
    action: Mapped[str] = mapped_column(String(16))
    user: Mapped[str] = mapped_column(String(255))
    at: Mapped[datetime] = mapped_column(UTCDateTime())


def to_batch_row(batch: Batch) -> BatchRow:
    return BatchRow(
        id=batch.id, preset=batch.preset, engine=batch.engine, queue=batch.queue,
        state=batch.state, requested_by=batch.requested_by, channel=batch.channel,
        thread_ts=batch.thread_ts, host=batch.host, plan=to_plan(json.loads(batch.plan)),
        idempotency_key=batch.idempotency_key, cancel_requested=bool(batch.cancel_requested),
        lease_owner=batch.lease_owner, lease_expires_at=batch.lease_expires_at,
        created_at=batch.created_at, started_at=batch.started_at, finished_at=batch.finished_at,
        report=None if batch.report is None else json.loads(batch.report), error=batch.error,
    )
