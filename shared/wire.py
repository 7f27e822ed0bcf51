"""Encoding for the wire, framework-free: RFC 3339 times, JSON that survives what a client
sent, and the prediction answer bodies every predict route on both servers returns."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from shared.predictor import LoadedBundle
from shared.targets import Target


def finite_or_null(value: Any) -> Any:
    """`value` with every NaN and infinity replaced by None, as orjson writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def rfc3339(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z; a naive time is taken as UTC (all we store is UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _common(bundle: LoadedBundle) -> dict[str, Any]:
    return {
        "predicted_at": rfc3339(datetime.now(UTC)),
        "model_type": bundle.model_type.value,
        "objective_type": bundle.objective.value,
        "quantile": bundle.quantile,
        "last_model_load": None if bundle.is_prior else rfc3339(bundle.loaded_at),
        "model_version": bundle.version,
    }


def model_splits(bundle: LoadedBundle) -> dict[str, int]:
    """Ours, on the bulk answers: each target's split nodes (LoadedBundle.splits; 0 for the
    prior and for a constant), so a picker can tell a model that ranks pods by their
    features from one that cannot. Keys written out: this runs on every hot-path call."""
    splits = bundle.splits
    return {
        "ttft_model_splits": splits.get(Target.TTFT, 0),
        "tpot_model_splits": splits.get(Target.TPOT, 0),
    }


def prediction_payloads(
    bundle: LoadedBundle, predictions: dict[Target, np.ndarray]
) -> list[dict[str, Any]]:
    """One response object per row, in input order; built from plain lists for speed."""
    common = _common(bundle)
    ttft = predictions[Target.TTFT].tolist()
    tpot = predictions[Target.TPOT].tolist()
    return [{"ttft_ms": a, "tpot_ms": b, **common} for a, b in zip(ttft, tpot, strict=True)]


def encode_prediction(bundle: LoadedBundle, predictions: dict[Target, np.ndarray]) -> bytes:
    """The answer of /predict: the one row's response object."""
    return orjson.dumps(prediction_payloads(bundle, predictions)[0])


def predictions_json(bundle: LoadedBundle, predictions: dict[Target, np.ndarray]) -> bytes:
    """The JSON array prediction_payloads would encode to, built as bytes directly: each
    number is written once by orjson and every row shares one encoded tail (half the time)."""
    tail = b"," + orjson.dumps(_common(bundle))[1:]
    ttft = orjson.dumps(predictions[Target.TTFT], option=orjson.OPT_SERIALIZE_NUMPY)
    tpot = orjson.dumps(predictions[Target.TPOT], option=orjson.OPT_SERIALIZE_NUMPY)
    rows = [
        b'{"ttft_ms":%b,"tpot_ms":%b%b' % (a, b, tail)
        for a, b in zip(ttft[1:-1].split(b","), tpot[1:-1].split(b","), strict=True)
    ]
    return b"[" + b",".join(rows) + b"]"


def json_bytes(value: Any) -> bytes:
    """JSON for a body that may echo what a client sent: orjson, as everywhere; for an
    integer beyond 64 bits (which orjson refuses) the standard library, which writes it
    exactly. Non-finite floats become null either way, as orjson writes them."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(finite_or_null(value), allow_nan=False).encode()
