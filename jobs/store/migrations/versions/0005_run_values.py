"""The digest's measurements on each run (its median on the batch's metric, its hardware), so
that the digest's history is read from two narrow columns, never from the records; existing runs
are backfilled.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 00:00:02
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    from jobs.core.records import to_record
    from jobs.store.runs import run_measure

    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("value", sa.Float(), nullable=True))
        batch.add_column(sa.Column("hardware", sa.String(255), nullable=True))
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("batch_id", sa.String),
                    sa.column("record", sa.Text), sa.column("value", sa.Float),
                    sa.column("hardware", sa.String))
    batches = sa.table("batches", sa.column("id", sa.String), sa.column("plan", sa.Text))
    bind = op.get_bind()
    metrics: dict[str, str | None] = {}
    for batch_id, plan in bind.execute(sa.select(batches.c.id, batches.c.plan)).all():
        try:
            metrics[batch_id] = str(json.loads(plan)["metric"])
        except (ValueError, KeyError, TypeError):
            metrics[batch_id] = None
    for row_id, batch_id, text in bind.execute(
            sa.select(runs.c.id, runs.c.batch_id, runs.c.record)).all():
        try:
            values = run_measure(to_record(json.loads(text)), metrics.get(batch_id))
        except Exception:  # noqa: BLE001 - an unreadable record keeps null columns
            continue
        bind.execute(sa.update(runs).where(runs.c.id == row_id).values(**values))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("hardware")
        batch.drop_column("value")
