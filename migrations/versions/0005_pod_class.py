"""The pod's hardware class on every sample (`pod_class`, a label and a feature: "h200",
"b200", ...); rows stored before it, and rows from callers that do not send it, hold "".

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # An added column with a constant default: no table rewrite (PostgreSQL 11+, SQLite).
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("pod_class", sa.String(length=64), nullable=False, server_default="")
        )


def downgrade() -> None:
    # SQLite drops the column by copying the table; the copy must keep AUTOINCREMENT (sample
    # ids are never reused: "max id" marks new samples), which reflection does not carry.
    with op.batch_alter_table(
        "samples", schema=None, table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_column("pod_class")
