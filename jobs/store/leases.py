"""The store's batch leases: which worker runs a batch, until its lease lapses (crash recovery).

A worker takes the lease before running a batch and renews it while it runs; a batch whose
lease has expired is another worker's to resume (`jobs.broker.worker`'s recovery sweep), and so
is one whose owner the caller knows to be dead (`take_over_lease`).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import or_, update

from jobs.store.database import NO_SYNC, Database, now, rowcount
from jobs.store.schema import Batch


class Leases(Database):
    """Taking, renewing and giving up a batch's lease, each one atomic UPDATE."""

    def try_acquire_lease(self, batch_id: str, owner: str, ttl_s: float) -> bool:
        """Take the batch's lease if it is free, ours, or expired (one atomic UPDATE)."""
        at = now()
        query = (
            update(Batch)
            .where(
                Batch.id == batch_id,
                or_(
                    Batch.lease_owner.is_(None),
                    Batch.lease_owner == owner,
                    Batch.lease_expires_at.is_(None),
                    Batch.lease_expires_at <= at,
                ),
            )
            .values(lease_owner=owner, lease_expires_at=at + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def take_over_lease(self, batch_id: str, owner: str, ttl_s: float, *, dead: str) -> bool:
        """Take the lease from `dead`, an owner known to be gone, if it still holds it (one
        atomic UPDATE: a live worker that took it meanwhile keeps it)."""
        query = (
            update(Batch)
            .where(Batch.id == batch_id, Batch.lease_owner == dead)
            .values(lease_owner=owner, lease_expires_at=now() + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def renew_lease(self, batch_id: str, owner: str, ttl_s: float) -> bool:
        """Extend a lease we still hold; False when another owner has taken it."""
        query = (
            update(Batch)
            .where(Batch.id == batch_id, Batch.lease_owner == owner)
            .values(lease_expires_at=now() + timedelta(seconds=ttl_s))
        )
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def release_lease(self, batch_id: str, owner: str) -> None:
        """Give the lease up, if we still hold it."""
        query = (
            update(Batch)
            .where(Batch.id == batch_id, Batch.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None)
        )
        with self._write() as session:
            session.execute(query, execution_options=NO_SYNC)
