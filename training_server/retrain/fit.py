"""One target's fit (TargetFit: the model a retrain serves, its factor and scores) and the
fitting itself: a model of a target space on actuals in ms (fit_model, fit_params). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from shared.backends import Backend, FitParams
from shared.cpus import available_cpus
from shared.features import Columns, build_matrix, monotone_constraints
from shared.served import answer_ms
from shared.settings import TrainingSettings
from shared.target_space import TargetSpace, space_for, to_label
from shared.targets import Target
from shared.tree_eval import CompiledTrees

# From this many rows a target is answered by their quantile instead of the prior.
MIN_ROWS_FOR_A_QUANTILE = 10
# A fit gets one thread per this many rows (up to the configured threads): a second thread
# gains nothing on small fits, which are most of them now (3 per candidate per retrain;
# measured on TTFT rows: 1,500 and 8,000 rows 0.07 / 0.12-0.14 s with 1 or 2 threads,
# 40,000 rows 0.34 -> 0.28 s), and leaves the other core to the servers.
MIN_ROWS_PER_EXTRA_THREAD = 20_000
# Trees start from the labels' median, below the p90 they converge to: they climb 9x faster
# than they descend (shared.backends), so they reach the p90 of each regime in fewer trees
# (offline, 10 seeds: sharegpt TTFT 11.5 -> 8.5, chatbot TTFT 530 -> 515; benchmarks/README).
TREES_START_QUANTILE = 0.5


@dataclass
class TargetFit:
    """What a retrain serves for one target: the model (None: the prior answers), its space
    and factor, and how it scored."""

    model: Any | None
    features: tuple[str, ...]
    train_samples: int
    test_samples: int
    metrics: dict[str, float | None] = field(default_factory=dict)
    log_offset: float = 0.0  # cross-conformal correction served with the model
    space: TargetSpace = TargetSpace.MS
    regimes: dict[str, dict[str, float | int]] = field(default_factory=dict)
    choice: str | None = None  # the candidate served (retrain.candidates)
    # Out-of-fold pinball loss of every candidate considered (retrain.select); empty when
    # the last choice was kept (retrain.target.KeptChoice).
    candidates: dict[str, float] = field(default_factory=dict)
    chosen_on: int = 0  # training rows the choice was made on
    # The model as the prediction servers' walk evaluates it (shared.served.compile_model);
    # None: the library answers, as it does on a server for a model the walk cannot take.
    compiled: CompiledTrees | None = field(default=None, repr=False)


def fit_model(
    backend: Backend,
    params: FitParams,
    names: Sequence[str],
    columns: Columns,
    y: np.ndarray,
    space: TargetSpace,
) -> Any:
    """A model of `space` fitted on actuals `y` (ms)."""
    threads = min(params.threads or available_cpus(), 1 + len(y) // MIN_ROWS_PER_EXTRA_THREAD)
    return backend.fit(
        build_matrix(columns, names),
        to_label(space, columns, y),
        replace(params, threads=max(1, threads)),
        names,
    )


def model_ms(
    backend: Backend, model: Any, names: Sequence[str], space: TargetSpace, columns: Columns
) -> np.ndarray:
    """`model`'s answer in ms (a model of `space`) by the library, before any calibration
    factor: how the candidates' fold models, never served, are scored (retrain.select)."""
    return answer_ms(space, columns, backend.predict(model, build_matrix(columns, names)), 1.0)


def fit_params(settings: TrainingSettings, target: Target, names: Sequence[str]) -> FitParams:
    """The settings' hyperparameters plus `target`'s monotone constraints."""
    s = settings
    return FitParams(
        objective=s.objective_type,
        quantile=s.quantile_alpha,
        n_estimators=s.n_estimators,
        max_depth=s.max_depth,
        learning_rate=s.learning_rate,
        min_rows_per_leaf=(
            s.ttft_min_rows_per_leaf if target is Target.TTFT else s.tpot_min_rows_per_leaf
        ),
        leaf_prior_rows=(
            s.ttft_leaf_prior_rows if target is Target.TTFT else s.tpot_leaf_prior_rows
        ),
        # 0: the container's CPU quota; the libraries would take the node's core count.
        threads=s.train_threads or available_cpus(),
        monotone=monotone_constraints(
            target, names, per_queued=space_for(target) is TargetSpace.LOG_MS_PER_QUEUED
        ),
        start_quantile=TREES_START_QUANTILE,
    )
