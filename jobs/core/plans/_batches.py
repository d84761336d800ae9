"""A batch as the core reads it: `BatchRow`, a frozen snapshot with its plan typed and its report
decoded.

The store fills it (jobs.store.schema.to_batch_row, from its `Batch` model) and hands it out
under `jobs.store.BatchRow`; it lives here, in plain data, so that the core (the digest, the
experiments, the trends) reads batches without importing the store that keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.core.plans._batch_plan import BatchPlan


@dataclass(frozen=True)
class BatchRow:
    """A snapshot of one batch; `plan` and `report` decoded (the plan typed)."""

    id: str
    preset: str
    engine: str
    queue: str
    state: str
    requested_by: str
    channel: str | None
    thread_ts: str | None
    host: str | None
    plan: BatchPlan
    idempotency_key: str | None
    cancel_requested: bool
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    report: dict[str, Any] | None
    error: str | None
