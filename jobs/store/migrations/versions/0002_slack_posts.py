"""The chat thread's posting state: the progress message, the summary's claim and posting time.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-02 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("progress_ts", sa.String(64), nullable=True))
        batch.add_column(
            sa.Column("summary_claim_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch.add_column(sa.Column("summary_posted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("summary_posted_at")
        batch.drop_column("summary_claim_until")
        batch.drop_column("progress_ts")
