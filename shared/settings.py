"""Settings from the environment (pydantic-settings). Nothing is built at import time.

Every setting is read from LATENCY_<FIELD NAME> (LATENCY_DB_URL for `db_url`), except the
names operators already set for the llm-d predictor (../shared/spec/api.md section 7) and
the bind addresses, which are explicit aliases (`_unprefixed`). Settings validate
themselves when built: a half-configured TLS pair is refused at start-up.
"""

from __future__ import annotations

from enum import StrEnum
from importlib.util import find_spec
from pathlib import Path
from typing import Self

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ModelType(StrEnum):
    XGBOOST = "xgboost"
    LIGHTGBM = "lightgbm"


class ObjectiveType(StrEnum):
    QUANTILE = "quantile"
    MEAN = "mean"


class Calibration(StrEnum):
    """How served p90s are corrected toward the requested coverage (training_server.calibration)."""

    NONE = "none"  # serve the model's own quantile
    SPLIT = "split"  # a conformal factor per bundle, from held-out rows
    ADAPTIVE = "adaptive"  # that, times a live factor that tracks the served misses


class LegacyArtifacts(StrEnum):
    """Extra model files the trainer writes beside each bundle, for other servers to load."""

    NONE = "none"
    JOBLIB = "joblib"  # llm-d's pickled ttft/tpot.joblib (training_server.legacy)


# What LegacyArtifacts.JOBLIB needs: the `legacy` extra (pip name -> module).
LEGACY_LIBRARIES = {"joblib": "joblib", "scikit-learn": "sklearn", "pandas": "pandas"}


def _unprefixed(name: str) -> AliasChoices:
    """An environment name without the LATENCY_ prefix (an llm-d name, a bind address)."""
    return AliasChoices(name)


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LATENCY_", extra="ignore",
                                      populate_by_name=True)

    model_dir: Path = Path("./var/models")
    model_type: ModelType = ModelType.XGBOOST
    objective_type: ObjectiveType = ObjectiveType.QUANTILE
    quantile_alpha: float = Field(0.9, gt=0.0, lt=1.0)
    max_rows_per_call: int = Field(10_000, ge=1)
    log_level: str = "info"
    # Access control (shared.web.auth): with a token set, admin and mutating routes need it.
    api_token: SecretStr | None = None
    api_token_file: Path | None = None
    protect_epp_routes: bool = False
    protect_dashboard: bool = False
    # Limits (shared.web.limits): larger bodies answer 413 before they are read whole; past
    # this many requests in progress uvicorn answers 503 instead of queueing without bound.
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    max_concurrency: int = Field(1_000, ge=1)
    keep_alive_timeout_sec: float = Field(5.0, gt=0.0)
    # TLS, served by uvicorn itself: both files or neither.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    @model_validator(mode="after")
    def _tls_both_or_neither(self) -> Self:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("TLS needs both LATENCY_TLS_CERT_FILE and LATENCY_TLS_KEY_FILE")
        return self


class TrainingSettings(CommonSettings):
    host: str = Field("127.0.0.1", validation_alias=_unprefixed("TRAINING_HOST"))
    port: int = Field(8000, validation_alias=_unprefixed("TRAINING_PORT"))
    db_url: str = "sqlite:///./var/latency.db"
    retraining_interval_sec: float = Field(10.0, gt=0.0)
    min_samples_for_retrain: int = Field(100, ge=1)
    max_training_data_size_per_bucket: int = Field(10_000, ge=1)
    test_train_ratio: float = Field(0.1, ge=0.0, lt=1.0)
    max_test_data_size: int = Field(1_000, ge=0)
    # Newest rows per target a retrain fits on: bounds retrain time whatever the store holds.
    max_training_window: int = Field(100_000, ge=1)
    enable_token_in_flight_features: bool = True
    enable_encoder_features: bool = True
    keep_model_versions: int = Field(5, ge=2)
    # Sized for a 10 s cadence by replaying the traces (benchmarks/README.md).
    n_estimators: int = Field(100, ge=1)
    max_depth: int = Field(4, ge=1)
    learning_rate: float = Field(0.1, gt=0.0)
    # A leaf's p90 needs rows: TTFT varies 100x with the prompt and queue and splits pay off
    # early; TPOT is one noisy mean per request within a few % of its level (benchmarks/README).
    ttft_min_rows_per_leaf: int = Field(5, ge=1)
    tpot_min_rows_per_leaf: int = Field(50, ge=1)
    train_threads: int = Field(0, ge=0)
    calibration: Calibration = Calibration.ADAPTIVE
    # Adaptive calibration: log-factor step per served row (a miss raises the factor by
    # step * quantile, a hit lowers it by step * (1 - quantile)), and how often it is updated.
    calibration_step: float = Field(0.005, gt=0.0, le=0.1)
    calibration_interval_sec: float = Field(1.0, gt=0.0)
    migrate_on_start: bool = True
    # Bulk ingestions waiting on the store at once; more answer 429 (shed, counted) so a
    # flood costs bounded memory instead of a growing queue of decoded batches.
    max_concurrent_ingests: int = Field(4, ge=1)
    # Off by default: whoever answers the model URL runs code in any server loading these.
    legacy_artifacts: LegacyArtifacts = LegacyArtifacts.NONE

    @model_validator(mode="after")
    def _legacy_libraries_installed(self) -> Self:
        if self.legacy_artifacts is LegacyArtifacts.NONE:
            return self
        missing = [pip for pip, module in LEGACY_LIBRARIES.items() if find_spec(module) is None]
        if missing:
            raise ValueError(f"LATENCY_LEGACY_ARTIFACTS=joblib needs {', '.join(missing)}: "
                             "pip install 'latency-predictor[legacy]'")
        return self


class PredictionSettings(CommonSettings):
    host: str = Field("127.0.0.1", validation_alias=_unprefixed("PREDICT_HOST"))
    port: int = Field(8001, validation_alias=_unprefixed("PREDICT_PORT"))
    training_server_url: str | None = Field(
        None, validation_alias=_unprefixed("TRAINING_SERVER_URL")
    )
    model_sync_interval_sec: float = Field(
        1.0, gt=0.0, validation_alias=_unprefixed("MODEL_SYNC_INTERVAL_SEC")
    )
    # 0: one worker per CPU of the container's quota (shared/cpus.py); each holds a model.
    workers: int = Field(0, ge=0)
    # For pods without the shared model volume: mirror bundles from TRAINING_SERVER_URL.
    sync_from_trainer: bool = False


def env_names(settings: type[CommonSettings]) -> set[str]:
    """Every environment variable a settings class reads (for manifests and their tests)."""
    prefix = settings.model_config.get("env_prefix", "")
    names: set[str] = set()
    for name, field in settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        else:
            names.add(f"{prefix}{name}".upper())
    return names
