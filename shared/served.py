"""What a prediction server answers for one target: a model's output in ms times its
calibration factor; shared.predictor serves with it, the trainer's evaluation scores with it.

The output comes from the compiled walk (shared.tree_eval) where it serves the batch, else
from the library; milliseconds from the output by the model's space (shared.target_space);
then one factor, the exp of the bundle's conformal log factor plus the live one
(shared.live_calibration); never below 0 (a latency is never negative).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shared.backends import Backend
from shared.features import Columns
from shared.target_space import TargetSpace, to_ms
from shared.tree_eval import EVALUATOR, CompiledTrees, compiled_or_none

# The C walk beats the libraries' predict at every batch size (no ~110 us fixed cost per
# call, and 1.5-2x faster per row); the numpy fallback only up to this many rows, above
# which the libraries' C++ wins (benchmarks/README.md, bench_predict.py).
NUMPY_WALK_MAX_ROWS = 32


def walk_serves(rows: int) -> bool:
    """Whether a compiled model, rather than the library, predicts a batch of `rows`."""
    return EVALUATOR == "c" or rows <= NUMPY_WALK_MAX_ROWS


def compile_model(backend: Backend, model: Any, n_features: int) -> CompiledTrees | None:
    """`model` as the walk evaluates it, when that reproduces the library (else None)."""
    return compiled_or_none(backend.compile, model, n_features, backend.predict)


def model_output(
    backend: Backend, model: Any, compiled: CompiledTrees | None, matrix: np.ndarray
) -> np.ndarray:
    """The model's raw output on `matrix` (in its space): the walk where it serves, else the
    library."""
    if compiled is not None and walk_serves(len(matrix)):
        return compiled.predict(matrix)
    output: np.ndarray = backend.predict(model, matrix)
    return output


def calibration_scale(log_offset: float, live_log_offset: float = 0.0) -> float:
    """The factor served answers are multiplied by: the bundle's and the live log factors."""
    return math.exp(log_offset + live_log_offset)


def answer_ms(
    space: TargetSpace, columns: Columns, output: np.ndarray, scale: float | np.ndarray
) -> np.ndarray:
    """The answer in ms to rows `columns` from a model's raw `output` (a model of `space`),
    times `scale` (calibration_scale, one number or one per row; 1.0: uncalibrated),
    clamped at 0."""
    ms: np.ndarray = np.maximum(to_ms(space, columns, output) * scale, 0.0)
    return ms
