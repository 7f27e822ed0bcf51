"""llm-d's legacy models: its feature frame, the regressors fitted on it, their joblib bytes
(ttft.joblib, tpot.joblib; written on request, LATENCY_LEGACY_ARTIFACTS=joblib).

`ttft.joblib` and `tpot.joblib` are what an llm-d prediction server downloads from
`/model/{ttft,tpot}/download` and joblib-loads: scikit-learn-API XGBoost (or LightGBM)
regressors that predict milliseconds from a pandas frame with llm-d's feature columns, in
llm-d's names, dtypes and order (docs/api.md section 5, as the llm-d prediction
server builds its frame). They let a fleet move one server at a time: our trainer feeding
old prediction servers. Pickles run code when loaded, so they are off by default, and this
project only ever writes them: nothing here (or anywhere in it) loads one.

joblib, scikit-learn and pandas (the `legacy` extra) are imported lazily, only here.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.features import FEATURES, Columns
from shared.settings import ModelType, ObjectiveType, TrainingSettings
from shared.targets import Target

if TYPE_CHECKING:
    import pandas as pd

FILE_NAMES = {Target.TTFT: "ttft.joblib", Target.TPOT: "tpot.joblib"}
# llm-d's categories: "" = monolithic. It makes any other label NaN (missing) when it
# predicts; our store keeps only its code, where such labels count as monolithic ("").
POD_TYPES = ("", "prefill", "decode")
PREFIX_BUCKETS = (0, 1, 2, 3)
# The largest float64 below 2**63: counts up to the schema's bound cast to int64 intact.
_INT64_CEILING = float(2**63 - 1024)
_INTEGER_COLUMNS = frozenset(
    {
        "is_queued",
        "input_token_length",
        "num_request_waiting",
        "num_request_running",
        "prefill_tokens_in_flight",
        "decode_tokens_in_flight",
        "encoder_matched_size",
        "encoder_input_size",
        "num_tokens_generated",
    }
)


def llmd_columns(target: Target, *, token_in_flight: bool, encoder: bool) -> list[str]:
    """The llm-d feature columns of `target`, in order, under the same two switches
    (LATENCY_ENABLE_TOKEN_IN_FLIGHT_FEATURES, LATENCY_ENABLE_ENCODER_FEATURES)."""
    in_flight = ["prefill_tokens_in_flight", "decode_tokens_in_flight"] if token_in_flight else []
    head = [
        "is_queued",
        "kv_cache_percentage",
        "input_token_length",
        "num_request_waiting",
        "num_request_running",
        *in_flight,
    ]
    if target is Target.TPOT:
        return [*head, "num_tokens_generated", "pod_type_cat"]
    sizes = ["encoder_matched_size", "encoder_input_size"] if encoder else []
    return [
        *head,
        *sizes,
        "prefix_cache_score",
        "effective_input_tokens",
        "prefill_score_bucket",
        "pod_type_cat",
    ]


def settings_columns(settings: TrainingSettings, target: Target) -> list[str]:
    return llmd_columns(
        target,
        token_in_flight=settings.enable_token_in_flight_features,
        encoder=settings.enable_encoder_features,
    )


def llmd_frame(columns: Columns, names: list[str]) -> pd.DataFrame:
    """Our columns (float64 arrays, pod_type as its code) as llm-d's frame: integer counts as
    int64, fractions as float64, the prefix bucket and pod type as pandas categoricals."""
    import pandas as pd

    data: dict[str, Any] = {}
    for name in names:
        if name == "pod_type_cat":
            labels = np.array(POD_TYPES, dtype=object)[columns["pod_type_code"].astype(np.int64)]
            data[name] = pd.Categorical(labels, categories=list(POD_TYPES), ordered=False)
        elif name == "prefill_score_bucket":
            buckets = FEATURES[name](columns).astype(np.int64)
            data[name] = pd.Categorical(buckets, categories=list(PREFIX_BUCKETS), ordered=True)
        elif name in _INTEGER_COLUMNS:
            data[name] = np.minimum(FEATURES[name](columns), _INT64_CEILING).astype(np.int64)
        else:
            data[name] = FEATURES[name](columns).astype(np.float64)
    return pd.DataFrame(data, columns=names)


@dataclass(frozen=True)
class LegacyFit:
    """How one legacy regressor is fitted: the library, its objective and tree sizes."""

    model_type: ModelType
    objective: ObjectiveType
    quantile: float
    n_estimators: int
    max_depth: int
    learning_rate: float
    min_rows_per_leaf: int
    threads: int

    @classmethod
    def of(cls, settings: TrainingSettings, target: Target, threads: int) -> LegacyFit:
        """The settings' library, objective and tree sizes (as our own fit of `target`)."""
        s = settings
        return cls(
            s.model_type,
            s.objective_type,
            s.quantile_alpha,
            s.n_estimators,
            s.max_depth,
            s.learning_rate,
            s.ttft_min_rows_per_leaf if target is Target.TTFT else s.tpot_min_rows_per_leaf,
            threads,
        )

    def regressor(self) -> Any:
        """An unfitted scikit-learn-API regressor (XGBRegressor or LGBMRegressor)."""
        quantile = self.objective is ObjectiveType.QUANTILE
        if self.model_type is ModelType.XGBOOST:
            from xgboost import XGBRegressor

            objective: dict[str, Any] = (
                {"objective": "reg:quantileerror", "quantile_alpha": self.quantile}
                if quantile
                else {"objective": "reg:squarederror"}
            )
            return XGBRegressor(
                n_estimators=self.n_estimators,
                max_depth=self.max_depth,
                learning_rate=self.learning_rate,
                min_child_weight=self.min_rows_per_leaf,
                tree_method="hist",
                enable_categorical=True,
                n_jobs=self.threads,
                random_state=0,
                verbosity=0,
                **objective,
            )
        from lightgbm import LGBMRegressor

        objective = (
            {"objective": "quantile", "alpha": self.quantile}
            if quantile
            else {"objective": "regression"}
        )
        return LGBMRegressor(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            num_leaves=min(2**self.max_depth, 63),
            learning_rate=self.learning_rate,
            min_child_samples=self.min_rows_per_leaf,
            n_jobs=self.threads,
            random_state=0,
            verbosity=-1,
            **objective,
        )


