"""Per retrain: the model each target served (a retrain chooses it among candidates, so the
table says which won) and the out-of-fold pinball loss of every candidate.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TARGETS = ("ttft", "tpot")


def upgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        for target in TARGETS:
            batch_op.add_column(
                sa.Column(f"{target}_model_choice", sa.String(length=40), nullable=True)
            )
        batch_op.add_column(sa.Column("model_candidates", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.drop_column("model_candidates")
        for target in reversed(TARGETS):
            batch_op.drop_column(f"{target}_model_choice")
