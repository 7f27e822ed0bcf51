"""Database tables (SQLAlchemy Core). Alembic's target metadata; change only with a revision."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
)

from shared.targets import TARGETS

metadata = MetaData()

# SQLite only autoincrements an INTEGER PRIMARY KEY; BigInteger elsewhere.
_ID = BigInteger().with_variant(Integer(), "sqlite")

samples = Table(
    "samples",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("timestamp", DateTime(timezone=True), nullable=False),
    Column("kv_cache_percentage", Float, nullable=False),
    Column("input_token_length", BigInteger, nullable=False),
    Column("num_request_waiting", BigInteger, nullable=False),
    Column("num_request_running", BigInteger, nullable=False),
    Column("num_tokens_generated", BigInteger, nullable=False),
    Column("prefix_cache_score", Float, nullable=False),
    Column("pod_type", String(64), nullable=False),
    Column("prefill_tokens_in_flight", BigInteger, nullable=False),
    Column("decode_tokens_in_flight", BigInteger, nullable=False),
    Column("encoder_matched_size", BigInteger, nullable=False),
    Column("encoder_input_size", BigInteger, nullable=False),
    Column("actual_ttft_ms", Float, nullable=False),
    Column("actual_tpot_ms", Float, nullable=False),
    Column("predicted_ttft_ms", Float),
    Column("predicted_tpot_ms", Float),
    # migration 0005: the pod's hardware class ("" for none, and for rows from before it)
    Column("pod_class", String(64), nullable=False, server_default=""),
    # migration 0006: the pool the row was sent for (shared.pools; "default" unprefixed)
    Column("pool", String(63), nullable=False, server_default="default"),
    # Which targets the row measures: bit 1 TTFT, bit 2 TPOT (0 ms means "not measured").
    Column("measures", SmallInteger, nullable=False),
    Column("is_test", Boolean, nullable=False),
    Column("bucket", SmallInteger, nullable=False),
    Index("ix_samples_split_bucket", "pool", "is_test", "measures", "bucket", "id"),
    # The training window reads the newest rows of one pool, split and target kind.
    Index("ix_samples_window", "pool", "is_test", "measures", "id"),
    Index("ix_samples_pool_id", "pool", "id"),  # a pool's newest sample id
    sqlite_autoincrement=True,  # ids never reused, so "max id" marks new samples
)

# Per target, of the calibrated predictions on the newest held-out rows (as served).
RETRAIN_METRICS = ("mae", "rmse", "pinball_loss", "coverage", "violation_rate")
# Per target, added by migration 0003: coverage before calibration, the conformal factor
# shipped (log), and the p90s actually served since the previous retrain, scored against
# the actuals that arrived since (rows the served models never saw: the future).
RETRAIN_DETAILS = ("raw_coverage", "calibration_log_offset", "live_coverage", "live_pinball_loss")
COUNTS = ("train_samples", "test_samples", "live_rows")

retrains = Table(
    "retrains",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("version", String(40)),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("model_type", String(32), nullable=False),
    Column("objective", String(16), nullable=False),
    Column("quantile", Float, nullable=False),
    Column("max_sample_id", BigInteger, nullable=False),
    Column("trainer", String(128)),  # which training replica ran it (host:pid)
    *[
        Column(f"{t.value}_{name}", Integer if name in COUNTS else Float)
        for t in TARGETS
        for name in ("train_samples", "test_samples", *RETRAIN_METRICS)
    ],
    # migration 0003
    *[
        Column(f"{t.value}_{name}", Integer if name in COUNTS else Float)
        for t in TARGETS
        for name in (*RETRAIN_DETAILS, "live_rows")
    ],
    # {"ttft": {"queued": {"n": .., "coverage": ..}, "pod_type=decode": .., ...}, "tpot": ..}
    Column("regimes", JSON),
    Column("window_limit", Integer),  # newest rows per target the fit could use
    # migration 0004: the candidate each target served (retrain.candidates) and
    # the out-of-fold pinball loss of every candidate: {"ttft": {"p90": .., ...}, "tpot": ..}
    *[Column(f"{t.value}_model_choice", String(40)) for t in TARGETS],
    Column("model_candidates", JSON),
    Column("pool", String(63), nullable=False, server_default="default"),  # migration 0006
    Index("ix_retrains_started_at", "started_at"),
    Index("ix_retrains_pool_id", "pool", "id"),
)

# migration 0007: which training replica retrains which pool (training_server.pool_leases).
# Every replica heartbeats its row; a pool's lease names its owner until `expires_at` (the
# database's clock, the one clock every replica shares), and `epoch` grows with every new
# owner: the fencing token a publication is checked against.
training_replicas = Table(
    "training_replicas",
    metadata,
    Column("replica", String(128), primary_key=True),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
)
pool_leases = Table(
    "pool_leases",
    metadata,
    Column("pool", String(63), primary_key=True),
    Column("owner", String(128), nullable=False, server_default=""),
    Column("epoch", BigInteger, nullable=False, server_default="0"),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)
# Each pool's newest bundle (its export archive) and live calibration file, for replicas
# without a shared model directory (training_server.bundle_share; off unless
# LATENCY_SHARE_BUNDLES_IN_STORE): the owner writes them, the others import them.
pool_bundles = Table(
    "pool_bundles",
    metadata,
    Column("pool", String(63), primary_key=True),
    Column("version", String(40)),
    Column("archive", LargeBinary),
    Column("calibration", LargeBinary),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
