"""The hot path: /predict/bulk/strict latency and throughput of one prediction server
process, read against the bare model call and a naive handler on the same rows.

    .venv/bin/python -m benchmarks.bench_predict [--batches 1,8,32,100,400]
        [--concurrency 1,16,64] [--seconds 3] [--pool NAME]

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

A named pool (`--pool`, default "bench"; "" for none) gets its own bundle, trained the same
way on the same rows in its part of the store, published in <model_dir>/pools/<name>; each
cell is also measured on /pools/<name>/predict/bulk/strict, before or after the default
pool's in turns, and both figures and named / default print at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.common import pin, read_response, request_bytes, rss_mb, say, split_cpus
from benchmarks.predict_references import Cells, pct, print_references
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port
from shared.pools import DEFAULT_POOL, POOL_NAME, POOL_NAME_RULE, pool_model_dir
from shared.predictor import LoadedBundle, load_current_bundle
from shared.schemas import TrainingEntry
from shared.settings import TrainingSettings
from shared.slot import prior_slot
from shared.targets import TARGETS
from shared.tree_eval import EVALUATOR
from training_server.db import make_engine
from training_server.metrics import TrainingMetrics
from training_server.migrate import upgrade
from training_server.retrain.retrainer import Retrainer
from training_server.store import SampleStore

PROCESSING = re.compile(rb'"processing_time_ms":([0-9.eE+-]+)')
MAX_CALLS_PER_CELL = 200_000


def train_bundles(model_dir: Path, workdir: Path, pools: list[str]) -> dict[str, LoadedBundle]:
    """Each pool's bundle, trained by the retrainer on the same rows (and the same held-out
    split) in the pool's part of one store, published in the pool's model directory."""
    url = f"sqlite:///{workdir / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    rows = [TrainingEntry.model_validate(r) for r in resample(all_trace_rows(), 20_000, seed=3)]
    bundles = {}
    for pool in pools:
        store = SampleStore(engine, test_ratio=0.1, rng=random.Random(3), pool=pool)
        store.add_samples(rows)
        settings = TrainingSettings(db_url=url, model_dir=pool_model_dir(model_dir, pool))
        Retrainer(settings, store, TrainingMetrics(), prior_slot(settings)).run_once()
        bundle = load_current_bundle(settings.model_dir)
        assert bundle is not None and all(bundle.has_model(t) for t in TARGETS)
        bundles[pool] = bundle
    engine.dispose()
    return bundles


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


async def drive(
    port: int, body: bytes, concurrency: int, seconds: float, pool: str = DEFAULT_POOL
) -> dict[str, Any]:
    request = request_bytes(port, body)
    if pool != DEFAULT_POOL:
        request = request.replace(b"POST /", f"POST /pools/{pool}/".encode(), 1)
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


def measure_server(
    port: int,
    trace: list[dict[str, Any]],
    batches: list[int],
    levels: list[int],
    seconds: float,
    pool: str | None = None,
) -> tuple[Cells, Cells]:
    """Every (batch size, concurrency) cell against the server, one table line each (the
    default pool's); with `pool`, every cell on that pool's route too, the two in turns."""
    say(
        f"\n{'rows':>5} {'conc':>5} {'calls/s':>9} {'rows/s':>10} {'client p50':>10} "
        f"{'p99':>7} {'server p50':>10} {'p99':>7} {'errors':>6}"
    )
    results: Cells = {}
    named: Cells = {}
    pools = [DEFAULT_POOL] if pool is None else [DEFAULT_POOL, pool]
    for batch in batches:
        body = orjson.dumps({"requests": prediction_rows(resample(trace, batch, seed=batch))})
        for p in pools:
            asyncio.run(drive(port, body, 1, 0.3, p))  # warm-up
        for level in levels:
            for p in pools if len(results) % 2 == 0 else pools[::-1]:
                cells = results if p == DEFAULT_POOL else named
                cells[(batch, level)] = asyncio.run(drive(port, body, level, seconds, p))
            r = results[(batch, level)]
            calls_s = r["calls"] / r["elapsed"]
            say(
                f"{batch:5d} {level:5d} {calls_s:9.0f} {calls_s * batch:10.0f} "
                f"{pct(r['client_ms'], 50):10.3f} {pct(r['client_ms'], 99):7.3f} "
                f"{pct(r['server_ms'], 50):10.3f} {pct(r['server_ms'], 99):7.3f} "
                f"{r['errors']:6d}"
            )
    return results, named


def print_pool_ratio(pool: str, results: Cells, named: Cells) -> None:
    """The named pool's cells beside the default pool's: rows/s and the server's own
    p50 / p99, each with named / default."""
    say(
        f"\n## pool {pool} (/pools/{pool}/predict/bulk/strict) against the default pool, "
        f"same server and cells\n{'rows':>5} {'conc':>5} {'default rows/s':>14} "
        f"{'named rows/s':>12} {'ratio':>6} {'server p50 def':>14} {'named':>7} {'ratio':>6} "
        f"{'p99 def':>8} {'named':>7} {'ratio':>6} {'errors':>6}"
    )
    ratios = []
    for (batch, level), d in results.items():
        n = named[(batch, level)]
        rates = [r["calls"] / r["elapsed"] * batch for r in (d, n)]
        p50s = [pct(r["server_ms"], 50) for r in (d, n)]
        p99s = [pct(r["server_ms"], 99) for r in (d, n)]
        ratios.append(rates[1] / rates[0])
        say(
            f"{batch:5d} {level:5d} {rates[0]:14.0f} {rates[1]:12.0f} {ratios[-1]:6.2f} "
            f"{p50s[0]:14.3f} {p50s[1]:7.3f} {p50s[1] / p50s[0]:6.2f} "
            f"{p99s[0]:8.3f} {p99s[1]:7.3f} {p99s[1] / p99s[0]:6.2f} {n['errors']:6d}"
        )
    say(
        f"named / default rows/s over the {len(ratios)} cells: {min(ratios):.2f}-"
        f"{max(ratios):.2f}, median {statistics.median(ratios):.2f}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,100,400")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pool", default="bench", help='a named pool to measure too ("": none)')
    args = parser.parse_args()
    if args.pool and (args.pool == DEFAULT_POOL or not POOL_NAME.fullmatch(args.pool)):
        parser.error(f"--pool {args.pool!r}: not a named pool ({POOL_NAME_RULE}, not default)")
    return args


def main() -> None:
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    server_cpu, client_cpus = split_cpus()
    trace = all_trace_rows()
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as tmp:
        workdir = Path(tmp)
        pools = [DEFAULT_POOL, args.pool] if args.pool else [DEFAULT_POOL]
        bundles = train_bundles(workdir / "models", workdir, pools)
        bundle = bundles[DEFAULT_POOL]
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
            if args.pool:  # the server serves every published pool once it is ready
                ready = httpx.get(f"{server.url}/pools/{args.pool}/readyz", trust_env=False)
                assert ready.json()["model_version"] == bundles[args.pool].version, ready.text
                say(f"pool {args.pool}: bundle {bundles[args.pool].version}, served")
            results, named = measure_server(
                server.port, trace, batches, levels, args.seconds, args.pool or None
            )
            rss = rss_mb(server.pid)
        finally:
            server.stop()
        say(f"\nserver RSS after the run: {rss:.0f} MB")
        print_references(bundle, trace, results, batches, levels)
        if args.pool:
            print_pool_ratio(args.pool, results, named)


if __name__ == "__main__":
    main()
