"""The one feature definition, used by training and by every prediction route.

Rows travel as `Columns`: one float64 array per numeric request field plus a code per label
(`pod_type_code`, `pod_class_code`). A model bundle records the feature names it was trained
on, and prediction builds the matrix from those names, so the two sides cannot drift (and a
bundle from before a feature existed keeps serving: it never names it).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shared.schemas import REQUEST_ROW, RowKind
from shared.targets import Target

Columns = dict[str, np.ndarray]

# From the request row as PredictionRequest declares it (shared.schemas): every number is a
# column, and every label becomes a code column below (pod_type -> pod_type_code, ...).
FRACTION_FIELDS = tuple(f.name for f in REQUEST_ROW if f.kind is RowKind.FRACTION)
REQUIRED_COUNT_FIELDS = tuple(f.name for f in REQUEST_ROW if f.kind is RowKind.COUNT and f.required)
OPTIONAL_COUNT_FIELDS = tuple(
    f.name for f in REQUEST_ROW if f.kind is RowKind.COUNT and not f.required
)
NUMERIC_FIELDS = FRACTION_FIELDS + REQUIRED_COUNT_FIELDS + OPTIONAL_COUNT_FIELDS

# "" (monolithic) and every unrecognised role label ("both", "prefill-decode", ...) serve
# prefill and decode on one pod, so they share code 0; an unknown label never becomes NaN.
POD_TYPE_CODES = {"prefill": 1.0, "decode": 2.0}


def pod_type_code(pod_type: str | None) -> float:
    return POD_TYPE_CODES.get((pod_type or "").strip().lower(), 0.0)


# A hardware class is open-ended ("h200", "b200", "mi300x", ...), so its code cannot come
# from a table: it is the CRC-32 of the normalised label folded into 1 .. 2**24 - 1, a
# function of the label alone. The trainer and every prediction server agree on it without
# sharing state, whatever classes each has seen and in whatever order; 2**24 keeps every
# code exact in the float32 matrix the models read. "" (no class: llm-d's EPP) is 0.
POD_CLASS_CODE_SPAN = 2**24 - 1


def normalized_pod_class(pod_class: str | None) -> str:
    return (pod_class or "").strip().lower()


def pod_class_code(pod_class: str | None) -> float:
    name = normalized_pod_class(pod_class)
    if not name:
        return 0.0
    return float(zlib.crc32(name.encode("utf-8")) % POD_CLASS_CODE_SPAN + 1)


# Every label of the row is a categorical feature: its code function, and the column of
# codes it becomes (f"{label}_code"). A label added to the row needs its entry here.
LABEL_CODES: Mapping[str, Callable[[str | None], float]] = {
    "pod_type": pod_type_code,
    "pod_class": pod_class_code,
}
LABEL_FIELDS = tuple(f.name for f in REQUEST_ROW if f.kind is RowKind.LABEL)
if set(LABEL_FIELDS) != set(LABEL_CODES):
    raise TypeError(f"labels {LABEL_FIELDS} and their codes {tuple(LABEL_CODES)} differ")


def code_column(label: str) -> str:
    return f"{label}_code"


CODE_COLUMNS = tuple(code_column(name) for name in LABEL_FIELDS)

# Absent, "" or null: code 0 for every label (the EPP's rows, but for a role now and then).
NO_LABEL = frozenset({"", None})
if any(code(value) != 0.0 for code in LABEL_CODES.values() for value in NO_LABEL):
    raise TypeError("a label's code for '' and null must be 0")


def label_codes(code: Callable[[str | None], float], values: Sequence[Any]) -> np.ndarray:
    """The code column of `values` (one label's values, row by row). Rows carry few
    distinct labels (usually only "" or None, on the hot path), so each is coded once."""
    distinct = set(values)
    if len(distinct) == 1:
        (only,) = distinct
        if only in NO_LABEL:  # the common call: no class, a monolithic pod
            return np.zeros(len(values))
        return np.full(len(values), code(only), dtype=np.float64)
    codes = {v: code(v) for v in distinct}
    return np.fromiter((codes[v] for v in values), dtype=np.float64, count=len(values))


def _effective_input_tokens(c: Columns) -> np.ndarray:
    return (1.0 - c["prefix_cache_score"]) * c["input_token_length"]


def _prefill_score_bucket(c: Columns) -> np.ndarray:
    return np.minimum(np.floor(c["prefix_cache_score"] * 4.0), 3.0)


def _raw(name: str) -> Callable[[Columns], np.ndarray]:
    return lambda c: c[name]


FEATURES: Mapping[str, Callable[[Columns], np.ndarray]] = {
    "is_queued": lambda c: (c["num_request_waiting"] > 0).astype(np.float64),
    **{name: _raw(name) for name in NUMERIC_FIELDS},
    "effective_input_tokens": _effective_input_tokens,
    "prefill_score_bucket": _prefill_score_bucket,
    **{name: _raw(name) for name in CODE_COLUMNS},
}

# pod_class_code (the hardware class, ours) is in both lists and free of monotone
# constraints. A row without a class has code 0, and trees never split on a column that is
# 0 in every training row, so a store without classes trains the models it trained before;
# its bundles do not even name the feature (CARRIED_ONLY below).
# decode_tokens_in_flight and num_tokens_generated are left out on purpose: the EPP sends
# constants for them at prediction time (0 and 1) but real values in training rows, so a
# model that learned them would be asked about a state it never trained on.
_TTFT = (
    "is_queued",
    "kv_cache_percentage",
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
    "prefill_tokens_in_flight",
    "encoder_matched_size",
    "encoder_input_size",
    "prefix_cache_score",
    "effective_input_tokens",
    "prefill_score_bucket",
    "pod_type_code",
    "pod_class_code",
)
_TPOT = (
    "is_queued",
    "kv_cache_percentage",
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
    "prefill_tokens_in_flight",
    "pod_type_code",
    "pod_class_code",
)
_TOKEN_IN_FLIGHT = {"prefill_tokens_in_flight"}
_ENCODER = {"encoder_matched_size", "encoder_input_size"}


# Physics the model may not contradict: more prompt tokens, more queued requests or more
# tokens already being prefilled never make the first token come sooner.
TTFT_INCREASING = frozenset(
    {
        "is_queued",
        "input_token_length",
        "num_request_waiting",
        "prefill_tokens_in_flight",
        "effective_input_tokens",
    }
)


# A model of ms per queued request (shared.target_space) gets its growth with the queue
# from the (1 + waiting) factor; the time per queued request itself may fall as the queue
# grows (batched prefill, a saturated server whose requests time out), so its trees leave
# the queue free. Constrained as well, they had to predict at least the per-request time
# of short queues for long ones: on the chatbot trace's longest queues (250-535 waiting,
# TTFT capped at 300 s) p90s of 600 s and more (benchmarks/README.md).
QUEUE_FEATURES = frozenset({"is_queued", "num_request_waiting"})


def monotone_constraints(
    target: Target, names: Sequence[str], *, per_queued: bool = False
) -> tuple[int, ...]:
    """Per feature: 1 = prediction non-decreasing in it, 0 = free (library convention).
    Both objectives honour them (see shared.backends for why the quantile one can).
    `per_queued`: the model predicts ms per queued request (see QUEUE_FEATURES)."""
    increasing = TTFT_INCREASING if target is Target.TTFT else frozenset()
    if per_queued:
        increasing = increasing - QUEUE_FEATURES
    return tuple(1 if name in increasing else 0 for name in names)


def feature_names(
    target: Target, *, token_in_flight: bool = True, encoder: bool = True
) -> tuple[str, ...]:
    """Feature names for `target`, honouring the LATENCY_ENABLE_*_FEATURES switches."""
    dropped = (set() if token_in_flight else _TOKEN_IN_FLIGHT) | (set() if encoder else _ENCODER)
    names = _TTFT if target is Target.TTFT else _TPOT
    return tuple(n for n in names if n not in dropped)


# Features a bundle lists only when some of its training rows carry them (a non-zero
# column): a prediction server from before a feature refuses every bundle that names it, so
# during a rolling upgrade a new trainer must not name a feature its rows never set (llm-d's
# EPP sends no pod_class). Left out, nothing changes: no tree splits on a column that is 0 in
# every row (tests/training_server/test_pod_class.py).
CARRIED_ONLY = frozenset({"pod_class_code"})


def carried_features(names: Sequence[str], columns: Columns) -> tuple[str, ...]:
    """`names` less the CARRIED_ONLY features that no row of `columns` carries: what a
    model fitted on these rows is trained on and its bundle lists."""
    return tuple(
        name for name in names if name not in CARRIED_ONLY or bool(FEATURES[name](columns).any())
    )


def build_matrix(columns: Columns, names: Sequence[str]) -> np.ndarray:
    """Float32 matrix (rows x names) for a model; unknown names raise KeyError."""
    n = len(columns["input_token_length"])
    matrix = np.empty((n, len(names)), dtype=np.float32)
    for j, name in enumerate(names):
        matrix[:, j] = FEATURES[name](columns)
    return matrix


def columns_from_dicts(rows: Sequence[Mapping[str, Any]]) -> Columns:
    """Columns from already-validated rows (pydantic dumps or database rows)."""
    n = len(rows)
    columns: Columns = {
        name: np.fromiter((r.get(name) or 0 for r in rows), dtype=np.float64, count=n)
        for name in NUMERIC_FIELDS
    }
    for label, code in LABEL_CODES.items():
        columns[code_column(label)] = label_codes(code, [r.get(label) for r in rows])
    return columns
