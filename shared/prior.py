"""The documented cold-start prior, served for a target until a trained model exists.

Readiness of the EPP pod depends on the prediction sidecar, so it must answer before any
sample has arrived. These are deliberately pessimistic round figures for a modern GPU
(prefill of roughly 10k tokens/s, ~10 ms per decode step): a prior that under-predicts
would route too much load to one pod before the first real model lands.

    ttft_ms = 50 + 0.1 * (effective_input_tokens + prefill_tokens_in_flight)
                 + 200 * num_request_waiting
    tpot_ms = 10 + 0.5 * num_request_running + 20 * kv_cache_percentage
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shared.features import FEATURES, Columns
from shared.targets import Target

PRIOR_VERSION = "cold-start-prior"

# The formula's terms: ms per unit of each feature column it reads (intercepts apart), as
# written above (tests/shared/test_prior.py holds prior_predict to them). A column that
# enters only through another (input_token_length and prefix_cache_score, through
# effective_input_tokens) has no term of its own.
PRIOR_WEIGHTS: dict[Target, dict[str, float]] = {
    Target.TTFT: {
        "effective_input_tokens": 0.1,
        "prefill_tokens_in_flight": 0.1,
        "num_request_waiting": 200.0,
    },
    Target.TPOT: {"num_request_running": 0.5, "kv_cache_percentage": 20.0},
}
PRIOR_INTERCEPTS = {Target.TTFT: 50.0, Target.TPOT: 10.0}


def prior_importances(target: Target, names: Sequence[str]) -> dict[str, float]:
    """The prior's importances over `names` (and any column it reads beyond them): its weight
    per column, 0 for a column without a term of its own."""
    weights = PRIOR_WEIGHTS[target]
    return {name: weights.get(name, 0.0) for name in [*names, *weights]}


def prior_predict(target: Target, columns: Columns) -> np.ndarray:
    if target is Target.TTFT:
        tokens = FEATURES["effective_input_tokens"](columns) + columns["prefill_tokens_in_flight"]
        return 50.0 + 0.1 * tokens + 200.0 * columns["num_request_waiting"]
    return 10.0 + 0.5 * columns["num_request_running"] + 20.0 * columns["kv_cache_percentage"]
