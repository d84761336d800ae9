"""The store's record of what a batch's chat thread has posted (`bot.thread.batch_thread`).

A restarted bot resumes from it: it edits the progress message it posted before, and posts the
summary once, whichever bot gets there first (`claim_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from jobs.store.database import NO_SYNC, Database, UnknownBatch, now, rowcount
from jobs.store.schema import Batch, BatchRow, to_batch_row


@dataclass(frozen=True)
class SlackPosts:
    """What the chat thread of a batch has posted so far."""

    progress_ts: str | None
    summary_posted_at: datetime | None


class Posts(Database):
    """The progress message's ts and the summary's claim and posting."""

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
        at = now()
        query = (
            update(Batch)
            .where(
                Batch.id == batch_id,
                Batch.summary_posted_at.is_(None),
                or_(Batch.summary_claim_until.is_(None), Batch.summary_claim_until <= at),
            )
            .values(summary_claim_until=at + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def release_summary_claim(self, batch_id: str) -> None:
        self._update(batch_id, summary_claim_until=None)

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
