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

import numpy as np

from shared.features import FEATURES, Columns
from shared.targets import Target

PRIOR_VERSION = "cold-start-prior"


def prior_predict(target: Target, columns: Columns) -> np.ndarray:
    if target is Target.TTFT:
        tokens = FEATURES["effective_input_tokens"](columns) + columns["prefill_tokens_in_flight"]
        return 50.0 + 0.1 * tokens + 200.0 * columns["num_request_waiting"]
    return 10.0 + 0.5 * columns["num_request_running"] + 20.0 * columns["kv_cache_percentage"]
