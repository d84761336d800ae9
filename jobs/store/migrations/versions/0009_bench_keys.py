"""A failure of the benchmark is no dead end of the server configuration (docs/contracts.md
"Memory across batches"): each run whose benchmark failed on a server that was up gets the key
of the bench settings it ran with, `bench_key`, and its dead end holds only while they are the
same. Runs stored before records said where they failed (`failed_in`) are read from their log
tail and their batch's plan (`jobs.core.memory.is_bench_failure`): a served engine's line that
its benchmark process failed, or an argparse refusal naming one of the bench settings' flags.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 00:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    from jobs.core.memory import IN_BENCH, bench_key, is_bench_failure

    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("bench_key", sa.String(32), nullable=True))
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("batch_id", sa.String),
                    sa.column("status", sa.String), sa.column("record", sa.Text),
                    sa.column("bench_key", sa.String))
    batches = sa.table("batches", sa.column("id", sa.String), sa.column("plan", sa.Text))
    bind = op.get_bind()
    found = bind.execute(
        sa.select(runs.c.id, runs.c.record, batches.c.plan)
        .select_from(runs.join(batches, batches.c.id == runs.c.batch_id))
        .where(runs.c.status.in_(("failed", "timeout")))).all()
    for row_id, text, plan_text in found:
        try:
            record, plan = json.loads(text), json.loads(plan_text or "{}")
            bench = {**(plan.get("bench") or {}), **(plan.get("loads") or {})}
            if record.get("failed_in") == IN_BENCH:
                bench = record.get("bench") or bench
            elif not is_bench_failure(log_tail=str(record.get("log_tail") or ""), bench=bench):
                continue
            key = bench_key(bench)
        except (ValueError, TypeError, AttributeError):
            continue  # an unreadable record or plan stays as it was: a server's failure
        bind.execute(sa.update(runs).where(runs.c.id == row_id).values(bench_key=key))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("bench_key")
