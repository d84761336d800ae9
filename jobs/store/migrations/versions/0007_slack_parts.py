"""Slack's side effects recorded as each succeeds, and who holds a summary's claim.

`slack_parts`: one row per part of a chat post that must happen exactly once (a batch's final
progress edit, its summary, each upload, the parent's edit; a digest's message and chart), keyed
by its scope (the batch ID, `digest:<period>`, `request:<key>`) and part name, `pending` while
an attempt is under way and `done` with Slack's reference (a message ts, a file name) once it
succeeded. `batches.summary_claim_owner`: the bot process (`host:pid:start:pidns:nonce`) that
holds the summary's claim, so that a claim held by a process that died on this host is taken
over at once instead of after its expiry.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_table(
        "slack_parts",
        sa.Column("scope", sa.String(255), nullable=False),
        sa.Column("part", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("ref", sa.String(255), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", "part", name="pk_slack_parts"),
    )
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("summary_claim_owner", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("summary_claim_owner")
    op.drop_table("slack_parts")
