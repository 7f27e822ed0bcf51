"""Settings from the environment (pydantic-settings). Nothing is built at import time.

Every setting is read from LATENCY_<FIELD NAME> (LATENCY_DB_URL for `db_url`), except the
names operators already set for the llm-d predictor (docs/api.md section 7) and
the bind addresses, which are explicit aliases (`_unprefixed`). Settings validate
themselves when built: a half-configured TLS pair is refused at start-up.

Run by llm-d's Helm chart (docs/llm-d-chart.md), a server is told only llm-d's
names; what ours leave unset is derived from them (`derived`, logged once at start-up):
the directories from LATENCY_TTFT_MODEL_PATH / LOCAL_TTFT_MODEL_PATH, the worker count
from UVICORN_WORKERS, and whether a prediction server mirrors bundles from the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from importlib.util import find_spec
from pathlib import Path
from typing import Self

from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.advice_file import (
    as_template,
    ends_as_directory,
    is_per_pool,
    pool_file,
    template_problem,
)
from shared.model_source import ModelSource, model_source_for
from shared.pools import DEFAULT_POOL

# Our folder inside a volume llm-d's chart gives (/models, /server_models): no name of ours
# can clash with the *.joblib files llm-d's own tools keep there.
LLM_D_HOME = "latency-predictor"
# The advice file's name in the model directory when LATENCY_ADVICE_FILE is unset.
ADVICE_FILE = "advice.json"


class ModelType(StrEnum):
    XGBOOST = "xgboost"
    LIGHTGBM = "lightgbm"


class ObjectiveType(StrEnum):
    QUANTILE = "quantile"
    MEAN = "mean"


class Calibration(StrEnum):
    """How served p90s are corrected toward the requested coverage: the bundle's factor
    (training_server.retrain.cross_conformal), the live one
    (training_server.retrain.live_calibration).
    """

    NONE = "none"  # serve the model's own quantile
    SPLIT = "split"  # a conformal factor per bundle, from out-of-fold scores (cross-conformal)
    ADAPTIVE = "adaptive"  # that, times a live factor that tracks the served misses


@dataclass(frozen=True)
class Derived:
    """A setting left unset and derived from another variable."""

    name: str  # the environment name of the derived setting
    value: str
    source: str  # the variable it came from, with its value (or the reason)

    def __str__(self) -> str:
        return f"{self.name}={self.value} (derived from {self.source})"


class LegacyArtifacts(StrEnum):
    """Extra model files the trainer writes beside each bundle, for other servers to load."""

    NONE = "none"
    JOBLIB = "joblib"  # llm-d's pickled ttft/tpot.joblib (training_server.legacy.regressors)


# What LegacyArtifacts.JOBLIB needs: the `legacy` extra (pip name -> module).
LEGACY_LIBRARIES = {"joblib": "joblib", "scikit-learn": "sklearn", "pandas": "pandas"}


def _unprefixed(name: str) -> AliasChoices:
    """An environment name without the LATENCY_ prefix (an llm-d name, a bind address)."""
    return AliasChoices(name)


def env_name(settings: type[BaseSettings], field: str) -> str:
    """The environment variable a setting is read from."""
    alias = settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{settings.model_config.get('env_prefix', '')}{field}".upper()


def _llm_d_home(llm_d_model_path: Path) -> Path:
    return llm_d_model_path.parent / LLM_D_HOME


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LATENCY_", extra="ignore", populate_by_name=True)

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
    # Pools one service keeps (the default pool counts): on a trainer, rows for a new pool
    # past it answer 409; a prediction server serves the bundles of at most this many.
    max_pools: int = Field(64, ge=1)
    keep_alive_timeout_sec: float = Field(5.0, gt=0.0)
    # TLS, served by uvicorn itself: both files or neither.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    _derived: tuple[Derived, ...] = PrivateAttr(())

    @model_validator(mode="after")
    def _tls_both_or_neither(self) -> Self:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("TLS needs both LATENCY_TLS_CERT_FILE and LATENCY_TLS_KEY_FILE")
        return self

    @property
    def derived(self) -> tuple[Derived, ...]:
        """The settings this server derived from other variables, in the order derived."""
        return self._derived

    def startup_lines(self) -> list[str]:
        """What a server logs once at start-up about where its settings came from."""
        return [str(d) for d in self._derived]

    def _unset(self, field: str) -> bool:
        return field not in self.model_fields_set

    def _derive(self, field: str, value: object, source: str) -> None:
        setattr(self, field, value)
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        self._derived = (*self._derived, Derived(env_name(type(self), field), shown, source))


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
    # Each leaf's step shrunk as if it held this many more rows (L2 on the leaf; 0: the
    # library's default): a stall of a few consecutive slow requests at the edge of a
    # feature's range made TTFT leaves of 5-9 rows that over-predicted the next ~500 rows
    # 4-27x (sharegpt); TPOT leaves hold 50 rows and did not move with it.
    ttft_leaf_prior_rows: float = Field(10.0, ge=0.0)
    tpot_leaf_prior_rows: float = Field(0.0, ge=0.0)
    train_threads: int = Field(0, ge=0)
    # Each retrain chooses per target among the running p90 and tree models by out-of-fold
    # pinball loss (training_server.retrain.select); off: the configured trees alone.
    model_selection: bool = True
    # While the store is small, retrain whenever the stored rows doubled
    # (training_server.retrain.schedule).
    early_retrains: bool = True
    calibration: Calibration = Calibration.ADAPTIVE
    # Adaptive calibration: log-factor step per served row (a miss raises the factor by
    # step * quantile, a hit lowers it by step * (1 - quantile)), and how often it is updated.
    calibration_step: float = Field(0.005, gt=0.0, le=0.1)
    calibration_interval_sec: float = Field(1.0, gt=0.0)
    migrate_on_start: bool = True
    # PostgreSQL: a pool's lease lasts this long unless renewed (every quarter of it), so a
    # dead replica's pools are retrained by another within about this long plus one
    # interval (training_server.pool_leases); it must exceed the fence margin (2 s).
    pool_lease_ttl_sec: float = Field(8.0, ge=3.0, le=300.0)
    # Several training replicas without a shared model directory (prediction servers
    # mirroring from the trainer's Service): each pool's newest bundle and live calibration
    # go through the store too, so any replica answers with them (training_server.bundle_share).
    share_bundles_in_store: bool = False
    # Bulk ingestions waiting on the store at once; more answer 429 (shed, counted) so a
    # flood costs bounded memory instead of a growing queue of decoded batches.
    max_concurrent_ingests: int = Field(4, ge=1)
    # llm-d's chart: where its trainer keeps the TTFT model, on the only volume it can write.
    ttft_model_path: Path | None = Field(
        None, validation_alias=_unprefixed("LATENCY_TTFT_MODEL_PATH")
    )

    @model_validator(mode="after")
    def _derive_from_llm_d_paths(self) -> Self:
        """Unset, the model directory and the SQLite store go beside llm-d's model file."""
        path = self.ttft_model_path
        if path is None:
            return self
        source = f"LATENCY_TTFT_MODEL_PATH={path}"
        if self._unset("model_dir"):
            self._derive("model_dir", _llm_d_home(path) / "models", source)
        if self._unset("db_url"):
            self._derive("db_url", f"sqlite:///{_llm_d_home(path) / 'latency.db'}", source)
        return self

    # Off by default: whoever answers the model URL runs code in any server loading these.
    legacy_artifacts: LegacyArtifacts = LegacyArtifacts.NONE
    # What `latency-predictor advise --json` last wrote, served by GET /advice for the
    # dashboard; {pool} in it, or a directory, names each pool's (see advice_path).
    advice_file: Path | None = None

    def advice_path(self, pool: str = DEFAULT_POOL) -> Path:
        """The advice file GET /advice reads for `pool` (these settings being the pool's):
        LATENCY_ADVICE_FILE with {pool} replaced by the pool's name (a directory stands for
        <dir>/{pool}.json); a path without {pool} is the default pool's alone, and every
        other pool reads advice.json in its own model directory, as it does when
        LATENCY_ADVICE_FILE is unset (a pool never shows another pool's advice)."""
        template = None if self.advice_file is None else str(self.advice_file)
        if template is not None and is_per_pool(template):
            return pool_file(template, pool)
        if template is not None and pool == DEFAULT_POOL:
            return Path(template)
        return self.model_dir / ADVICE_FILE

    @field_validator("advice_file", mode="before")
    @classmethod
    def _advice_directory(cls, value: object) -> object:
        """Before Path drops it, a trailing / says: a directory of per-pool files. Empty is
        unset."""
        if isinstance(value, str) and (not value or ends_as_directory(value)):
            return as_template(value) if value else None
        return value

    @model_validator(mode="after")
    def _advice_template(self) -> Self:
        if self.advice_file is None:
            return self
        text = str(self.advice_file)
        if problem := template_problem(text):
            raise ValueError(f"LATENCY_ADVICE_FILE={text!r}: {problem}")
        template = as_template(text)
        if template != text:  # an existing directory: its per-pool files, said at start-up
            self._derive("advice_file", Path(template), f"LATENCY_ADVICE_FILE={text}, a directory")
        return self

    @model_validator(mode="after")
    def _legacy_libraries_installed(self) -> Self:
        if self.legacy_artifacts is LegacyArtifacts.NONE:
            return self
        missing = [pip for pip, module in LEGACY_LIBRARIES.items() if find_spec(module) is None]
        if missing:
            raise ValueError(
                f"LATENCY_LEGACY_ARTIFACTS=joblib needs {', '.join(missing)}: "
                "pip install 'latency-predictor[legacy]'"
            )
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
    # llm-d's chart sets it; LATENCY_WORKERS wins when both are set.
    uvicorn_workers: int | None = Field(None, ge=1, validation_alias=_unprefixed("UVICORN_WORKERS"))
    # For pods without the shared model volume: mirror bundles from TRAINING_SERVER_URL.
    # Unset, it is derived (model_source_for).
    sync_from_trainer: bool = False
    # llm-d's chart: the model file on this prediction container's own volume.
    local_ttft_model_path: Path | None = Field(
        None, validation_alias=_unprefixed("LOCAL_TTFT_MODEL_PATH")
    )
    _model_source: tuple[ModelSource, str] = PrivateAttr((ModelSource.SHARED_DIR, ""))

    @property
    def model_source(self) -> ModelSource:
        return self._model_source[0]

    @property
    def model_source_reason(self) -> str:
        return self._model_source[1]

    def startup_lines(self) -> list[str]:
        lines = super().startup_lines()
        if self.uvicorn_workers is not None and self.workers != self.uvicorn_workers:
            lines.append(f"UVICORN_WORKERS={self.uvicorn_workers} ignored: LATENCY_WORKERS wins")
        return [*lines, f"model source: {self.model_source.value} ({self.model_source_reason})"]

    @model_validator(mode="after")
    def _derive_from_llm_d_names(self) -> Self:
        """Unset, the model directory, the worker count and whether to mirror bundles from
        the trainer follow llm-d's variables and what the model directory holds."""
        if self.local_ttft_model_path is not None and self._unset("model_dir"):
            home = _llm_d_home(self.local_ttft_model_path)
            self._derive(
                "model_dir", home / "models", f"LOCAL_TTFT_MODEL_PATH={self.local_ttft_model_path}"
            )
        if self.uvicorn_workers is not None and self._unset("workers"):
            self._derive("workers", self.uvicorn_workers, f"UVICORN_WORKERS={self.uvicorn_workers}")
        explicit = None if self._unset("sync_from_trainer") else self.sync_from_trainer
        source, reason = model_source_for(self.model_dir, self.training_server_url, explicit)
        if explicit is None and source is ModelSource.TRAINER_SYNC:
            self._derive("sync_from_trainer", True, reason)
        self._model_source = (source, reason)
        return self


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
