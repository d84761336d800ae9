"""Runs on a host without a GPU named by their CPU: the digest's `hardware` column said
"0x none" (or "0x none (CPU: ...)") for them; it is rewritten from each record's fingerprint as
`jobs.core.digest_memory.hardware` names it now ("CPU (model)").

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
    from jobs.core.digest_memory import hardware_of

    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("record", sa.Text),
                    sa.column("hardware", sa.String))
    bind = op.get_bind()
    found = bind.execute(sa.select(runs.c.id, runs.c.record)
                         .where(runs.c.hardware.like(OLD))).all()
    for row_id, text in found:
        try:
            fingerprint = json.loads(text).get("fingerprint") or {}
        except (ValueError, AttributeError):
            continue  # an unreadable record keeps its column
        bind.execute(sa.update(runs).where(runs.c.id == row_id)
                     .values(hardware=hardware_of(fingerprint)))


def downgrade() -> None:
    """Nothing to undo: the old names carried no more than the fingerprint still holds."""
