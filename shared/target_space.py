"""The space a model is fitted in, and the way back to milliseconds.

Latencies are multiplicative: a queue twice as long doubles TTFT, and one error in a 50 ms
regime and a 50 s regime should weigh alike. So models are fitted on log(ms). TTFT is
further divided by (1 + num_request_waiting): under load the first token waits for the
requests ahead of it, and trees cannot extrapolate, so a model fitted on "ms per queued
request" keeps up when the queue grows past anything it has seen (measured on the chatbot
trace: coverage 0.54 -> 0.92; benchmarks/README.md). Each bundle names its space per target
in the manifest; "ms" is how bundles written before this module were fitted.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np

from shared.features import Columns
from shared.targets import Target

# Actuals are > 0 by contract (0 means "not measured"); the floor only guards log(0).
MIN_MS = 1e-3
# The largest latency a model answers: about 32 years, so no real prediction is ever cut,
# and still finite after any calibration factor (at most e^5). The contract bounds actuals
# only below: a model fitted on absurd ones (1e308 ms) would otherwise overflow exp() to
# inf, which JSON writes as null, which the EPP reads as 0 ms: the best pod of all.
MAX_MS = 1e12
_MAX_LOG_MS = math.log(MAX_MS)


class TargetSpace(StrEnum):
    MS = "ms"  # the model predicts milliseconds
    LOG_MS = "log_ms"  # the model predicts log(ms)
    LOG_MS_PER_QUEUED = "log_ms_per_queued"  # log(ms / (1 + num_request_waiting))


def space_for(target: Target) -> TargetSpace:
    """The space new models of `target` are fitted in."""
    return TargetSpace.LOG_MS_PER_QUEUED if target is Target.TTFT else TargetSpace.LOG_MS


def _log_queue(columns: Columns) -> np.ndarray:
    return np.log1p(columns["num_request_waiting"])


def to_label(space: TargetSpace, columns: Columns, ms: np.ndarray) -> np.ndarray:
    """What a model of `space` is fitted on, from observed milliseconds."""
    if space is TargetSpace.MS:
        return ms
    label: np.ndarray = np.log(np.maximum(ms, MIN_MS))
    return label - _log_queue(columns) if space is TargetSpace.LOG_MS_PER_QUEUED else label


def to_ms(space: TargetSpace, columns: Columns, output: np.ndarray) -> np.ndarray:
    """Milliseconds from a model's raw output (the inverse of to_label), at most MAX_MS."""
    ms: np.ndarray
    if space is TargetSpace.MS:
        ms = np.minimum(output, MAX_MS)
        return ms
    if space is TargetSpace.LOG_MS_PER_QUEUED:
        output = output + _log_queue(columns)
    ms = np.exp(np.minimum(output, _MAX_LOG_MS))
    return ms
