"""A small, seeded simulator of vLLM request latencies, for the demo, the tests and the
benchmarks, and real models fitted on it (`publish_trained_bundle`).

Shaped like the physics the models must learn: TTFT grows with uncached prompt tokens,
tokens already being prefilled and queue depth; TPOT grows with running requests and KV
load. Each row measures one target, as the EPP reports them (the other actual is 0).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from shared.artifact import Manifest, TargetManifest, new_version, write_bundle
from shared.backends import FitParams, backend_for
from shared.features import build_matrix, columns_from_dicts, feature_names
from shared.settings import ModelType, ObjectiveType
from shared.target_space import TargetSpace, space_for, to_label
from shared.targets import TARGETS

POD_TYPES = ("", "", "", "prefill", "decode", "both")


def synthetic_row(rng: random.Random, *, measure: str | None = None) -> dict[str, Any]:
    waiting = rng.choice((0, 0, 0, 1, 2, 5))
    running = rng.randint(0, 32)
    input_len = int(rng.lognormvariate(6.0, 1.2))
    prefix = rng.choice((0.0, 0.0, rng.random()))
    kv = min(1.0, running / 40.0 + rng.random() * 0.1)
    in_flight = rng.randint(0, 4096) if running else 0
    effective = (1.0 - prefix) * input_len
    ttft = 20.0 + 0.12 * effective + 0.05 * in_flight + 150.0 * waiting
    ttft *= rng.lognormvariate(0.0, 0.25)
    tpot = (8.0 + 0.6 * running + 30.0 * kv) * rng.lognormvariate(0.0, 0.15)
    measure = measure or rng.choice(("ttft", "tpot"))
    return {
        "kv_cache_percentage": kv,
        "input_token_length": input_len,
        "num_request_waiting": waiting,
        "num_request_running": running,
        "num_tokens_generated": 0 if measure == "ttft" else rng.randint(1, 512),
        "prefix_cache_score": prefix,
        "pod_type": rng.choice(POD_TYPES),
        "prefill_tokens_in_flight": in_flight,
        "decode_tokens_in_flight": 0,
        "actual_ttft_ms": ttft if measure == "ttft" else 0.0,
        "actual_tpot_ms": tpot if measure == "tpot" else 0.0,
    }


def synthetic_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [synthetic_row(rng) for _ in range(n)]


def prediction_row(**overrides: Any) -> dict[str, Any]:
    """A valid prediction request with the EPP's prediction-time constants."""
    row: dict[str, Any] = {
        "kv_cache_percentage": 0.3,
        "input_token_length": 500,
        "num_request_waiting": 0,
        "num_request_running": 4,
        "num_tokens_generated": 1,
        "prefix_cache_score": 0.0,
        "pod_type": "",
        "prefill_tokens_in_flight": 0,
        "decode_tokens_in_flight": 0,
    }
    row.update(overrides)
    return row


def publish_trained_bundle(
    model_dir: Path,
    model_type: ModelType = ModelType.XGBOOST,
    objective: ObjectiveType = ObjectiveType.QUANTILE,
    *,
    rows: int = 400,
    seed: int = 0,
    version: str | None = None,
    legacy_ms: bool = False,
    without_features: tuple[str, ...] = (),
    n_estimators: int = 20,
) -> Manifest:
    """Fit real models on synthetic rows and publish them as one bundle, each target in the
    space the trainer uses (or in plain ms, as bundles from before shared.target_space);
    `without_features` leaves features out, as bundles from before they existed."""
    backend = backend_for(model_type)
    params = FitParams(objective=objective, quantile=0.9, n_estimators=n_estimators, max_depth=4)
    data = synthetic_rows(rows, seed=seed)
    models, entries = {}, {}
    for target in TARGETS:
        measured = [r for r in data if r[target.actual_field] > 0]
        names = tuple(n for n in feature_names(target) if n not in without_features)
        columns = columns_from_dicts(measured)
        space = TargetSpace.MS if legacy_ms else space_for(target)
        y = to_label(space, columns, np.array([r[target.actual_field] for r in measured]))
        models[target] = backend.fit(build_matrix(columns, names), y, params, names)
        entries[target] = TargetManifest(
            file=None, features=list(names), space=space, train_samples=len(measured)
        )
    manifest = Manifest(
        version=version or new_version(),
        created_at=datetime.now(UTC),
        model_type=model_type,
        objective=objective,
        quantile=0.9,
        targets=entries,
    )
    write_bundle(model_dir, manifest, models)
    return manifest
