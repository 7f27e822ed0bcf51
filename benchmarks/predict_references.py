"""What bench_predict reads the server's figures against, measured in the same process on
the same rows and model: the bare model call, the server's own tree walk, a naive handler
built like the existing service, and what the Prometheus metrics and the TPOT blend with
the level (shared.live_calibration) add to a call."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from benchmarks.common import say
from benchmarks.trace_files import prediction_rows, resample
from shared.backends import backend_for
from shared.features import build_matrix, columns_from_dicts
from shared.live_calibration import Blend, LiveOffsets
from shared.predictor import LoadedBundle
from shared.schemas import PredictionRequest
from shared.targets import TARGETS, Target

Cells = dict[tuple[int, int], dict[str, Any]]  # (rows, concurrency) -> one cell's figures


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def bare_call(bundle: LoadedBundle, rows: list[dict[str, Any]]) -> float:
    """Seconds per call of the library alone: both targets on ready float32 matrices, through
    its fastest entry point (XGBoost's C API predict call, as the server uses it)."""
    columns = columns_from_dicts(rows)
    matrices = {t: build_matrix(columns, bundle.features[t]) for t in TARGETS}
    backend = backend_for(bundle.model_type)
    return time_per_call(lambda: [backend.predict(bundle.models[t], matrices[t]) for t in TARGETS])


def walk_call(bundle: LoadedBundle, rows: list[dict[str, Any]]) -> float:
    """Seconds per call of the server's own tree walk (shared.tree_eval) on the same ready
    matrices: what is left of a call once decoding and HTTP are taken away."""
    columns = columns_from_dicts(rows)
    matrices = {t: build_matrix(columns, bundle.features[t]) for t in TARGETS}
    return time_per_call(lambda: [bundle.compiled[t].predict(matrices[t]) for t in TARGETS])


def metrics_call() -> float:
    """Seconds per call of what the server's Prometheus metrics add to a strict call."""
    from prometheus_client import CollectorRegistry

    from shared.web.predict_metrics import PredictMetrics

    metrics = PredictMetrics(CollectorRegistry())
    return time_per_call(lambda: metrics.observe("strict", 0.0004, 100))


def blend_calls(bundle: LoadedBundle, rows: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Seconds per LoadedBundle.predict on `rows`: with the live factor alone, with the pool's
    TPOT blend, and with two groups' blends (the rows carry no group: the masks still run)."""
    columns = columns_from_dicts(rows)
    pool = {t: 0.1 for t in TARGETS}
    plain = bundle.with_live(LiveOffsets(pool=pool))
    blended = bundle.with_live(LiveOffsets(pool=pool, blends={"": {Target.TPOT: Blend(0.5, 9)}}))
    grouped = bundle.with_live(
        LiveOffsets(
            pool=pool,
            groups={"h200": pool, "b200": pool},
            blends={g: {Target.TPOT: Blend(0.5, 9)} for g in ("h200", "b200")},
        )
    )
    return (
        time_per_call(lambda: plain.predict(columns)),
        time_per_call(lambda: blended.predict(columns)),
        time_per_call(lambda: grouped.predict(columns)),
    )


def naive_call(bundle: LoadedBundle, body: bytes) -> float:
    """Seconds per call of the handler the existing service is built like."""
    import pandas as pd
    import xgboost as xgb

    from shared.features import FEATURES, LABEL_FIELDS, code_column

    boosters = {t: b for t in TARGETS if isinstance(b := bundle.models[t], xgb.Booster)}
    assert len(boosters) == len(TARGETS)  # the shipped settings train XGBoost

    def handle() -> bytes:
        rows = [PredictionRequest(**r) for r in json.loads(body)["requests"]]
        frame = pd.DataFrame([r.model_dump() for r in rows])
        for label in LABEL_FIELDS:  # the rows carry no label: every code is 0
            frame[code_column(label)] = [0.0] * len(frame)
        out = {}
        for t in TARGETS:
            names = bundle.features[t]
            features = pd.DataFrame(
                {
                    n: FEATURES[n](
                        {
                            c: frame[c].to_numpy(dtype=float)
                            for c in frame.columns
                            if c not in LABEL_FIELDS
                        }
                    )
                    for n in names
                }
            )
            out[t.value] = boosters[t].predict(xgb.DMatrix(features))
        return json.dumps(
            {
                "predictions": [
                    {"ttft_ms": float(a), "tpot_ms": float(b)}
                    for a, b in zip(out["ttft"], out["tpot"], strict=True)
                ]
            }
        ).encode()

    return time_per_call(handle)


def time_per_call(fn: Callable[[], object], seconds: float = 1.0) -> float:
    for _ in range(5):
        fn()
    times: list[float] = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop and len(times) < 100_000:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def print_references(
    bundle: LoadedBundle,
    trace: list[dict[str, Any]],
    results: Cells,
    batches: list[int],
    levels: list[int],
) -> None:
    """The bare model, our walk and the naive handler in this process, against the server's
    best rows/s per batch size; then what the Prometheus metrics cost a call."""
    say(
        f"\n## references in this process, same rows and model (rows/s)\n"
        f"{'rows':>5} {'bare model':>11} {'our walk':>10} {'naive':>9} {'server best':>11} "
        f"{'server/naive':>12} {'bare/server':>11}"
    )
    for batch in batches:
        rows = prediction_rows(resample(trace, batch, seed=batch))
        body = orjson.dumps({"requests": rows})
        validated = [PredictionRequest.model_validate(r).model_dump() for r in rows]
        bare = batch / bare_call(bundle, validated)
        walk = batch / walk_call(bundle, validated)
        naive = batch / naive_call(bundle, body)
        best = max(
            results[(batch, c)]["calls"] / results[(batch, c)]["elapsed"] * batch for c in levels
        )
        say(
            f"{batch:5d} {bare:11.0f} {walk:10.0f} {naive:9.0f} {best:11.0f} "
            f"{best / naive:12.1f} "
            f"{bare / best:11.1f}"
        )
    cost_us = metrics_call() * 1e6
    server_us = [pct(results[(b, c)]["server_ms"], 50) * 1000 for b in batches for c in levels]
    say(
        f"\nPrometheus metrics per strict call: {cost_us:.1f} us = "
        f"{100 * cost_us / max(server_us):.1f}-{100 * cost_us / min(server_us):.1f} % of the "
        f"server's own p50 above"
    )
    say("\nLoadedBundle.predict (us per call): live factor alone / + pool TPOT blend / + 2 groups'")
    for batch in batches:
        rows = prediction_rows(resample(trace, batch, seed=batch))
        validated = [PredictionRequest.model_validate(r).model_dump() for r in rows]
        plain, pool, groups = (s * 1e6 for s in blend_calls(bundle, validated))
        say(f"{batch:5d} rows: {plain:7.1f} / {pool:7.1f} / {groups:7.1f}")
