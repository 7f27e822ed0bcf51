"""Tree-model backends: fit, save, load and predict in each library's native format.

The only module that imports xgboost or lightgbm. Artifacts are XGBoost JSON and LightGBM
text: readable, versioned by the library, and never unpickled.

The quantile objective is our own pinball-loss gradient, not the libraries' built-in one:
their built-ins re-fit every leaf to a residual quantile after the split search, which
breaks monotone constraints (XGBoost: 38 of 60 sweeps decreased, by up to 34 %) or is refused
with them (LightGBM). With a plain gradient step the libraries enforce the constraints while
growing the trees. The step is scaled by the spread of the labels, so a target with a 3 %
spread (TPOT) and one with a 10x spread (TTFT) converge alike; measured on the traces in
benchmarks/README.md. Models start from a quantile of the labels (the one sought, or a lower
`start_quantile` for trees), baked into the saved model, so the files stay self-contained.
"""

from __future__ import annotations

import ctypes
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from shared.settings import ModelType, ObjectiveType
from shared.tree_eval import CompiledTrees, compile_lightgbm, compile_xgboost


@dataclass(frozen=True)
class FitParams:
    objective: ObjectiveType
    quantile: float
    n_estimators: int = 100
    max_depth: int = 4
    learning_rate: float = 0.1
    threads: int = 0  # 0: the library's default
    monotone: tuple[int, ...] | None = None  # per feature: 1 non-decreasing, 0 free
    min_rows_per_leaf: int = 5
    # L2 shrinkage of every leaf's step, in rows: a leaf of n rows moves n / (n + this) of
    # its unshrunk step, so a few rows of one event (a stall) cannot pull a leaf far from its
    # parent while a populated region still converges. 0: the library's default.
    leaf_prior_rows: float = 0.0
    # Where the pinball boosting starts (a quantile of the labels; None: `quantile`). Trees
    # climb q / (1 - q) = 9x faster than they descend, so a start below the target quantile
    # reaches every leaf's p90 in fewer trees (benchmarks/README.md). No trees: `quantile`.
    start_quantile: float | None = None


# Below this the labels are constant for all practical purposes (log space: 0.1 %).
MIN_SPREAD = 1e-3


@dataclass(frozen=True)
class Objective:
    """What one fit minimises, in the terms both libraries take."""

    start: float  # every model starts from this output
    hessian: float  # per row: 1 for squared error; 1 / spread for the pinball gradient
    gradient: Callable[[np.ndarray, np.ndarray], np.ndarray] | None  # None: squared error


def objective_for(y: np.ndarray, params: FitParams) -> Objective:
    if params.objective is ObjectiveType.MEAN:
        return Objective(start=float(np.mean(y)) if len(y) else 0.0, hessian=1.0, gradient=None)
    q = params.quantile
    sought = float(np.quantile(y, q)) if len(y) else 0.0
    start_at = params.start_quantile
    trees = params.n_estimators > 0 and start_at is not None and len(y) > 0
    start = float(np.quantile(y, start_at)) if trees and start_at is not None else sought
    # Scale of one step: the distance from the median to the quantile sought.
    spread = max(sought - float(np.quantile(y, 0.5)) if len(y) else 0.0, MIN_SPREAD)

    def pinball_gradient(output: np.ndarray, label: np.ndarray) -> np.ndarray:
        return np.where(label > output, -q, 1.0 - q)

    return Objective(start=start, hessian=1.0 / spread, gradient=pinball_gradient)


def _fixed_label_objective(
    gradient: Callable[[np.ndarray, np.ndarray], np.ndarray], y: np.ndarray, hessian: float
) -> Callable[[np.ndarray, Any], tuple[np.ndarray, np.ndarray]]:
    """A custom objective for either library over labels `y`: the labels and the constant
    hessian are made once, not copied out of the library's data on every round."""
    labels = np.asarray(y, dtype=np.float64)
    hessians = np.full(len(labels), hessian)

    def custom(output: np.ndarray, _data: Any) -> tuple[np.ndarray, np.ndarray]:
        return gradient(output, labels), hessians

    return custom


def _monotone(params: FitParams) -> tuple[int, ...] | None:
    """The monotone constraints to pass, or None when no feature is constrained."""
    return params.monotone if params.monotone and any(params.monotone) else None


