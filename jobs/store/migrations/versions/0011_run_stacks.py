"""An upgrade check's second stack (docs/contracts.md "Stacks"): a batch run with `--against NAME`
keeps every configuration's record on its own stack and another on NAME. A run's `stack` is ''
for the batch's own stack (every run stored before) and NAME for the stack an upgrade check
compares it with; a batch holds one run per (stack, approach), so its own records keep exactly
one baseline, as the run-record format says.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-06 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | tuple[str, ...] | None = None
depends_on: str | tuple[str, ...] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("stack", sa.String(255), nullable=False,
                                   server_default=""))
        batch.drop_constraint("uq_runs_batch_approach", type_="unique")
        batch.create_unique_constraint("uq_runs_batch_stack_approach",
                                       ["batch_id", "stack", "approach"])


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM runs WHERE stack <> ''"))
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_batch_stack_approach", type_="unique")
        batch.create_unique_constraint("uq_runs_batch_approach", ["batch_id", "approach"])
        batch.drop_column("stack")
