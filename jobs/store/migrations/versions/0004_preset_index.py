"""A preset's batches by time (compare's pairing, the digest's predecessors and latest reports).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 00:00:01
"""

from __future__ import annotations

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_index("ix_batches_preset_created_at", "batches", ["preset", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_batches_preset_created_at", table_name="batches")