def fit_legacy(fit: LegacyFit, names: list[str], columns: Columns, actual_ms: np.ndarray) -> Any:
    """A regressor on llm-d's columns `names`, fitted on these rows to predict ms."""
    model = fit.regressor()
    model.fit(llmd_frame(columns, names), actual_ms)
    return model


# The legacy quantile model's coverage is measured out of fold before its final fit: every
# row is predicted once by a probe fitted without it.
CHECK_FOLDS = 3
# Below this many rows a third is too few to measure a 0.9 coverage: fitted as asked.
MIN_CHECK_ROWS = 250
MAX_ALPHA = 0.99


def fit_calibrated_legacy(
    fit: LegacyFit, names: list[str], columns: Columns, actual_ms: np.ndarray
) -> Any:
    """fit_legacy, asked for the quantile level that covers as the requested one should.

    The libraries' own quantile objectives under-cover on a few thousand rows (0.85 for a
    0.9 asked, where our served p90s cover 0.9: tests/training_server/legacy/
    test_legacy_files.py). Probes fitted on 2/3 of the rows predict the other third, in
    turn, and the final fit on all rows asks for the level raised by their shortfall. All
    the rows measure it, not one held-out fifth: a fifth of ~1,600 rows put the file's
    coverage anywhere in 0.89-0.93 depending on which rows fell in it. The probes cost
    about one more fit (100,000 rows: 5.1 s with them, 2.6 s for the final fit alone). A
    mean objective is fitted as is."""
    n = len(actual_ms)
    if fit.objective is not ObjectiveType.QUANTILE or n < MIN_CHECK_ROWS:
        return fit_legacy(fit, names, columns, actual_ms)
    return fit_legacy(
        replace(fit, quantile=calibrated_level(fit, names, columns, actual_ms)),
        names,
        columns,
        actual_ms,
    )


def calibrated_level(
    fit: LegacyFit, names: list[str], columns: Columns, actual_ms: np.ndarray
) -> float:
    """The level to ask for: the requested quantile raised by the out-of-fold shortfall of
    probes asked for it (never lowered: over-coverage is the libraries' rare case)."""
    n = len(actual_ms)
    folds = np.random.default_rng(0).permutation(n) % CHECK_FOLDS
    covered = 0
    for fold in range(CHECK_FOLDS):
        train, check = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
        probe = fit_legacy(fit, names, _rows(columns, train), actual_ms[train])
        predicted = probe.predict(llmd_frame(_rows(columns, check), names))
        covered += int(np.count_nonzero(actual_ms[check] <= predicted))
    coverage = covered / n
    return min(MAX_ALPHA, max(fit.quantile, fit.quantile + (fit.quantile - coverage)))


def _rows(columns: Columns, index: np.ndarray) -> Columns:
    return {name: values[index] for name, values in columns.items()}


def dump(model: Any) -> bytes:
    """The model as joblib bytes, as llm-d writes them (joblib.dump)."""
    import joblib  # type: ignore[import-untyped]

    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    return buffer.getvalue()
