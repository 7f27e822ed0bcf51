"""The hot path: /predict/bulk/strict latency and throughput of one prediction server
process, read against the bare model call and a naive handler on the same rows.

    .venv/bin/python -m benchmarks.bench_predict [--batches 1,8,32,100,400]
        [--concurrency 1,16,64] [--seconds 3] [--url URL]

Trains a real bundle (the retrainer, shipped settings) on 20k rows resampled from the H200
traces, starts one prediction server process (LATENCY_WORKERS=1) pinned to one CPU, and
drives it from this process pinned to the other, over keep-alive HTTP/1.1 connections on
127.0.0.1, for `--seconds` per (batch size, concurrency) cell. Bodies are trace rows as the
EPP sends them. Per cell: calls/s, row predictions/s, client round-trip p50/p99 and the
server's own processing_time_ms p50/p99. Then, in this process on the same rows and model:
the bare model call (XGBoost's C API predict on a ready float32 matrix, both targets) and a
naive handler (json, a pydantic object per row, a pandas DataFrame, DMatrix + predict, json),
so the server's figures read as ratios measured in one run; and what the server's Prometheus
metrics add to a call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from benchmarks.common import pin, read_response, request_bytes, rss_mb, say, split_cpus
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port
from shared.backends import backend_for
from shared.features import build_matrix, columns_from_dicts
from shared.predictor import LoadedBundle, load_current_bundle
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import TrainingSettings
from shared.targets import TARGETS, Target
from shared.tree_eval import EVALUATOR
from training_server.db import make_engine
from training_server.metrics import TrainingMetrics
from training_server.migrate import upgrade
from training_server.retrain.loop import Retrainer, trainer_slot
from training_server.store import SampleStore

PROCESSING = re.compile(rb'"processing_time_ms":([0-9.eE+-]+)')
MAX_CALLS_PER_CELL = 200_000


def train_bundle(model_dir: Path, workdir: Path) -> LoadedBundle:
    url = f"sqlite:///{workdir / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    store = SampleStore(engine, test_ratio=0.1)
    store.add_samples(
        [TrainingEntry.model_validate(r) for r in resample(all_trace_rows(), 20_000, seed=3)]
    )
    settings = TrainingSettings(db_url=url, model_dir=model_dir)
    Retrainer(settings, store, TrainingMetrics(), trainer_slot(settings)).run_once()
    engine.dispose()
    bundle = load_current_bundle(model_dir)
    assert bundle is not None and all(bundle.has_model(t) for t in TARGETS)
    return bundle


async def one_connection(
    port: int,
    request: bytes,
    stop_at: float,
    budget: list[int],
    client_ms: list[float],
    server_ms: list[float],
) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    errors = 0
    try:
        while time.perf_counter() < stop_at and budget[0] > 0:
            budget[0] -= 1
            t0 = time.perf_counter()
            writer.write(request)
            head, body = await read_response(reader)
            client_ms.append((time.perf_counter() - t0) * 1000.0)
            if not head.startswith(b"HTTP/1.1 200"):
                errors += 1
                continue
            match = PROCESSING.search(body)
            server_ms.append(float(match.group(1)) if match else float("nan"))
    finally:
        writer.close()
    return errors


async def drive(port: int, body: bytes, concurrency: int, seconds: float) -> dict[str, Any]:
    request = request_bytes(port, body)
    client_ms: list[float] = []
    server_ms: list[float] = []
    budget = [MAX_CALLS_PER_CELL]
    started = time.perf_counter()
    errors = await asyncio.gather(
        *[
            one_connection(port, request, started + seconds, budget, client_ms, server_ms)
            for _ in range(concurrency)
        ]
    )
    elapsed = time.perf_counter() - started
    return {
        "calls": len(client_ms),
        "errors": sum(errors),
        "elapsed": elapsed,
        "client_ms": client_ms,
        "server_ms": server_ms,
    }


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


def naive_call(bundle: LoadedBundle, body: bytes) -> float:
    """Seconds per call of the handler the existing service is built like."""
    import pandas as pd
    import xgboost as xgb

    from shared.features import FEATURES, LABEL_FIELDS, code_column

    boosters: dict[Target, xgb.Booster] = {}
    for t in TARGETS:
        booster = bundle.models[t]
        assert isinstance(booster, xgb.Booster)  # the shipped settings train XGBoost
        boosters[t] = booster

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


def measure_server(
    port: int, trace: list[dict[str, Any]], batches: list[int], levels: list[int], seconds: float
) -> dict[tuple[int, int], dict[str, Any]]:
    """Every (batch size, concurrency) cell against the server, one table line each."""
    say(
        f"\n{'rows':>5} {'conc':>5} {'calls/s':>9} {'rows/s':>10} {'client p50':>10} "
        f"{'p99':>7} {'server p50':>10} {'p99':>7} {'errors':>6}"
    )
    results: dict[tuple[int, int], dict[str, Any]] = {}
    for batch in batches:
        body = orjson.dumps({"requests": prediction_rows(resample(trace, batch, seed=batch))})
        asyncio.run(drive(port, body, 1, 0.3))  # warm-up
        for level in levels:
            r = asyncio.run(drive(port, body, level, seconds))
            results[(batch, level)] = r
            calls_s = r["calls"] / r["elapsed"]
            say(
                f"{batch:5d} {level:5d} {calls_s:9.0f} {calls_s * batch:10.0f} "
                f"{pct(r['client_ms'], 50):10.3f} {pct(r['client_ms'], 99):7.3f} "
                f"{pct(r['server_ms'], 50):10.3f} {pct(r['server_ms'], 99):7.3f} "
                f"{r['errors']:6d}"
            )
    return results


def print_references(
    bundle: LoadedBundle,
    trace: list[dict[str, Any]],
    results: dict[tuple[int, int], dict[str, Any]],
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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,100,400")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    server_cpu, client_cpus = split_cpus()
    trace = all_trace_rows()
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as tmp:
        workdir = Path(tmp)
        bundle = train_bundle(workdir / "models", workdir)
        env = {"LATENCY_MODEL_DIR": str(workdir / "models"), "LATENCY_WORKERS": "1"}
        server = ServerProcess("prediction_server", free_port(), env, workdir / "server.log")
        server.start()
        try:
            pin(server.pid, server_cpu)
            pin(os.getpid(), client_cpus)
            say(
                f"bundle {bundle.version}: {len(bundle.features)} targets, tree walk "
                f"{EVALUATOR}; server pid "
                f"{server.pid} on CPU {server_cpu}, client on CPU {client_cpus}; "
                f"RSS {rss_mb(server.pid):.0f} MB"
            )
            results = measure_server(server.port, trace, batches, levels, args.seconds)
            rss = rss_mb(server.pid)
        finally:
            server.stop()
        say(f"\nserver RSS after the run: {rss:.0f} MB")
        print_references(bundle, trace, results, batches, levels)


if __name__ == "__main__":
    main()
