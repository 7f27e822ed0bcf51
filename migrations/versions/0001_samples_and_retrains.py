"""Samples (the durable training store) and retrains (one row per retrain, with metrics).

Revision ID: 0001
Revises: none
Create Date: 2026-12-02 17:10:42.609563
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retrains",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("version", sa.String(length=40), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("model_type", sa.String(length=32), nullable=False),
        sa.Column("objective", sa.String(length=16), nullable=False),
        sa.Column("quantile", sa.Float(), nullable=False),
        sa.Column("max_sample_id", sa.BigInteger(), nullable=False),
        sa.Column("ttft_train_samples", sa.Integer(), nullable=True),
        sa.Column("ttft_test_samples", sa.Integer(), nullable=True),
        sa.Column("ttft_mae", sa.Float(), nullable=True),
        sa.Column("ttft_rmse", sa.Float(), nullable=True),
        sa.Column("ttft_pinball_loss", sa.Float(), nullable=True),
        sa.Column("ttft_coverage", sa.Float(), nullable=True),
        sa.Column("ttft_violation_rate", sa.Float(), nullable=True),
        sa.Column("tpot_train_samples", sa.Integer(), nullable=True),
        sa.Column("tpot_test_samples", sa.Integer(), nullable=True),
        sa.Column("tpot_mae", sa.Float(), nullable=True),
        sa.Column("tpot_rmse", sa.Float(), nullable=True),
        sa.Column("tpot_pinball_loss", sa.Float(), nullable=True),
        sa.Column("tpot_coverage", sa.Float(), nullable=True),
        sa.Column("tpot_violation_rate", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.create_index("ix_retrains_started_at", ["started_at"], unique=False)

    op.create_table(
        "samples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kv_cache_percentage", sa.Float(), nullable=False),
        sa.Column("input_token_length", sa.BigInteger(), nullable=False),
        sa.Column("num_request_waiting", sa.BigInteger(), nullable=False),
        sa.Column("num_request_running", sa.BigInteger(), nullable=False),
        sa.Column("num_tokens_generated", sa.BigInteger(), nullable=False),
        sa.Column("prefix_cache_score", sa.Float(), nullable=False),
        sa.Column("pod_type", sa.String(length=64), nullable=False),
        sa.Column("prefill_tokens_in_flight", sa.BigInteger(), nullable=False),
        sa.Column("decode_tokens_in_flight", sa.BigInteger(), nullable=False),
        sa.Column("encoder_matched_size", sa.BigInteger(), nullable=False),
        sa.Column("encoder_input_size", sa.BigInteger(), nullable=False),
        sa.Column("actual_ttft_ms", sa.Float(), nullable=False),
        sa.Column("actual_tpot_ms", sa.Float(), nullable=False),
        sa.Column("predicted_ttft_ms", sa.Float(), nullable=True),
        sa.Column("predicted_tpot_ms", sa.Float(), nullable=True),
        sa.Column("measures", sa.SmallInteger(), nullable=False),
        sa.Column("is_test", sa.Boolean(), nullable=False),
        sa.Column("bucket", sa.SmallInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index(
            "ix_samples_split_bucket", ["is_test", "measures", "bucket", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index("ix_samples_split_bucket")

    op.drop_table("samples")
    with op.batch_alter_table("retrains", schema=None) as batch_op:
        batch_op.drop_index("ix_retrains_started_at")

    op.drop_table("retrains")
