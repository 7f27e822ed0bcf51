"""Which llm-d legacy files the trainer writes (LATENCY_LEGACY_ARTIFACTS=joblib), and when:
into each bundle it publishes (for_bundle), and the prior's before any (publish_prior_files).

Into each bundle it publishes: ttft.joblib and tpot.joblib fitted on the same training rows
as our models (legacy.regressors), or the prior's for a target that has no model yet.

Before any bundle: the cold-start prior (shared.prior). An llm-d prediction server is ready
only once it has loaded a TTFT and a TPOT model, so the trainer serves the documented prior
as ttft.joblib and tpot.joblib from its first second: regressors of the settings' library
fitted, by squared error, to the prior's formula on generated rows spanning what the EPP
sends. They follow the formula to within a few percent (tests/training_server/legacy/
test_legacy_files.py measures it); the formula itself stays what our own servers answer. Written
to <model_dir>/legacy-prior/ at start-up, atomically, and only when the bytes change, so
their mtime (which llm-d servers compare to decide whether to download) moves only when the
model does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from shared.artifact import replace_file
from shared.cpus import available_cpus
from shared.features import NUMERIC_FIELDS, Columns
from shared.prior import prior_predict
from shared.settings import LegacyArtifacts, ModelType, ObjectiveType, TrainingSettings
from shared.targets import TARGETS, Target
from training_server.legacy.regressors import (
    FILE_NAMES,
    LegacyFit,
    dump,
    fit_calibrated_legacy,
    fit_legacy,
    settings_columns,
)

PRIOR_DIR = "legacy-prior"
ROWS = 16384
SEED = 20261203


def prior_dir(model_dir: Path) -> Path:
    return model_dir / PRIOR_DIR


def _log_uniform(rng: np.random.Generator, high: float, zeros: float) -> np.ndarray:
    """Integers 1..high spread evenly in log scale, a `zeros` share of them 0."""
    values = np.floor(np.exp(rng.uniform(0.0, np.log(high), ROWS)))
    return np.where(rng.random(ROWS) < zeros, 0.0, values)


def generated_rows(seed: int = SEED) -> Columns:
    """Rows spanning what the EPP sends: prompts to 32k tokens, queues to 32, up to 64
    running requests, up to 64k tokens in flight, every pod role."""
    rng = np.random.default_rng(seed)
    columns: Columns = {name: np.zeros(ROWS) for name in NUMERIC_FIELDS}
    columns.update(
        kv_cache_percentage=rng.random(ROWS),
        prefix_cache_score=np.where(rng.random(ROWS) < 0.4, 0.0, rng.random(ROWS)),
        input_token_length=_log_uniform(rng, 32768, zeros=0.02),
        num_request_waiting=_log_uniform(rng, 32, zeros=0.5),
        num_request_running=rng.integers(0, 65, ROWS).astype(np.float64),
        num_tokens_generated=rng.integers(1, 1025, ROWS).astype(np.float64),
        prefill_tokens_in_flight=_log_uniform(rng, 65536, zeros=0.3),
        decode_tokens_in_flight=rng.integers(0, 16385, ROWS).astype(np.float64),
        pod_type_code=rng.integers(0, 3, ROWS).astype(np.float64),
    )
    return columns


@functools.cache
def _prior_file(model_type: ModelType, target: Target, names: tuple[str, ...]) -> bytes:
    # The prior is one value per row: its mean and its p90 alike, so squared error; more and
    # deeper trees than a retrain uses, since it is fitted once per process.
    fit = LegacyFit(
        model_type,
        ObjectiveType.MEAN,
        0.5,
        n_estimators=200,
        max_depth=6,
        learning_rate=0.2,
        min_rows_per_leaf=1,
        threads=1,
    )
    columns = generated_rows()
    return dump(fit_legacy(fit, list(names), columns, prior_predict(target, columns)))


def prior_file(settings: TrainingSettings, target: Target) -> bytes:
    """The prior of `target` as joblib bytes, in the settings' library and llm-d columns."""
    return _prior_file(settings.model_type, target, tuple(settings_columns(settings, target)))


def publish_prior_files(settings: TrainingSettings) -> None:
    """Write (or keep, when unchanged) <model_dir>/legacy-prior/{ttft,tpot}.joblib."""
    folder = prior_dir(settings.model_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for target in TARGETS:
        path = folder / FILE_NAMES[target]
        data = prior_file(settings, target)
        if not path.is_file() or path.read_bytes() != data:
            replace_file(path, data)


def for_bundle(
    settings: TrainingSettings,
    windows: Mapping[Target, tuple[Columns, np.ndarray] | None],
) -> dict[str, bytes]:
    """The legacy files of a bundle (none unless on), name -> bytes: fitted on the rows each
    target's model was fitted on (`windows`: columns, actual ms); the prior's for a target
    that has no model yet (None)."""
    s = settings
    if s.legacy_artifacts is LegacyArtifacts.NONE:
        return {}
    files = {}
    for target, window in windows.items():
        if window is None:
            files[FILE_NAMES[target]] = prior_file(s, target)
            continue
        columns, actual = window
        how = LegacyFit.of(s, target, threads=s.train_threads or available_cpus())
        files[FILE_NAMES[target]] = dump(
            fit_calibrated_legacy(how, settings_columns(s, target), columns, actual)
        )
    return files
