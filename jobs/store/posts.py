"""The store's record of what chat posts have done (`bot.thread.batch_thread`, the digest).

A restarted bot resumes from it: it edits the progress message it posted before, and finishes a
thread whichever bot gets there first (`claim_summary`), part by part (`slack_parts`): each of
Slack's side effects (the summary, each upload, the parent's edit) is recorded as `pending`
before it is attempted and `done`, with Slack's reference, as soon as it succeeded, so that a
successor does what is left and nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from jobs.store.database import NO_SYNC, Database, UnknownBatch, now, rowcount
from jobs.store.schema import Batch, BatchRow, SlackPart, to_batch_row

CLAIM_TTL_S = 30.0  # a claim lapses this long after its holder last renewed it


@dataclass(frozen=True)
class SlackPosts:
    """What the chat thread of a batch has posted so far."""

    progress_ts: str | None
    summary_posted_at: datetime | None


@dataclass(frozen=True)
class PartState:
    """One recorded part: `pending` (an attempt may or may not have reached Slack) or `done`."""

    state: str
    ref: str | None

    @property
    def is_done(self) -> bool:
        return self.state == "done"


class Posts(Database):
    """The progress message's ts, the summary's claim and posting, and each part's record."""

    def set_progress_ts(self, batch_id: str, progress_ts: str) -> None:
        if not self._update(batch_id, progress_ts=progress_ts):
            raise UnknownBatch(batch_id)

    def slack_posts(self, batch_id: str) -> SlackPosts | None:
        query = select(Batch.progress_ts, Batch.summary_posted_at).where(Batch.id == batch_id)
        with self._read() as session:
            row = session.execute(query).first()
        return None if row is None else SlackPosts(row[0], row[1])

    def claim_summary(
        self, batch_id: str, ttl_s: float = CLAIM_TTL_S, *, owner: str | None = None,
        is_dead: Callable[[str], bool] | None = None,
    ) -> bool:
        """Take the right to finish the batch's thread: True for one holder at a time, until it
        is posted. A claim is free when none is held, it lapsed (its holder renews it every few
        seconds while it works: `renew_summary_claim`), it is `owner`'s own, or `is_dead` says
        its holder is a process that died (taken over at once, whatever its expiry)."""
        at = now()
        query = (select(Batch.summary_posted_at, Batch.summary_claim_owner,
                        Batch.summary_claim_until)
                 .where(Batch.id == batch_id).with_for_update())
        with self._write() as session:
            row = session.execute(query).first()
            if row is None or row[0] is not None:
                return False
            holder, until = row[1], row[2]
            free = (until is None or until <= at or (owner is not None and holder == owner)
                    or (holder is not None and is_dead is not None and is_dead(holder)))
            if free:
                session.execute(
                    update(Batch).where(Batch.id == batch_id)
                    .values(summary_claim_owner=owner,
                            summary_claim_until=at + timedelta(seconds=ttl_s)),
                    execution_options=NO_SYNC)
            return free

    def renew_summary_claim(self, batch_id: str, *, owner: str,
                            ttl_s: float = CLAIM_TTL_S) -> bool:
        """Extend `owner`'s claim; False when it no longer holds it."""
        query = (update(Batch)
                 .where(Batch.id == batch_id, Batch.summary_claim_owner == owner,
                        Batch.summary_posted_at.is_(None))
                 .values(summary_claim_until=now() + timedelta(seconds=ttl_s)))
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def release_summary_claim(self, batch_id: str, *, owner: str | None = None) -> None:
        """Give the claim up (only `owner`'s, when named)."""
        query = update(Batch).where(Batch.id == batch_id)
        if owner is not None:
            query = query.where(Batch.summary_claim_owner == owner)
        with self._write() as session:
            session.execute(query.values(summary_claim_owner=None, summary_claim_until=None),
                            execution_options=NO_SYNC)

    def mark_summary_posted(self, batch_id: str) -> None:
        if not self._update(batch_id, summary_posted_at=now()):
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

    # --- parts: each of Slack's side effects, recorded as it happens ---

    def slack_parts(self, scope: str) -> dict[str, PartState]:
        """The recorded parts of `scope` (a batch ID, `digest:<period>`, `request:<key>`)."""
        query = select(SlackPart.part, SlackPart.state, SlackPart.ref).where(
            SlackPart.scope == scope)
        with self._read() as session:
            return {part: PartState(state, ref) for part, state, ref in session.execute(query)}

    def begin_part(self, scope: str, part: str) -> None:
        """An attempt at `part` starts: `pending` (a part already done stays done)."""
        self._put_part(scope, part, state="pending", ref=None)

    def finish_part(self, scope: str, part: str, ref: str | None) -> None:
        """`part` succeeded: `done`, with Slack's reference (a message ts, a file name)."""
        self._put_part(scope, part, state="done", ref=ref)

    def _put_part(self, scope: str, part: str, *, state: str, ref: str | None) -> None:
        values: dict[str, Any] = {"scope": scope, "part": part, "state": state, "ref": ref,
                                  "updated_at": now()}
        insert: Any = sqlite_insert
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as postgresql_insert  # (runs.py)

            insert = postgresql_insert
        query = insert(SlackPart).values(values).on_conflict_do_update(
            index_elements=[SlackPart.scope, SlackPart.part],
            set_={k: v for k, v in values.items() if k not in ("scope", "part")},
            where=SlackPart.state != "done",
        )
        with self._write() as session:
            session.execute(query)
