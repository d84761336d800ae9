"""Known dead ends (docs/contracts.md "Memory across batches"): each run's configuration and stack keys,
indexed, so that a batch finds an earlier failure of the same configuration in one query.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    from jobs.core.memory import config_key, stack_key

    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("config_key", sa.String(32), nullable=True))
        batch.add_column(sa.Column("stack_key", sa.String(32), nullable=True))
        batch.create_index("ix_runs_config_key_status", ["config_key", "status"])
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("record", sa.Text),
                    sa.column("config_key", sa.String), sa.column("stack_key", sa.String))
    bind = op.get_bind()
    for row_id, text in bind.execute(sa.select(runs.c.id, runs.c.record)).all():
        try:
            record = json.loads(text)
            keys = {"config_key": config_key(record.get("server_args") or {},
                                             record.get("env") or {}),
                    "stack_key": stack_key(record.get("fingerprint") or {})}
        except (ValueError, TypeError, AttributeError):
            continue  # a record the store cannot read stays without keys: never a dead end
        bind.execute(sa.update(runs).where(runs.c.id == row_id).values(**keys))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_config_key_status")
        batch.drop_column("stack_key")
        batch.drop_column("config_key")
