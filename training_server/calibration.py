"""Split-conformal calibration of a quantile model, in log space.

A p90 model that really covers 80 % (or 97 %) of requests misleads the EPP's SLO checks.
On rows the model never saw we take the scores s = log(actual) - log(predicted) and the
finite-sample conformal quantile c of them; serving prediction * exp(c) then covers the
requested share of new rows from the same distribution. Log space makes the correction a
factor, so a 50 ms and a 50 s regime are corrected alike. It also turns a mean model into a
quantile one ("mean plus conformal offset").
"""

from __future__ import annotations

import math

import numpy as np

from shared.features import Columns

# With fewer rows the (n+1)q-th score is one of the few largest: three stale outliers among
# 30 rows (the first requests of a cold vLLM) once made a 17x factor in a replay. The live
# calibration (training_server.live_calibrator) corrects the served p90 until then.
MIN_CALIBRATION_ROWS = 100
# A factor outside e^-3..e^3 (0.05x..20x) means the model is broken, not mis-calibrated.
MAX_ABS_LOG_OFFSET = 3.0
_EPS_MS = 1e-3


def conformal_log_offset(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> float:
    """log factor c with P(actual <= predicted * e^c) >= quantile; 0 with too few rows."""
    n = len(actual)
    if n < MIN_CALIBRATION_ROWS:
        return 0.0
    scores = np.log(np.maximum(actual, _EPS_MS)) - np.log(np.maximum(predicted, _EPS_MS))
    # the ceil((n + 1) q)-th smallest score: the finite-sample conformal quantile
    rank = min(n, math.ceil((n + 1) * quantile))
    offset = float(np.partition(scores, rank - 1)[rank - 1])
    return max(-MAX_ABS_LOG_OFFSET, min(MAX_ABS_LOG_OFFSET, offset))


def split_oldest(columns: Columns, y: np.ndarray, share: float) -> tuple[
    tuple[Columns, np.ndarray], tuple[Columns, np.ndarray]
]:
    """(oldest `share` of the rows, the rest): calibrate on the past, evaluate on the future."""
    cut = int(len(y) * share)
    older = ({k: v[:cut] for k, v in columns.items()}, y[:cut])
    newer = ({k: v[cut:] for k, v in columns.items()}, y[cut:])
    return older, newer
