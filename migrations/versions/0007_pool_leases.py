"""Pool leases: which training replica retrains which pool, so several replicas share the
pools (training_server.pool_leases). `training_replicas` holds each live replica's
heartbeat; `pool_leases` one row per pool: its owner, until when (the database's clock),
and the epoch that grows with every new owner (a publication's fencing token).
`pool_bundles`: each pool's newest bundle archive and live calibration file, for replicas
that share no model directory (training_server.bundle_share).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 22:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "training_replicas",
        sa.Column("replica", sa.String(length=128), primary_key=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "pool_leases",
        sa.Column("pool", sa.String(length=63), primary_key=True),
        sa.Column("owner", sa.String(length=128), nullable=False, server_default=""),
        sa.Column("epoch", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "pool_bundles",
        sa.Column("pool", sa.String(length=63), primary_key=True),
        sa.Column("version", sa.String(length=40)),
        sa.Column("archive", sa.LargeBinary()),
        sa.Column("calibration", sa.LargeBinary()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pool_bundles")
    op.drop_table("pool_leases")
    op.drop_table("training_replicas")
