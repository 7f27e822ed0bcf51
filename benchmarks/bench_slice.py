"""Figures for the vertical slice, on the recorded H200 traces:

1. retrain time (both targets: retention, window load, fit, evaluation, export) at 10k and
   100k stored samples, in-process on a real SQLite file;
2. ingest -> both prediction servers serving the new version, with real processes;
3. latency of a 100-row /predict/bulk/strict call (client-side and server-side).

    .venv/bin/python -m benchmarks.bench_slice [--calls 2000] [--cycles 3]

Talks only to 127.0.0.1; every loop is bounded in count and time; it ends the servers it
started, by PID.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import say
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port
from shared.schemas import TrainingEntry
from shared.settings import TrainingSettings
from shared.slot import prior_slot
from shared.targets import Target
from training_server.db import make_engine
from training_server.metrics import TrainingMetrics
from training_server.migrate import upgrade
from training_server.retrain.retrainer import Retrainer
from training_server.retrain_record import NO_TARGET
from training_server.store import SampleStore


def bench_retrain(sizes: list[int], workdir: Path) -> None:
    rows = all_trace_rows()
    say("\n## retrain time (both targets, the shipped model settings)")
    say(
        f"{'stored':>8} {'ttft train':>10} {'tpot train':>10} {'retrain s':>10} "
        f"{'ttft cov':>8} {'tpot cov':>8}"
    )
    for n in sizes:
        url = f"sqlite:///{workdir / f'retrain-{n}.db'}"
        upgrade(url)
        engine = make_engine(url)
        store = SampleStore(engine, test_ratio=0.1)
        entries = [TrainingEntry.model_validate(r) for r in resample(rows, n, seed=n)]
        for i in range(0, n, 10_000):
            store.add_samples(entries[i : i + 10_000])
        settings = TrainingSettings(
            db_url=url,
            model_dir=workdir / f"models-{n}",
            min_samples_for_retrain=10,
            # retention raised so the whole n is trained on (default caps 10k per bucket)
            max_training_data_size_per_bucket=1_000_000,
            max_test_data_size=1_000_000,
        )
        retrainer = Retrainer(settings, store, TrainingMetrics(), prior_slot(settings))
        t0 = time.perf_counter()
        outcome = retrainer.run_once()
        elapsed = time.perf_counter() - t0
        last = retrainer.state.last_success
        ttft, tpot = (last.target(t) if last else NO_TARGET for t in (Target.TTFT, Target.TPOT))
        say(
            f"{n:8d} {ttft.train_samples or 0:10d} {tpot.train_samples or 0:10d}"
            f" {elapsed:10.2f} {ttft.coverage or 0:8.3f} "
            f"{tpot.coverage or 0:8.3f}  ({outcome})"
        )
        engine.dispose()


def _served(predictors: list[ServerProcess]) -> set[str]:
    return {httpx.get(f"{p.url}/status").json()["model_version"] for p in predictors}


def ingest_to_served(
    client: httpx.Client,
    trainer: ServerProcess,
    predictors: list[ServerProcess],
    rows: list[dict[str, Any]],
    cycles: int,
) -> None:
    """Per cycle: 1,000 rows in, then until both predictors serve one new version."""
    say("\n## ingest -> both prediction servers serve the new version (interval 10 s)")
    say(f"{'cycle':>5} {'ingest->served s':>16} {'published->served s':>19}")
    for cycle in range(cycles):
        before = _served(predictors)
        batch = resample(rows, 1000, seed=100 + cycle)
        t0 = time.time()
        assert (
            client.post(
                f"{trainer.url}/add_training_data_bulk", json={"entries": batch}
            ).status_code
            == 202
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            served = _served(predictors)
            if len(served) == 1 and served != before:
                break
            time.sleep(0.05)
        done = time.time()
        status = httpx.get(f"{predictors[0].url}/status").json()
        created = status["model_created_at"]
        published = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        last = httpx.get(f"{trainer.url}/retrains?limit=1").json()["retrains"][0]
        say(f"{cycle:5d} {done - t0:16.2f} {done - published - last['duration_s']:19.2f}")


def strict_call_latency(
    client: httpx.Client, predictor: ServerProcess, rows: list[dict[str, Any]], calls: int
) -> None:
    """`calls` sequential 100-row strict calls (at most 120 s), client and server side."""
    say(f"\n## 100-row /predict/bulk/strict, {calls} sequential calls, one server process")
    body = {"requests": prediction_rows(resample(rows, 100, seed=7))}
    url = f"{predictor.url}/predict/bulk/strict"
    for _ in range(50):
        client.post(url, json=body)
    client_ms, server_ms = [], []
    deadline = time.monotonic() + 120
    for _ in range(calls):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        reply = client.post(url, json=body)
        client_ms.append((time.perf_counter() - t0) * 1000)
        server_ms.append(reply.json()["processing_time_ms"])
    for label, values in (("client round trip", client_ms), ("server processing", server_ms)):
        q = statistics.quantiles(values, n=100)
        say(f"{label:>18}: p50 {q[49]:.3f} ms  p99 {q[98]:.3f} ms  (n={len(values)})")


def bench_live(workdir: Path, calls: int, cycles: int) -> None:
    rows = all_trace_rows()
    env = {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'live.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "live-models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "10",
    }
    trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
    predictors = [
        ServerProcess("prediction_server", free_port(), env, workdir / f"pred-{i}.log")
        for i in range(2)
    ]
    try:
        trainer.start()
        for p in predictors:
            p.start()
        client = httpx.Client(timeout=30)
        ingest_to_served(client, trainer, predictors, rows, cycles)
        strict_call_latency(client, predictors[0], rows, calls)
        client.close()
    finally:
        for server in (trainer, *predictors):
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--cycles", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-slice-") as tmp:
        bench_retrain([int(s) for s in args.sizes.split(",")], Path(tmp))
        bench_live(Path(tmp), args.calls, args.cycles)


if __name__ == "__main__":
    main()
