"""The regression watch (docs/contracts.md "Regression watch"): watches, their series' points,
the changes found in them and who acknowledged or dismissed each.

`watches`: a preset re-run on a schedule (every, at UTC, queue, the `--set`s as JSON), its state
(active, paused, stopped), owner and thread, and the last slot the scheduler started or skipped
with the last batch it started. `watch_points`: one point per batch, configuration, judged key and
load level: median, range, time, stack (JSON), and which way the key is better.
`watch_changes`: each candidate, its confirmation batch, its state and figures (JSON), and when
its thread was told. `watch_acks`: the one acknowledgement or dismissal of a change.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_table(
        "watches",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("preset", sa.String(255), nullable=False),
        sa.Column("every", sa.String(32), nullable=False),
        sa.Column("at", sa.String(8), nullable=False),
        sa.Column("queue", sa.String(255), nullable=False),
        sa.Column("sets", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("channel", sa.String(255), nullable=True),
        sa.Column("thread_ts", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_slot", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_batch", sa.String(64), nullable=True),
    )
    op.create_table(
        "watch_points",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("watch_id", sa.Integer,
                  sa.ForeignKey("watches.id", ondelete="CASCADE",
                                name="fk_watch_points_watch_id"), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("approach", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("load", sa.String(255), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("low", sa.Float, nullable=False),
        sa.Column("high", sa.Float, nullable=False),
        sa.Column("lower_is_better", sa.Boolean, server_default=sa.false(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stack", sa.Text, nullable=False),
        sa.UniqueConstraint("watch_id", "batch_id", "approach", "key", "load",
                            name="uq_watch_points_batch_key"),
    )
    op.create_index("ix_watch_points_series", "watch_points",
                    ["watch_id", "approach", "key", "load", "at"])
    op.create_table(
        "watch_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("watch_id", sa.Integer,
                  sa.ForeignKey("watches.id", ondelete="CASCADE",
                                name="fk_watch_changes_watch_id"), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("approach", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("load", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("confirmation", sa.String(64), nullable=True),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("watch_id", "batch_id", "approach", "key", "load",
                            name="uq_watch_changes_batch_key"),
    )
    op.create_index("ix_watch_changes_created_at", "watch_changes", ["created_at"])
    op.create_table(
        "watch_acks",
        sa.Column("change_id", sa.Integer,
                  sa.ForeignKey("watch_changes.id", ondelete="CASCADE",
                                name="fk_watch_acks_change_id"), primary_key=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("watch_acks")
    op.drop_index("ix_watch_changes_created_at", table_name="watch_changes")
    op.drop_table("watch_changes")
    op.drop_index("ix_watch_points_series", table_name="watch_points")
    op.drop_table("watch_points")
    op.drop_table("watches")