class Backend(Protocol):
    model_type: ModelType
    file_suffix: str

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams, names: Sequence[str]) -> Any: ...

    def save(self, model: Any, path: Path) -> None: ...

    def load(self, path: Path) -> Any: ...

    def predict(self, model: Any, x: np.ndarray) -> np.ndarray: ...

    def num_features(self, model: Any) -> int: ...

    def feature_names(self, model: Any) -> list[str] | None: ...

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]: ...

    def split_count(self, model: Any) -> int:
        """Split nodes over every tree: 0 for a model that answers one constant."""
        ...

    def compile(self, model: Any) -> CompiledTrees: ...


class _DensePredict:
    """XGBoost's public C API call XGBoosterPredictFromDense, without the Python wrapper's
    bookkeeping around it (~120 us a call of inplace_predict's ~250; benchmarks/README.md).
    Same entry point and arguments as inplace_predict uses, so the same numbers."""

    def __init__(self) -> None:
        import xgboost.libpath

        self.lib = ctypes.cdll.LoadLibrary(xgboost.libpath.find_lib_path()[0])
        self.lib.XGBGetLastError.restype = ctypes.c_char_p
        self.config = json.dumps(
            {
                "type": 0,
                "training": False,
                "iteration_begin": 0,
                "iteration_end": 0,
                "strict_shape": False,
                "missing": float("nan"),
                "cache_id": 0,
            }
        ).encode()

    def __call__(self, handle: Any, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        interface = json.dumps(
            {
                "data": [x.ctypes.data, True],
                "shape": list(x.shape),
                "strides": None,
                "typestr": "<f4",
                "version": 3,
            }
        ).encode()
        shape = ctypes.POINTER(ctypes.c_uint64)()
        dims = ctypes.c_uint64()
        out = ctypes.POINTER(ctypes.c_float)()
        status = self.lib.XGBoosterPredictFromDense(
            handle,
            interface,
            self.config,
            None,
            ctypes.byref(shape),
            ctypes.byref(dims),
            ctypes.byref(out),
        )
        if status != 0:
            raise RuntimeError(self.lib.XGBGetLastError().decode())
        if dims.value != 1 or shape[0] != len(x):
            raise RuntimeError(f"unexpected prediction shape ({dims.value} dims)")
        # The buffer belongs to the booster (per thread) until its next call: copy now.
        return np.ctypeslib.as_array(out, shape=(len(x),)).astype(np.float64)


@functools.cache
def _dense_predict() -> _DensePredict:
    return _DensePredict()


class XGBoostBackend:
    model_type = ModelType.XGBOOST
    file_suffix = ".json"

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams, names: Sequence[str]) -> Any:
        import xgboost as xgb

        objective = objective_for(y, params)
        booster_params: dict[str, Any] = {
            "tree_method": "hist",
            "max_depth": params.max_depth,
            "eta": params.learning_rate,
            "min_child_weight": params.min_rows_per_leaf * objective.hessian,
            "base_score": objective.start,
            "objective": "reg:squarederror",  # also how the saved model reads its output
            "verbosity": 0,
        }
        if params.leaf_prior_rows:  # else XGBoost's own lambda (1)
            booster_params["lambda"] = params.leaf_prior_rows * objective.hessian
        if params.threads:
            booster_params["nthread"] = params.threads
        if (monotone := _monotone(params)) is not None:
            booster_params["monotone_constraints"] = "(" + ",".join(map(str, monotone)) + ")"
        custom = None
        if objective.gradient is not None:
            gradient, hessian = objective.gradient, objective.hessian

            custom = _fixed_label_objective(gradient, y, hessian)

        # Names go on the booster after the fit: on the DMatrix, xgboost would check them
        # on every round's prediction (~8 % of a small fit). Named features make the tree
        # dumps the EPP fetches self-describing.
        dtrain = xgb.DMatrix(x, label=y)
        booster = xgb.train(booster_params, dtrain, num_boost_round=params.n_estimators, obj=custom)
        booster.feature_names = list(names)
        return booster

    def save(self, model: Any, path: Path) -> None:
        model.save_model(str(path))

    def load(self, path: Path) -> Any:
        import xgboost as xgb

        booster = xgb.Booster(model_file=str(path))
        # One thread per predict: the server runs one worker per core, and the batches are small.
        booster.set_param({"nthread": 1})
        return booster

    def predict(self, model: Any, x: np.ndarray) -> np.ndarray:
        try:
            return _dense_predict()(model.handle, x)
        except (OSError, RuntimeError, AttributeError):  # no C entry point: the wrapper
            return np.asarray(model.inplace_predict(x), dtype=np.float64)

    def num_features(self, model: Any) -> int:
        return int(model.num_features())

    def feature_names(self, model: Any) -> list[str] | None:
        return None if model.feature_names is None else list(model.feature_names)

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]:
        gain = model.get_score(importance_type="gain")
        return {name: float(gain.get(name, 0.0)) for name in names}

    def split_count(self, model: Any) -> int:
        return int(sum(model.get_score(importance_type="weight").values()))

    def compile(self, model: Any) -> CompiledTrees:
        return compile_xgboost(model)

    def tree_dumps(self, model: Any) -> list[str]:
        """One JSON object per tree, the format the EPP's Go client evaluates."""
        return list(model.get_dump(dump_format="json"))


