"""Stack keys that name the engine (jobs.core.stack): a run's `stack_key` is recomputed from its
record, so that a dead end found on one engine is never taken for one on another, and every
earlier run keeps matching the runs written from now on.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 12:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    from jobs.core.memory import stack_key

    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("record", sa.Text),
                    sa.column("stack_key", sa.String))
    bind = op.get_bind()
    for row_id, text in bind.execute(sa.select(runs.c.id, runs.c.record)).all():
        try:
            record = json.loads(text)
            key = stack_key(record.get("fingerprint") or {}, engine=record.get("engine"))
        except (ValueError, TypeError, AttributeError):
            continue  # a record the store cannot read keeps its key: it never matches anyway
        bind.execute(sa.update(runs).where(runs.c.id == row_id).values(stack_key=key))


def downgrade() -> None:
    pass  # the older keys cannot be told apart from these by what they hash; nothing to undo
