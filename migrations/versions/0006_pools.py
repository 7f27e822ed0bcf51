"""Pools: every sample and every retrain belongs to one pool (`pool`, a DNS label); rows
stored before pools existed belong to `default`, the pool of the unprefixed routes. The
window and retention indexes lead with the pool, so one pool's reads never walk another's
rows; `ix_samples_pool_id` answers a pool's newest sample id (its retrain watermark).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 22:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

WINDOW = ["is_test", "measures", "id"]
SPLIT_BUCKET = ["is_test", "measures", "bucket", "id"]


def _pool_column() -> sa.Column[str]:
    return sa.Column("pool", sa.String(length=63), nullable=False, server_default="default")


def upgrade() -> None:
    # An added column with a constant default: no table rewrite (PostgreSQL 11+, SQLite).
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.add_column(_pool_column())
        batch_op.drop_index("ix_samples_window")
        batch_op.drop_index("ix_samples_split_bucket")
        batch_op.create_index("ix_samples_window", ["pool", *WINDOW], unique=False)
        batch_op.create_index("ix_samples_split_bucket", ["pool", *SPLIT_BUCKET], unique=False)
        batch_op.create_index("ix_samples_pool_id", ["pool", "id"], unique=False)
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.add_column(_pool_column())
        batch_op.create_index("ix_retrains_pool_id", ["pool", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.drop_index("ix_retrains_pool_id")
        batch_op.drop_column("pool")
    # SQLite drops the column by copying the table; the copy must keep AUTOINCREMENT.
    with op.batch_alter_table(
        "samples", schema=None, table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_index("ix_samples_pool_id")
        batch_op.drop_index("ix_samples_split_bucket")
        batch_op.drop_index("ix_samples_window")
        batch_op.drop_column("pool")
        batch_op.create_index("ix_samples_window", WINDOW, unique=False)
        batch_op.create_index("ix_samples_split_bucket", SPLIT_BUCKET, unique=False)
