"""Store figures on SQLite and PostgreSQL, from the recorded H200 traces:

1. ingestion rows/s through the real training server (bulk calls of 1,000 rows, as the EPP
   sends every second), sequential and with 4 concurrent senders;
2. time to load the training window of one target with 200k rows stored;
3. RSS of the training server idle and after the ingestion load, and of a prediction server
   (one worker) idle and under a 100-row predict load.

    .venv/bin/python -m benchmarks.bench_store [--batches 60] [--pg-url URL]

Talks only to 127.0.0.1; bounded loops; ends the servers it started, by PID.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from benchmarks.common import rss_mb, say
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port
from devkit.synthetic import publish_trained_bundle
from shared.schemas import TrainingEntry
from shared.targets import Target
from training_server.db import make_engine
from training_server.migrate import upgrade
from training_server.store import SampleStore

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


class PgSchema:
    """A throwaway schema on the real server."""

    def __init__(self, base_url: str):
        self.base_url, self.name = base_url, f"bench_{uuid.uuid4().hex[:10]}"
        self.url = f"{base_url}?options=-csearch_path%3D{self.name}"

    def __enter__(self) -> str:
        with create_engine(self.base_url).begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{self.name}"'))
        return self.url

    def __exit__(self, *_: object) -> None:
        engine = create_engine(self.base_url)
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{self.name}" CASCADE'))
        engine.dispose()


def ingest_rate(url: str, batches: list[list[dict[str, Any]]], senders: int) -> float:
    def send(batch: list[dict[str, Any]]) -> int:
        reply = httpx.post(f"{url}/add_training_data_bulk", json={"entries": batch}, timeout=60)
        return len(batch) if reply.status_code == 202 else 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(senders) as threads:
        accepted = sum(threads.map(send, batches))
    return accepted / (time.perf_counter() - t0)


def bench_ingest(label: str, db_url: str, workdir: Path, n_batches: int) -> None:
    rows = all_trace_rows()
    env = {
        "LATENCY_DB_URL": db_url,
        "LATENCY_MODEL_DIR": str(workdir / f"models-{label}"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
    }  # ingestion only, no retrain
    server = ServerProcess("training_server", free_port(), env, workdir / f"train-{label}.log")
    server.start()
    try:
        assert server.proc is not None
        idle = rss_mb(server.pid)
        batches = [resample(rows, 1000, seed=i) for i in range(n_batches)]
        sequential = ingest_rate(server.url, batches[: n_batches // 2], 1)
        concurrent = ingest_rate(server.url, batches[n_batches // 2 :], 4)
        loaded = rss_mb(server.pid)
        say(f"{label:>10} {sequential:12.0f} {concurrent:12.0f} {idle:9.0f} {loaded:11.0f}")
    finally:
        server.stop()


def bench_window(label: str, db_url: str, n: int) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    store = SampleStore(engine, test_ratio=0.1)
    entries = [TrainingEntry.model_validate(r) for r in resample(all_trace_rows(), n, seed=1)]
    t0 = time.perf_counter()
    for i in range(0, n, 10_000):
        store.add_samples(entries[i : i + 10_000])
    insert_s = time.perf_counter() - t0
    timings = []
    for limit in (None, 100_000, 20_000):
        t0 = time.perf_counter()
        _, y = store.window(Target.TTFT, test=False, limit=limit)
        timings.append(f"{len(y):>7} rows {time.perf_counter() - t0:6.2f}s")
    say(
        f"{label:>10} {n:>8} stored in {insert_s:5.1f}s ({n / insert_s:6.0f} rows/s in-process);"
        f" window: {'; '.join(timings)}"
    )
    engine.dispose()


def bench_prediction_rss(workdir: Path, model_dir: Path, calls: int) -> None:
    env = {"LATENCY_MODEL_DIR": str(model_dir), "LATENCY_WORKERS": "1"}
    server = ServerProcess("prediction_server", free_port(), env, workdir / "pred.log").start()
    try:
        assert server.proc is not None
        idle = rss_mb(server.pid)
        body = {"requests": prediction_rows(resample(all_trace_rows(), 100, seed=3))}
        with httpx.Client(timeout=10) as client:
            deadline = time.monotonic() + 60
            for _ in range(calls):
                if time.monotonic() > deadline:
                    break
                client.post(f"{server.url}/predict/bulk/strict", json=body)
        say(
            f"prediction server RSS: idle {idle:.0f} MB, after {calls} 100-row calls "
            f"{rss_mb(server.pid):.0f} MB"
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--window-rows", type=int, default=200_000)
    parser.add_argument("--pg-url", default=PG_URL)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        work = Path(tmp)
        say("\n## ingestion through the training server, bulk 1,000 rows")
        say(
            f"{'store':>10} {'seq rows/s':>12} {'4x rows/s':>12} {'idle RSS':>9} "
            f"{'loaded RSS':>11}  (MB)"
        )
        bench_ingest("sqlite", f"sqlite:///{work / 'ingest.db'}", work, args.batches)
        with PgSchema(args.pg_url) as url:
            bench_ingest("postgresql", url, work, args.batches)
        say(f"\n## training window of one target at {args.window_rows} stored rows")
        bench_window("sqlite", f"sqlite:///{work / 'window.db'}", args.window_rows)
        with PgSchema(args.pg_url) as url:
            bench_window("postgresql", url, args.window_rows)
        say("\n## prediction server memory")
        model_dir = work / "models-sqlite"
        publish_trained_bundle(model_dir, rows=2000)
        bench_prediction_rss(work, model_dir, 2000)


if __name__ == "__main__":
    main()
