"""Settings from the environment (pydantic-settings). Nothing is built at import time.

Environment names are the ones operators already set for the llm-d predictor (see
../shared/spec/api.md section 7), plus ours prefixed LATENCY_.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ModelType(str, Enum):
    XGBOOST = "xgboost"
    LIGHTGBM = "lightgbm"


class ObjectiveType(str, Enum):
    QUANTILE = "quantile"
    MEAN = "mean"


class Calibration(str, Enum):
    """How served p90s are corrected toward the requested coverage (training_server.calibration)."""

    NONE = "none"  # serve the model's own quantile
    SPLIT = "split"  # a conformal factor per bundle, from held-out rows
    ADAPTIVE = "adaptive"  # that, times a live factor that tracks the served misses


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    model_dir: Path = Field(Path("./var/models"), validation_alias=_env("LATENCY_MODEL_DIR"))
    model_type: ModelType = Field(ModelType.XGBOOST, validation_alias=_env("LATENCY_MODEL_TYPE"))
    objective_type: ObjectiveType = Field(
        ObjectiveType.QUANTILE, validation_alias=_env("LATENCY_OBJECTIVE_TYPE")
    )
    quantile_alpha: float = Field(
        0.9, gt=0.0, lt=1.0, validation_alias=_env("LATENCY_QUANTILE_ALPHA")
    )
    max_rows_per_call: int = Field(
        10_000, ge=1, validation_alias=_env("LATENCY_MAX_ROWS_PER_CALL")
    )
    log_level: str = Field("info", validation_alias=_env("LATENCY_LOG_LEVEL"))
    # Access control (shared.web.auth): with a token set, admin and mutating routes need it.
    api_token: SecretStr | None = Field(None, validation_alias=_env("LATENCY_API_TOKEN"))
    api_token_file: Path | None = Field(None, validation_alias=_env("LATENCY_API_TOKEN_FILE"))
    protect_epp_routes: bool = Field(False, validation_alias=_env("LATENCY_PROTECT_EPP_ROUTES"))
    protect_dashboard: bool = Field(False, validation_alias=_env("LATENCY_PROTECT_DASHBOARD"))
    # Limits (shared.web.limits): larger bodies answer 413 before they are read whole; past
    # this many requests in progress uvicorn answers 503 instead of queueing without bound.
    max_body_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, validation_alias=_env("LATENCY_MAX_BODY_BYTES")
    )
    max_concurrency: int = Field(1_000, ge=1, validation_alias=_env("LATENCY_MAX_CONCURRENCY"))
    keep_alive_timeout_sec: float = Field(
        5.0, gt=0.0, validation_alias=_env("LATENCY_KEEP_ALIVE_TIMEOUT_SEC")
    )
    # TLS, served by uvicorn itself when both are set.
    tls_cert_file: Path | None = Field(None, validation_alias=_env("LATENCY_TLS_CERT_FILE"))
    tls_key_file: Path | None = Field(None, validation_alias=_env("LATENCY_TLS_KEY_FILE"))


class TrainingSettings(CommonSettings):
    host: str = Field("127.0.0.1", validation_alias=_env("TRAINING_HOST"))
    port: int = Field(8000, validation_alias=_env("TRAINING_PORT"))
    db_url: str = Field("sqlite:///./var/latency.db", validation_alias=_env("LATENCY_DB_URL"))
    retraining_interval_sec: float = Field(
        10.0, gt=0.0, validation_alias=_env("LATENCY_RETRAINING_INTERVAL_SEC")
    )
    min_samples_for_retrain: int = Field(
        100, ge=1, validation_alias=_env("LATENCY_MIN_SAMPLES_FOR_RETRAIN")
    )
    max_training_data_size_per_bucket: int = Field(
        10_000, ge=1, validation_alias=_env("LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET")
    )
    test_train_ratio: float = Field(
        0.1, ge=0.0, lt=1.0, validation_alias=_env("LATENCY_TEST_TRAIN_RATIO")
    )
    max_test_data_size: int = Field(1_000, ge=0, validation_alias=_env("LATENCY_MAX_TEST_DATA_SIZE"))
    # Newest rows per target a retrain fits on: bounds retrain time whatever the store holds.
    max_training_window: int = Field(
        100_000, ge=1, validation_alias=_env("LATENCY_MAX_TRAINING_WINDOW")
    )
    enable_token_in_flight_features: bool = Field(
        True, validation_alias=_env("LATENCY_ENABLE_TOKEN_IN_FLIGHT_FEATURES")
    )
    enable_encoder_features: bool = Field(
        True, validation_alias=_env("LATENCY_ENABLE_ENCODER_FEATURES")
    )
    keep_model_versions: int = Field(5, ge=2, validation_alias=_env("LATENCY_KEEP_MODEL_VERSIONS"))
    # Sized for a 10 s cadence by replaying the traces (benchmarks/README.md).
    n_estimators: int = Field(100, ge=1, validation_alias=_env("LATENCY_N_ESTIMATORS"))
    max_depth: int = Field(4, ge=1, validation_alias=_env("LATENCY_MAX_DEPTH"))
    learning_rate: float = Field(0.1, gt=0.0, validation_alias=_env("LATENCY_LEARNING_RATE"))
    # A leaf's p90 needs rows: TTFT varies 100x with the prompt and queue and splits pay off
    # early; TPOT is one noisy mean per request within a few % of its level (benchmarks/README).
    ttft_min_rows_per_leaf: int = Field(
        5, ge=1, validation_alias=_env("LATENCY_TTFT_MIN_ROWS_PER_LEAF")
    )
    tpot_min_rows_per_leaf: int = Field(
        50, ge=1, validation_alias=_env("LATENCY_TPOT_MIN_ROWS_PER_LEAF")
    )
    train_threads: int = Field(0, ge=0, validation_alias=_env("LATENCY_TRAIN_THREADS"))
    calibration: Calibration = Field(
        Calibration.ADAPTIVE, validation_alias=_env("LATENCY_CALIBRATION")
    )
    # Adaptive calibration: log-factor step per served row (a miss raises the factor by
    # step * quantile, a hit lowers it by step * (1 - quantile)), and how often it is updated.
    calibration_step: float = Field(
        0.005, gt=0.0, le=0.1, validation_alias=_env("LATENCY_CALIBRATION_STEP")
    )
    calibration_interval_sec: float = Field(
        1.0, gt=0.0, validation_alias=_env("LATENCY_CALIBRATION_INTERVAL_SEC")
    )
    migrate_on_start: bool = Field(True, validation_alias=_env("LATENCY_MIGRATE_ON_START"))
    # Bulk ingestions waiting on the store at once; more answer 429 (shed, counted) so a
    # flood costs bounded memory instead of a growing queue of decoded batches.
    max_concurrent_ingests: int = Field(
        4, ge=1, validation_alias=_env("LATENCY_MAX_CONCURRENT_INGESTS")
    )


class PredictionSettings(CommonSettings):
    host: str = Field("127.0.0.1", validation_alias=_env("PREDICT_HOST"))
    port: int = Field(8001, validation_alias=_env("PREDICT_PORT"))
    training_server_url: str | None = Field(None, validation_alias=_env("TRAINING_SERVER_URL"))
    model_sync_interval_sec: float = Field(
        1.0, gt=0.0, validation_alias=_env("MODEL_SYNC_INTERVAL_SEC")
    )
    # 0: one worker per CPU of the container's quota (shared/cpus.py); each holds a model.
    workers: int = Field(0, ge=0, validation_alias=_env("LATENCY_WORKERS"))
    # For pods without the shared model volume: mirror bundles from TRAINING_SERVER_URL.
    sync_from_trainer: bool = Field(False, validation_alias=_env("LATENCY_SYNC_FROM_TRAINER"))
