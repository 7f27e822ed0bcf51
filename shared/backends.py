"""Tree-model backends: fit, save, load and predict in each library's native format.

The only module that imports xgboost or lightgbm. Artifacts are XGBoost JSON and LightGBM
text: readable, versioned by the library, and never unpickled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from shared.settings import ModelType, ObjectiveType


@dataclass(frozen=True)
class FitParams:
    objective: ObjectiveType
    quantile: float
    n_estimators: int = 200
    max_depth: int = 6
    learning_rate: float = 0.1
    threads: int = 0  # 0: the library's default
    monotone: tuple[int, ...] | None = None  # per feature: 1 non-decreasing, 0 free


def _constrained(params: FitParams) -> bool:
    """Monotone constraints hold only without a quantile leaf refresh (see
    shared.features.monotone_constraints)."""
    return bool(params.monotone and any(params.monotone)) and (
        params.objective is ObjectiveType.MEAN
    )


class Backend(Protocol):
    model_type: ModelType
    file_suffix: str

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams,
            names: Sequence[str]) -> Any: ...

    def save(self, model: Any, path: Path) -> None: ...

    def load(self, path: Path) -> Any: ...

    def predict(self, model: Any, x: np.ndarray) -> np.ndarray: ...

    def num_features(self, model: Any) -> int: ...

    def feature_names(self, model: Any) -> list[str] | None: ...

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]: ...


class XGBoostBackend:
    model_type = ModelType.XGBOOST
    file_suffix = ".json"

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams,
            names: Sequence[str]) -> Any:
        import xgboost as xgb

        booster_params: dict[str, Any] = {
            "tree_method": "hist",
            "max_depth": params.max_depth,
            "eta": params.learning_rate,
            "verbosity": 0,
        }
        if params.threads:
            booster_params["nthread"] = params.threads
        if _constrained(params):
            booster_params["monotone_constraints"] = "(" + ",".join(map(str, params.monotone)) + ")"
        if params.objective is ObjectiveType.QUANTILE:
            booster_params.update(objective="reg:quantileerror", quantile_alpha=params.quantile)
        else:
            booster_params["objective"] = "reg:squarederror"
        # Named features make the tree dumps the EPP fetches self-describing.
        dtrain = xgb.DMatrix(x, label=y, feature_names=list(names))
        return xgb.train(booster_params, dtrain, num_boost_round=params.n_estimators)

    def save(self, model: Any, path: Path) -> None:
        model.save_model(str(path))

    def load(self, path: Path) -> Any:
        import xgboost as xgb

        booster = xgb.Booster(model_file=str(path))
        # One thread per predict: the server runs one worker per core, and the batches are small.
        booster.set_param({"nthread": 1})
        return booster

    def predict(self, model: Any, x: np.ndarray) -> np.ndarray:
        return np.asarray(model.inplace_predict(x), dtype=np.float64)

    def num_features(self, model: Any) -> int:
        return int(model.num_features())

    def feature_names(self, model: Any) -> list[str] | None:
        return None if model.feature_names is None else list(model.feature_names)

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]:
        gain = model.get_score(importance_type="gain")
        return {name: float(gain.get(name, 0.0)) for name in names}

    def tree_dumps(self, model: Any) -> list[str]:
        """One JSON object per tree, the format the EPP's Go client evaluates."""
        return list(model.get_dump(dump_format="json"))


class LightGBMBackend:
    model_type = ModelType.LIGHTGBM
    file_suffix = ".txt"

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams,
            names: Sequence[str]) -> Any:
        import lightgbm as lgb

        lgb_params: dict[str, Any] = {
            "max_depth": params.max_depth,
            "num_leaves": min(2**params.max_depth, 63),
            "learning_rate": params.learning_rate,
            "verbosity": -1,
        }
        if params.threads:
            lgb_params["num_threads"] = params.threads
        if _constrained(params):
            lgb_params["monotone_constraints"] = list(params.monotone)
        if params.objective is ObjectiveType.QUANTILE:
            lgb_params.update(objective="quantile", alpha=params.quantile)
        else:
            lgb_params["objective"] = "regression"
        return lgb.train(lgb_params, lgb.Dataset(x, label=y, feature_name=list(names)), num_boost_round=params.n_estimators)

    def save(self, model: Any, path: Path) -> None:
        model.save_model(str(path))

    def load(self, path: Path) -> Any:
        import lightgbm as lgb

        # LightGBM aborts the whole process on some truncated files instead of raising,
        # so refuse a text that lacks the sections a complete save always writes.
        text = path.read_text(errors="replace")
        if "end of trees" not in text or "end of parameters" not in text:
            raise ValueError(f"{path.name} is not a complete LightGBM model text")
        return lgb.Booster(model_str=text)

    def predict(self, model: Any, x: np.ndarray) -> np.ndarray:
        return np.asarray(model.predict(x, num_threads=1), dtype=np.float64)

    def num_features(self, model: Any) -> int:
        return int(model.num_feature())

    def feature_names(self, model: Any) -> list[str] | None:
        return list(model.feature_name())

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]:
        gain = model.feature_importance(importance_type="gain")
        return {name: float(value) for name, value in zip(names, gain, strict=True)}


BACKENDS: dict[ModelType, Backend] = {
    ModelType.XGBOOST: XGBoostBackend(),
    ModelType.LIGHTGBM: LightGBMBackend(),
}


def backend_for(model_type: ModelType | str) -> Backend:
    return BACKENDS[ModelType(model_type)]