class LightGBMBackend:
    model_type = ModelType.LIGHTGBM
    file_suffix = ".txt"

    def fit(self, x: np.ndarray, y: np.ndarray, params: FitParams, names: Sequence[str]) -> Any:
        import lightgbm as lgb

        objective = objective_for(y, params)
        # n_estimators=0 asks for the start alone: LightGBM needs one tree, so one that
        # cannot split, whose leaf is then set to the start.
        constant = params.n_estimators == 0
        lgb_params: dict[str, Any] = {
            "max_depth": params.max_depth,
            "num_leaves": min(2**params.max_depth, 63),
            "learning_rate": params.learning_rate,
            "min_gain_to_split": 1e300 if constant else 0.0,
            "feature_pre_filter": False,  # a few rows must not leave it with no feature
            "min_data_in_leaf": params.min_rows_per_leaf,
            "min_sum_hessian_in_leaf": params.min_rows_per_leaf * objective.hessian,
            "lambda_l2": params.leaf_prior_rows * objective.hessian,
            "objective": "regression",
            "boost_from_average": False,  # the start is given as init_score, then baked in
            "verbosity": -1,
        }
        if params.threads:
            lgb_params["num_threads"] = params.threads
        if (monotone := _monotone(params)) is not None:
            lgb_params["monotone_constraints"] = list(monotone)
        if objective.gradient is not None:
            gradient, hessian = objective.gradient, objective.hessian

            lgb_params["objective"] = _fixed_label_objective(gradient, y, hessian)
        data = lgb.Dataset(
            x, label=y, feature_name=list(names), init_score=np.full(len(y), objective.start)
        )
        model = lgb.train(lgb_params, data, num_boost_round=max(1, params.n_estimators))
        # LightGBM does not save an init score: add it to every leaf of the first tree.
        first = model.dump_model(num_iteration=1)["tree_info"][0]
        for leaf in range(first["num_leaves"]):
            base = 0.0 if constant else model.get_leaf_output(0, leaf)
            model.set_leaf_output(0, leaf, base + objective.start)
        return model

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
        # raw_score: older bundles fitted with objective=quantile carry no output transform
        # either, and a custom objective has none; the caller maps the output to ms.
        return np.asarray(model.predict(x, raw_score=True, num_threads=1), dtype=np.float64)

    def num_features(self, model: Any) -> int:
        return int(model.num_feature())

    def feature_names(self, model: Any) -> list[str] | None:
        return list(model.feature_name())

    def importances(self, model: Any, names: Sequence[str]) -> dict[str, float]:
        gain = model.feature_importance(importance_type="gain")
        return {name: float(value) for name, value in zip(names, gain, strict=True)}

    def split_count(self, model: Any) -> int:
        return int(np.sum(model.feature_importance(importance_type="split")))

    def compile(self, model: Any) -> CompiledTrees:
        return compile_lightgbm(model)


BACKENDS: dict[ModelType, Backend] = {
    ModelType.XGBOOST: XGBoostBackend(),
    ModelType.LIGHTGBM: LightGBMBackend(),
}


def backend_for(model_type: ModelType | str) -> Backend:
    return BACKENDS[ModelType(model_type)]


def library_versions() -> dict[str, str]:
    """The libraries' versions, recorded in every manifest a trainer writes."""
    import lightgbm as lgb
    import xgboost as xgb

    return {"xgboost": xgb.__version__, "lightgbm": lgb.__version__}
