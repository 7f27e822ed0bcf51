"""Per retrain: coverage before calibration, the conformal factor, the live score of the
served p90s since the previous retrain, coverage per regime, and the window used.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TARGETS = ("ttft", "tpot")
FLOATS = ("raw_coverage", "calibration_log_offset", "live_coverage", "live_pinball_loss")


def upgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        for target in TARGETS:
            for name in FLOATS:
                batch_op.add_column(sa.Column(f"{target}_{name}", sa.Float(), nullable=True))
            batch_op.add_column(sa.Column(f"{target}_live_rows", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("regimes", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("window_limit", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.drop_column("window_limit")
        batch_op.drop_column("regimes")
        for target in reversed(TARGETS):
            batch_op.drop_column(f"{target}_live_rows")
            for name in reversed(FLOATS):
                batch_op.drop_column(f"{target}_{name}")
