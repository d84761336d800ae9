"""The digest's judged results on the runs, and CPU hosts named by their CPU.

`verdict` and `judged_delta` on each run: the report's verdict, and its delta_pct when the
digest counts it as judged (improved, unchanged or regressed, not a sweep's point), written with
the report, so that the digest's history is a scan of narrow columns, never of the reports;
existing reports are backfilled. The `hardware` column said "0x none" (or "0x none (CPU: ...)")
for a host without a GPU; it is rewritten from each record's fingerprint as
`jobs.core.digest.hardware` names it now ("CPU (model)").

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 00:00:03
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None

OLD = "0x none%"


def upgrade() -> None:
    from jobs.core.digest import hardware_of
    from jobs.store.runs import sweep_points_of, verdict_values

    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("verdict", sa.String(32), nullable=True))
        batch.add_column(sa.Column("judged_delta", sa.Float(), nullable=True))
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("batch_id", sa.String),
                    sa.column("approach", sa.String), sa.column("record", sa.Text),
                    sa.column("hardware", sa.String), sa.column("verdict", sa.String),
                    sa.column("judged_delta", sa.Float))
    batches = sa.table("batches", sa.column("id", sa.String), sa.column("plan", sa.Text),
                       sa.column("report", sa.Text))
    bind = op.get_bind()
    judged = (sa.update(runs)
              .where(runs.c.batch_id == sa.bindparam("b_batch"),
                     runs.c.approach == sa.bindparam("b_approach"))
              .values(verdict=sa.bindparam("b_verdict"), judged_delta=sa.bindparam("b_delta")))
    for batch_id, plan, text in bind.execute(
            sa.select(batches.c.id, batches.c.plan, batches.c.report)
            .where(batches.c.report.is_not(None))).all():
        try:
            report = json.loads(text)
            points = sweep_points_of(plan) if report.get("sweep") else frozenset()
            values = verdict_values(batch_id, report, points)
        except (ValueError, AttributeError, TypeError):
            continue  # an unreadable report leaves its runs unjudged
        if values:
            bind.execute(judged, values)
    for row_id, text in bind.execute(sa.select(runs.c.id, runs.c.record)
                                     .where(runs.c.hardware.like(OLD))).all():
        try:
            fingerprint = json.loads(text).get("fingerprint") or {}
        except (ValueError, AttributeError):
            continue  # an unreadable record keeps its column
        bind.execute(sa.update(runs).where(runs.c.id == row_id)
                     .values(hardware=hardware_of(fingerprint)))


def downgrade() -> None:
    """The judged columns go; the CPU names stay (they carry no more than the fingerprint)."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("judged_delta")
        batch.drop_column("verdict")
