"""Index for the newest-rows training window; which replica ran each retrain.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index("ix_samples_window", ["is_test", "measures", "id"], unique=False)
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.add_column(sa.Column("trainer", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.drop_column("trainer")
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index("ix_samples_window")
